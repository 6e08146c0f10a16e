"""The files neuron-prof writes do not depend on Python's hash seed: the same trace loaded and written in processes
with different `PYTHONHASHSEED` gives the same bytes (`.pftrace`, Chrome JSON, `summary --json`).

A chunk of traceEvents with several phases (instants, counters, metadata) creates tracks and processes in the
order the phases are handled; handled in a set's order, the order (and the `.pftrace`'s remapped pids) changed
from one process to the next."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SEEDS = ("1", "2", "3", "4", "5", "6")
"""Enough seeds that a set of four phase strings iterates in more than one order among them."""

_WRITE = """
import sys
import neuron_prof
from neuron_prof.exporters.chrome_json import write_chrome_json
from neuron_prof.exporters.perfetto import write_pftrace
t = neuron_prof.load(sys.argv[1])
write_pftrace(t, sys.argv[2])
write_chrome_json(t, sys.argv[3])
"""


def _trace(path: Path) -> Path:
    """A Kineto-like trace whose one chunk mixes phases, each on a process of its own (string and int pids)."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 1, "ts": 1000.0, "dur": 5.0},
          {"ph": "i", "s": "t", "cat": "marker", "name": "mark", "pid": "Traces", "tid": "t", "ts": 1001.0},
          {"ph": "C", "name": "mem", "pid": "Counters", "ts": 1002.0, "args": {"bytes": 3}},
          {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "named"}},
          {"ph": "B", "cat": "user", "name": "region", "pid": "Spans", "tid": 2, "ts": 1000.5},
          {"ph": "E", "pid": "Spans", "tid": 2, "ts": 1003.0},
          {"ph": "i", "s": "t", "cat": "marker", "name": "mark2", "pid": 7, "tid": 3, "ts": 1002.5}]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    return path


def _written(src: Path, out: Path, seed: str) -> tuple[bytes, bytes]:
    env = {**os.environ, "PYTHONHASHSEED": seed, "NEURON_PROF_CACHE": "0"}
    pf, js = out / f"{seed}.pftrace", out / f"{seed}.json"
    subprocess.run([sys.executable, "-c", _WRITE, str(src), str(pf), str(js)], env=env, check=True)
    return pf.read_bytes(), js.read_bytes()


def test_written_files_do_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    src = _trace(tmp_path / "mixed.json")
    files = {seed: _written(src, tmp_path, seed) for seed in SEEDS}
    first = files[SEEDS[0]]
    assert first[0] and first[1]
    for seed, got in files.items():
        assert got[0] == first[0], f".pftrace differs with PYTHONHASHSEED={seed}"
        assert got[1] == first[1], f"Chrome JSON differs with PYTHONHASHSEED={seed}"


def test_summary_json_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    src = _trace(tmp_path / "mixed.json")
    outs = set()
    for seed in SEEDS[:3]:
        env = {**os.environ, "PYTHONHASHSEED": seed, "NEURON_PROF_CACHE": "0"}
        r = subprocess.run([sys.executable, "-m", "neuron_prof", "summary", str(src), "--json"], env=env,
                           check=True, capture_output=True)
        outs.add(r.stdout)
    assert len(outs) == 1
