"""A real 2- and 4-process gloo job, and a 2-process job on the emulated neuron device and its c10d backend,
on 127.0.0.1: per-rank traces, merge recovers an artificial clock offset and names the delayed rank and its
cause (data loading; a first-call compile stall on the neuron device)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from neuron_prof import load
from neuron_prof.cli import main
from tests.userland import _fork as forked

WORKER = Path(__file__).with_name("_dist_worker.py")
SKEW_S = 3
BOUND_NS = 10_000_000  # host-measured exits of a gloo all_reduce on loopback: < 1 ms idle; up to ~6 ms seen with 4 ranks on 2 busy cores


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_job(tmp: Path, world: int, delayed: int, steps: int = 6, backend: str = "gloo") -> list[Path]:
    port = _free_port()
    out = tmp / "run" / "trace.json"
    env = {**os.environ, "WORLD_SIZE": str(world), "PYTHONPATH": str(Path(__file__).parents[1]),
           "OMP_NUM_THREADS": "1", "DIST_BACKEND": backend}
    # each rank a process forked from one that imported torch already (the suite's time: ~1 s of CPU less a rank)
    procs = forked.run_many([([str(WORKER), str(out), str(port), str(delayed), str(steps)], {**env, "RANK": str(r)})
                             for r in range(world)], cwd=tmp, timeout=240, merge=True)
    logs = [p.stdout for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(logs)
    files = [tmp / "run" / f"trace.rank{r}.json" for r in range(world)]
    for r, f in enumerate(files):
        assert f.exists(), logs[r]
        assert f.with_suffix("").with_suffix(".pftrace").exists() or (tmp / "run" / f"trace.rank{r}.pftrace").exists()
    return files


@pytest.mark.slow
@pytest.mark.parametrize("backend,world,delayed,skewed", [("gloo", 2, 1, 0), ("gloo", 4, 2, 3), ("neuron", 2, 0, 1)])
def test_merge_real_job(tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str, world: int, delayed: int,
                        skewed: int) -> None:
    files = _run_job(tmp_path, world, delayed, backend=backend)
    for r, f in enumerate(files):
        t = load(f)
        assert t.rank == r and t.metadata.get("world_size") == world
    merged_path = tmp_path / "merged.pftrace"
    assert main(["merge", *map(str, files), "-o", str(merged_path), "--skew", f"{skewed}={SKEW_S}s"]) == 0
    out = capsys.readouterr().out
    merged = load(merged_path)
    align = merged.metadata["alignment"]["offsets"]
    ref = merged.metadata["alignment"]["reference_rank"]
    assert ref == 0
    for r in range(1, world):
        o = align[str(r)]
        # a skewed clock (the rank's or the reference's) is aligned on the collectives; the others share the
        # reference's machine, and so its clock
        assert o["method"] == ("collectives" if skewed in (r, ref) else "host_clock"), out
        # the skewed rank's offset undoes the skew (relative to the reference rank), the others stay near 0
        expect = (-SKEW_S * 10**9 if r == skewed else 0) + (SKEW_S * 10**9 if skewed == ref else 0)
        assert abs(o["offset_ns"] - expect) < BOUND_NS, (r, o)
        assert o["uncertainty_ns"] < BOUND_NS
    stragglers = [f for f in merged.findings if f["kind"] == "straggler"]
    assert stragglers, out
    # the delayed rank is the one late at (nearly) every collective; another rank may be late once, at the
    # first collective, while its profiler was still starting
    top = max(stragglers, key=lambda f: f["count"])
    assert top["rank"] == delayed and top["count"] >= 4, [(f["rank"], f["count"]) for f in stragglers]
    cause = top["evidence"]["cause"]
    if backend == "neuron":  # the delayed rank compiled aten::mm for a new shape before each collective
        assert cause["cause"] == "a compile stall" and "mm" in cause["detail"], cause
        # the compile's line: the finding's own when the rank is last more often than chance (systematic); a
        # loaded machine can make it last at 5 of 6 only, which 2 ranks' binomial test calls jitter (info), and
        # jitter names no line but keeps what the late rank did in its cause
        assert "_dist_worker.py" in str(cause.get("call_site")), cause
        assert top["call_site"] == (cause["call_site"] if top["evidence"]["systematic"] else ""), top
    else:
        assert cause["cause"] == "data loading" and cause["detail"] == "load_batch"
    # every other rank waited ~30-40 ms per step for the delayed one
    for r, wait in top["evidence"]["wait_ns_by_rank"].items():
        assert wait > top["count"] * 20_000_000, (r, wait)
    # the merged trace has one process group per rank, and passes the Perfetto import checks
    assert sorted({p.rank for p in merged.processes}) == list(range(world))
    from tests.conftest import pftrace_check

    res = pftrace_check(merged_path)
    assert res.returncode == 0, res.stdout + res.stderr
