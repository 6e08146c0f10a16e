"""First-call compiles in both NEURON_LAUNCH_BLOCKING modes, through `neuron-prof run --emulate-neuron`.

torch-neuronx-facts, "Corrections and additions": with NEURON_LAUNCH_BLOCKING=1 (release builds' default) the op
waits for its compile; with 0 the compile runs on a background thread and the host pays where it next waits.
Expected times come from the emulator's ground-truth log, which the profiler never reads.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from neuron_prof.loaders import load
from neuron_prof.model import Arg, TrackKind

REPO = Path(__file__).resolve().parents[1]
PROGRAM = '''\
import os, sys, orjson, torch
from neuron_prof.emulator import ground_truth

x = torch.ones(32, 32, device="neuron")
torch.neuron.synchronize()
for i in range(2):
    y = torch.mm(x, x)      # line 7: first call compiles
    z = y.relu()            # line 8: first call compiles
    v = z.sum().item()      # line 9: the host waits for the device here
with open(sys.argv[1], "wb") as f:
    f.write(orjson.dumps(ground_truth().records(), option=orjson.OPT_SERIALIZE_NUMPY))
'''


def _run(tmp: Path, blocking: str) -> tuple[Any, list[dict[str, Any]]]:
    prog = tmp / "prog.py"
    prog.write_text(PROGRAM)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NEURON_LAUNCH_BLOCKING": blocking,
           "NEURON_PROF_EMULATE_COMPILE_SCALE": "8", "NEURON_PROF_CACHE": "0"}
    p = subprocess.run([sys.executable, "-m", "neuron_prof", "run", "--emulate-neuron", "-q", "-o",
                        str(tmp / "t.json"), "--no-pftrace", str(prog), str(tmp / "gt.json")],
                       cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return load(tmp / "t.json"), orjson.loads((tmp / "gt.json").read_bytes())


def _overlap(a0: int, a1: int, b0: int, b1: int) -> int:
    return max(0, min(a1, b1) - max(a0, b0))


@pytest.mark.parametrize("blocking", ["1", "0"])
def test_compile_stalls_in_both_launch_modes(tmp_path: Path, blocking: str) -> None:
    trace, gt = _run(tmp_path, blocking)
    compiles = {r["detail"]["cache_key"]: r for r in gt if r["kind"] == "compile"}
    assert all(r["detail"]["blocking"] is (blocking == "1") for r in compiles.values())
    assert trace.metadata["compile_cache"]["NEURON_LAUNCH_BLOCKING"] == blocking
    sl = trace.slices
    stalls = [int(r) for r in trace.slices_on(TrackKind.COMPILE)]
    thread = trace.find_track(TrackKind.OTHER, "neuron compile thread")
    mode = "blocking" if blocking == "1" else "async"
    assert trace.metadata["compile_cache"]["modes"] == [mode]
    assert {trace.slice_args(r)["mode"] for r in stalls} == {mode}
    mm = [r for r in stalls if trace.slice_name(r) == "aten::mm"]
    assert mm and all(trace.slice_args(r)[Arg.CALL_SITE] == "prog.py:7" for r in mm)
    if blocking == "1":  # each compile inside the op that paid for it, lasting the compile
        assert thread is None and len(stalls) == len(compiles)
        for r in stalls:
            c = compiles[trace.slice_args(r)[Arg.SIGNATURE]]
            assert abs(int(sl.ts_ns[r]) - c["host_start_ns"]) < 1_000_000
            assert abs(int(sl.dur_ns[r]) - (c["host_end_ns"] - c["host_start_ns"])) < 1_000_000
        return
    # asynchronous: the compiles on the compile thread's own track, as the runtime ran them
    work = [int(r) for r in range(len(sl)) if int(sl.track[r]) == thread]
    assert len(work) == len(compiles)
    for r in work:
        c = compiles[trace.slice_args(r)[Arg.SIGNATURE]]
        assert abs(int(sl.ts_ns[r]) - c["host_start_ns"]) < 1_000_000
        assert abs(int(sl.dur_ns[r]) - (c["host_end_ns"] - c["host_start_ns"])) < 1_000_000
    # the host's stall is what each wait overlapped of the compiles, charged to that wait, at the op's line
    waits = [r for r in gt if r["kind"] == "sync"]
    for key, c in compiles.items():
        want = sum(_overlap(c["host_start_ns"], c["host_end_ns"], w["host_start_ns"], w["host_end_ns"])
                   for w in waits)
        got = sum(int(sl.dur_ns[r]) for r in stalls if trace.slice_args(r)[Arg.SIGNATURE] == key)
        assert abs(got - want) < 2_000_000, (key, got, want)
    mm_wait = {trace.slice_args(r)["wait_call_site"] for r in mm}
    assert mm_wait == {"prog.py:9"}
    assert sum(int(sl.dur_ns[r]) for r in mm) < sum(int(sl.dur_ns[r]) for r in work
                                                    if trace.slice_name(r) == "aten::mm") + 1
