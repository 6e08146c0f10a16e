"""A trace bigger than the memory a process may use: read in pieces into memory-mapped columns (issue 35).

Each command runs in a subprocess whose address space is capped (RLIMIT_AS) below what loading the trace in
memory needs; it must stream the file into the column cache and give the same summary as an unlimited run."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 440 << 20
"""Address space of the capped runs: the in-memory load of the 114 MB trace peaks at ~510 MB of it."""


def _run(args: list[str], env: dict[str, str], limit: int | None) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    code = "import sys; from neuron_prof.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120, preexec_fn=cap)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "trace.json"
    subprocess.run([sys.executable, "-m", "bench.gen_trace", "400000", str(path)], cwd=ROOT, check=True,
                   capture_output=True)
    return path


def test_summary_and_check_of_a_trace_bigger_than_the_memory_limit(big: Path, tmp_path: Path) -> None:
    env = {"NEURON_PROF_CACHE_DIR": str(tmp_path / "cache"), "NEURON_PROF_STREAM_PIECE_MB": "4"}
    free = _run(["summary", str(big)], {"NEURON_PROF_CACHE": "0", "NEURON_PROF_STREAM": "0"}, None)
    assert free.returncode == 0, free.stderr
    # the in-memory load does not fit under the cap: the trace is bigger than this process may hold
    held = _run(["summary", str(big)], {**env, "NEURON_PROF_STREAM": "0"}, LIMIT)
    assert held.returncode != 0
    got = _run(["summary", str(big)], env, LIMIT)
    assert got.returncode == 0, got.stderr
    assert got.stdout == free.stdout
    assert list((tmp_path / "cache").glob("*.nprof/slices.ts_ns"))  # streamed into the column cache
    checked = _run(["check", str(big)], env, LIMIT)  # from the memory-mapped columns
    assert checked.returncode == 0, checked.stderr
