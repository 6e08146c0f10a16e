"""A real 8-process job (the emulated neuron device, its c10d backend over gloo on 127.0.0.1), captured once:
rank 3 loads data before every all_reduce (a straggler), rank 5 compiles a shape the others do not. Its job
summary through a LocalCluster (main()) and through a separately started `dask scheduler` + two `dask worker`
processes (a real `neuron-prof` subprocess); `merge --ranks` of the ranks it points at."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from neuron_prof import load
from neuron_prof.cli import main
from tests.userland import _fork as forked

WORLD, LATE, COMPILER = 8, 3, 5
WORKER = r"""
import os, sys, time
import torch, torch.distributed as dist
import neuron_prof
from neuron_prof import emulator

out, port = sys.argv[1], int(sys.argv[2])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
emulator.enable(emulator.EmulatorConfig(eager_compile_base_ms=5.0))
dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
grad = torch.ones(1024, device="neuron")
w = torch.randn(64, 64, device="neuron")
torch.mm(w, w).sum()  # every rank's own first compiles happen before the profiled steps
dist.barrier()
with neuron_prof.profile(out, quiet=True, profile_memory=False) as prof:
    for step in range(6):
        y = torch.mm(w, w).sum()
        time.sleep(0.02)  # the step's compute
        if rank == LATE:
            with torch.profiler.record_function("load_batch"):
                time.sleep(0.1)  # well above what 8 processes on 2 cores add by scheduling
        if rank == COMPILER and step == 2:
            torch.mm(w[:9], w)  # a shape no other rank runs: compiled on its first call
        dist.all_reduce(grad)
        prof.step()
dist.barrier()
dist.destroy_process_group()
""".replace("LATE", str(LATE)).replace("COMPILER", str(COMPILER))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The job's folder run/ holding trace.rank{0..7}.json and .pftrace (captured once for this module)."""
    tmp = tmp_path_factory.mktemp("job")
    script = tmp / "worker.py"
    script.write_text(WORKER)
    port = _free_port()
    env = {
        **os.environ,
        "WORLD_SIZE": str(WORLD),
        "PYTHONPATH": str(Path(__file__).parents[1]),
        "OMP_NUM_THREADS": "1",
    }
    # each rank a process forked from one that imported torch already (the suite's time: ~1 s of CPU less a rank)
    procs = forked.run_many([([str(script), str(tmp / "run" / "trace.json"), str(port)], {**env, "RANK": str(r)})
                             for r in range(WORLD)], cwd=tmp, timeout=300, merge=True)
    assert all(p.returncode == 0 for p in procs), "\n".join(p.stdout for p in procs)
    return tmp / "run"


def _check_summary(doc: dict, n_failed: int = 0) -> None:
    assert doc["schema"] == "neuron-prof.job-summary" and doc["version"] == 1
    ok = [r for r in doc["ranks"] if r["status"] == "ok"]
    assert [r["rank"] for r in ok] == list(range(WORLD))
    assert sum(r["status"] == "failed" for r in doc["ranks"]) == n_failed
    for r in ok:
        assert r["steps"] == 6 and r["step_median_ns"] > 20e6 and r["step_p90_ns"] >= r["step_median_ns"]
        assert r["collective_count"] == 6 and r["collective_ns_per_step"] is not None
    # rank 5 compiled once more than any other rank, and only it
    assert [r["rank"] for r in ok if r["compile_count"] > min(x["compile_count"] for x in ok)] == [COMPILER]
    kinds = {(f["kind"], f["rank"]) for f in doc["findings"]}
    strag = {f["rank"]: f for f in doc["findings"] if f["kind"] == "straggler"}
    # rank 3 is late at most collectives (its data loading); rank 5's extra compile can make it last at the
    # collective after it too, depending on where the others were then: true when said, with that cause
    assert LATE in strag and set(strag) <= {LATE, COMPILER}, strag
    assert strag[LATE]["evidence"]["cause"]["cause"] == "data loading" and strag[LATE]["count"] >= 4
    if COMPILER in strag:
        assert strag[COMPILER]["count"] == 1 and "compile stall" in strag[COMPILER]["title"], strag[COMPILER]
    assert ("rank_compiles", COMPILER) in kinds and "aten::mm" in next(
        f["title"] for f in doc["findings"] if f["kind"] == "rank_compiles"
    )
    assert ("collective_spread", LATE) in kinds
    opener = next(f for f in doc["findings"] if f["kind"] == "ranks_to_open")
    assert {LATE, COMPILER} <= set(opener["evidence"]["ranks"]) and len(opener["evidence"]["ranks"]) == 3
    assert opener["evidence"]["command"].startswith("neuron-prof merge --ranks ")
    # only small pieces came back from the workers
    assert 0 < doc["run"]["piece_bytes_max"] < 64 * 1024, doc["run"]


def _children() -> set[int]:
    """Child processes of this test process, but multiprocessing's resource tracker (one per process, for life)."""
    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if not any("resource_tracker" in a for a in p.cmdline()):
                out.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.mark.slow
def test_job_summary_on_a_local_cluster(job: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "trace.rank8.json"
    bad.write_text('{"traceEvents": [')  # a rank killed while writing: one line, not a stop
    before = _children()
    assert main(["summary", str(job), str(bad), "--json", "--workers", "2"]) == 0
    cap = capfd.readouterr()  # the workers' own output too (file descriptors, not only sys.stderr)
    doc = json.loads(cap.out)
    _check_summary(doc, n_failed=1)
    assert "local Dask cluster of 2" in doc["run"]["on"]
    failed = next(r for r in doc["ranks"] if r["status"] == "failed")
    assert failed["source"] == str(bad) and "truncated" in failed["error"]
    assert cap.err.count("truncated") == 1 and "Traceback" not in cap.err  # quiet workers, one line
    # the command names the ranks that loaded, one by one (merge would stop on the broken one)
    cmd = next(f for f in doc["findings"] if f["kind"] == "ranks_to_open")["evidence"]["command"]
    assert str(bad) not in cmd and str(job / "trace.rank0.pftrace") in cmd
    deadline = time.monotonic() + 10
    while _children() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _children() - before, "worker processes left behind"


@pytest.mark.slow
def test_job_summary_on_a_separate_dask_cluster(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    sched_file = tmp_path / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    procs = [
        subprocess.Popen(
            [
                *dask,
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(sched_file),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        for name in ("w1", "w2"):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "distributed.cli.dask_worker",
                        address,
                        "--nthreads",
                        "1",
                        "--nworkers",
                        "1",
                        "--no-dashboard",
                        "--host",
                        "127.0.0.1",
                        "--name",
                        name,
                    ],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        # both workers connected before the summary asks the scheduler how many there are (they start in
        # parallel with it: on a busy machine the summary could see one)
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "neuron_prof",
                "summary",
                f"{job}/trace.rank*.json",
                "--scheduler",
                address,
                "--markdown",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        assert f"on {address} (2 worker(s))" in out.stdout
        assert "| straggler |" in out.stdout and "data loading (load_batch)" in out.stdout
        assert f"rank {COMPILER} compiles 1 more time(s)" in out.stdout
        assert "neuron-prof merge --ranks " in out.stdout
        # the rows came from the .json files the glob named (one per rank)
        assert out.stdout.count("\n| ") >= WORLD + 2
        assert main(["summary", str(job), "--scheduler", address, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        _check_summary(doc)
        assert doc["run"]["on"] == f"{address} (2 worker(s))"
        # the command it prints reads every rank's first pass on the same cluster
        cmd = next(f for f in doc["findings"] if f["kind"] == "ranks_to_open")["evidence"]["command"]
        assert cmd.endswith(f"--scheduler {address} -o merged.pftrace"), cmd
        assert main([*shlex.split(cmd)[1:-1], str(tmp_path / "merged.pftrace")]) == 0
        assert "clocks aligned from all 8 ranks" in capsys.readouterr().out
        # the same cluster writes the job's Parquet dataset, one task per rank
        assert main(["export", str(job), "-o", str(tmp_path / "job.parquet"), "--scheduler", address]) == 0
        assert sorted(p.name for p in (tmp_path / "job.parquet").iterdir()) == [
            f"rank={r}" for r in range(WORLD)
        ]
    finally:
        kids = [c for p in procs for c in psutil.Process(p.pid).children(recursive=True) if p.poll() is None]
        for p in reversed(procs):  # workers first, then the scheduler
            p.terminate()
        for p in reversed(procs):
            p.wait(timeout=30)
        _, alive = psutil.wait_procs(kids, timeout=15)
    assert all(p.returncode is not None for p in procs)
    assert not alive, f"processes left behind: {alive}"


def test_unreachable_scheduler_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for r in range(2):
        (tmp_path / f"trace.rank{r}.json").write_text("{}")
    # distributed's defaults loaded first: set() drops on exit what it found missing, and would drop them all
    import dask.distributed

    port = _free_port()  # nothing listens there
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        assert main(["summary", str(tmp_path), "--scheduler", f"tcp://127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("neuron-prof: error: --scheduler tcp://127.0.0.1:") and err.count("\n") == 1


@pytest.mark.slow
def test_merge_only_the_ranks_pointed_at(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "merged.pftrace"
    assert main(["merge", "--ranks", f"0,{LATE},{COMPILER}", str(job), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"merged 3 rank(s) -> {out}" in text and f"clocks aligned from all {WORLD} ranks" in text
    merged = load(out)
    assert merged.metadata["ranks"] == [0, LATE, COMPILER]
    assert merged.metadata["aligned_with_ranks"] == list(range(WORLD))
    offsets = merged.metadata["alignment"]["offsets"]
    # ranks of one machine keep its clock (host_clock); the others are aligned on their collectives
    assert all(offsets[str(r)]["method"] in ("collectives", "host_clock", "reference") for r in range(WORLD))
    assert {p.rank for p in merged.processes if p.rank is not None} == {0, LATE, COMPILER}
    strag = [f for f in merged.findings if f["kind"] == "straggler"]
    assert any(f["rank"] == LATE and f["evidence"]["cause"]["cause"] == "data loading" for f in strag), strag


def test_job_summary_text_in_this_process(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", f"{job}/trace.rank*", "--workers", "0"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"neuron-prof job summary: {job}/trace.rank* — {WORLD} rank(s), on in this process"
    head = next(i for i, line in enumerate(lines) if line.startswith("rank  step med"))
    assert [line.split()[0] for line in lines[head + 1 : head + 1 + WORLD]] == [str(r) for r in range(WORLD)]
    words = " ".join(out.split())  # table cells wrap at 120 columns
    assert "data loading (load_batch)" in words and f"rank {COMPILER} compiles 1 more time(s)" in words
    assert "Ranks worth opening: " in out and "\nneuron-prof merge --ranks " in out


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_tui_on_the_job_opens_the_chosen_rank(job: Path, size: tuple[int, int]) -> None:
    from textual.widgets import DataTable

    from neuron_prof.job import InProcessRunner, job_summary, rank_sources
    from neuron_prof.tui.job_app import JobApp

    sources = rank_sources([str(job)])
    doc = job_summary(sources, InProcessRunner(), args=[str(job)]).to_dict()
    app = JobApp(doc, source=str(job))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        table = app.query_one("#ranks", DataTable)
        assert table.row_count == WORLD
        text = "\n".join(s.text for s in app.screen._compositor.render_strips())
        assert f"{WORLD} rank(s)" in text and "rank" in text and "step med" in text
        findings = str(app.query_one("#job-findings-text").render())
        assert "data loading (load_batch)" in findings and "neuron-prof merge --ranks" in findings
        for _ in range(LATE):
            await pilot.press("down")
        assert app.selected_rank == LATE
        await pilot.press("enter")
    assert app.return_value == str(job / f"trace.rank{LATE}.pftrace")  # the caller loads only this rank
    back = JobApp(doc, source=str(job), cursor_rank=COMPILER)  # coming back: the cursor where it was
    async with back.run_test(size=size) as pilot:
        await pilot.pause()
        assert back.selected_rank == COMPILER
        await pilot.press("q")
    assert back.return_value is None


async def test_tui_job_header_keeps_counts_whole_under_a_long_path(job: Path) -> None:
    """At 80x24 a long job folder neither splits "8 rank(s)" over two lines nor runs off the screen: the
    counts have their line, the folder its own, shortened in the middle (issue 25: nothing cut)."""
    from neuron_prof.job import InProcessRunner, job_summary, rank_sources
    from neuron_prof.tui.job_app import JobApp

    doc = job_summary(rank_sources([str(job)]), InProcessRunner(), args=[str(job)]).to_dict()
    source = "/scratch/" + "/".join(["experiments-2026-12-01-long-name"] * 4) + "/run"
    app = JobApp(doc, source=source)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        lines = [s.text.rstrip() for s in app.screen._compositor.render_strips()]
    assert lines[0].startswith(f" neuron-prof job summary — {WORLD} rank(s)"), lines[:4]
    path_line = next(ln.strip() for ln in lines[:4] if "experiments-" in ln)
    assert path_line.endswith("-long-name/run") and path_line.startswith(("/scratch/", "…/")), lines[:4]


def test_tui_serve_of_a_job_is_one_line(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tui", str(job), "--serve"]) == 2
    assert capsys.readouterr().err.startswith("neuron-prof: error: --serve opens trace files")


@pytest.mark.slow
def test_tui_on_the_job_in_a_real_terminal(job: Path) -> None:
    """`neuron-prof tui run/` in a pty: the ranks view, enter opens a rank's trace, q comes back, q exits 0.
    (Which rank the cursor is on is the Pilot test's job above: keys typed into a pty while the table is still
    being built land wherever the cursor then is.)"""
    from tests._pty import pty_run

    state = {"phase": 0, "at": 0}
    opened = re.compile(rb"trace\.rank\d+\.pftrace")

    def drive(seen: bytes, fd: int) -> bytes | None:
        new = seen[state["at"] :]
        if state["phase"] == 0 and b"Ranks worth opening" in new:
            state.update(phase=1, at=len(seen))
            return b"\r"
        if state["phase"] == 1 and opened.search(new):
            state.update(phase=2, at=len(seen))
            return b"q"
        if state["phase"] == 2 and b"Ranks worth opening" in new:
            state.update(phase=3, at=len(seen))
            return b"q"
        return None

    code, _ = pty_run([sys.executable, "-m", "neuron_prof", "tui", str(job)], drive, 120.0)
    assert state["phase"] == 3 and code == 0, state
