"""The LocalCluster a job summary starts (issue 24 item 4): its workers run without Dask's
MALLOC_TRIM_THRESHOLD_ (it made a rank's load cost 35-40% more CPU there: every large array a fresh mmap),
without the statistical profiler and with their share of the machine's memory as their loads' budget, they are forked (not spawned) when the caller has no thread of its own, and
the summary they compute is the one computed in one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from distributed.system import MEMORY_LIMIT

from neuron_prof.exporters import write_trace
from neuron_prof.job import DaskRunner, InProcessRunner, job_summary
from neuron_prof.loaders.json.stream import MEMORY_LIMIT_ENV
from tests._job_ranks import ddp_rank

REPO = Path(__file__).resolve().parents[1]

def _same(doc: dict) -> dict:
    """The summary without how it was computed (timings, where)."""
    ranks = [{k: v for k, v in r.items() if k not in ("load_s", "analyse_s", "cpu_s")} for r in doc["ranks"]]
    return {"ranks": ranks, "findings": doc["findings"], "alignment": doc["alignment"]}


def _ranks(folder: Path) -> list[str]:
    paths = []
    for r in range(4):
        paths.append(str(folder / f"trace.rank{r}.json"))
        write_trace(ddp_rank(r, 4, step_ms=30, coll_ms=4, late_ms=9 if r == 2 else 0), paths[-1])
    return paths


@pytest.mark.slow
def test_local_cluster_workers_and_their_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    paths = _ranks(tmp_path)
    one = job_summary(paths, InProcessRunner(), args=[str(tmp_path)]).to_dict()
    with DaskRunner(workers=2) as run:
        # what each worker process was started with (functions pickled by reference: they run there)
        env = run.map(os.getenv, [("MALLOC_TRIM_THRESHOLD_",)] * 2)
        import dask.config

        prof = run.map(dask.config.get, [("distributed.worker.profile.enabled",)] * 2)
        budget = run.map(os.getenv, [(MEMORY_LIMIT_ENV,)] * 2)
        many = job_summary(paths, run, args=[str(tmp_path)]).to_dict()
    assert [r.error for r in env + prof] == [None] * 4
    assert [r.value for r in env] == [None, None]
    assert [r.value for r in prof] == [False, False]
    # each worker sizes its loads against its share of the machine, not the whole machine's free memory
    assert [r.value for r in budget] == [str(MEMORY_LIMIT // 2)] * 2
    assert "MALLOC_TRIM_THRESHOLD_" not in os.environ  # the nanny's environment update left no trace here
    assert _same(many) == _same(one)
    assert [r["status"] for r in one["ranks"]] == ["ok"] * 4 and one["findings"]


@pytest.mark.slow
def test_the_command_forks_its_workers_and_gives_the_same_summary(tmp_path: Path) -> None:
    """`neuron-prof summary --workers 2` as a user runs it (a fresh process, no thread of its own when the
    cluster starts): forked workers, the summary of one process."""
    paths = _ranks(tmp_path)
    one = job_summary(paths, InProcessRunner(), args=[str(tmp_path)]).to_dict()
    p = subprocess.run([sys.executable, "-m", "neuron_prof", "summary", str(tmp_path), "--json", "--workers", "2"],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert doc["run"]["on"] == "a local Dask cluster of 2 worker process(es), forked"
    assert "Traceback" not in p.stderr
    assert _same(doc) == _same(one)


_METHOD = """
import threading, time
from neuron_prof.job._cluster import start_method
alone = start_method()
t = threading.Thread(target=time.sleep, args=(5,), daemon=True)
t.start()
print(alone, start_method())
"""


def test_start_method_forks_only_a_caller_without_threads_and_keeps_the_users_choice() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD"}
    got = subprocess.run([sys.executable, "-c", _METHOD], capture_output=True, text=True, cwd=REPO, env=env,
                         check=True).stdout.split()
    assert got == (["fork", "spawn"] if sys.platform.startswith("linux") else ["spawn", "spawn"])
    env["DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD"] = "spawn"
    got = subprocess.run([sys.executable, "-c", _METHOD], capture_output=True, text=True, cwd=REPO, env=env,
                         check=True).stdout.split()
    assert got == ["spawn", "spawn"]  # the user's choice, even Dask's default said out loud


@pytest.mark.slow
def test_merge_with_its_first_pass_on_forked_workers_merges_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`merge --workers 2`: every rank's first pass (collectives, for the clocks) as a task on a LocalCluster,
    then the same merged trace and the same offsets as the merge that reads every rank itself."""
    from neuron_prof import load
    from neuron_prof.cli import main

    paths = _ranks(tmp_path)
    here = tmp_path / "here.json"
    assert main(["merge", *paths, "-o", str(here)]) == 0
    mine = capsys.readouterr().out.replace(str(here), "OUT")
    there = tmp_path / "there.json"
    p = subprocess.run([sys.executable, "-m", "neuron_prof", "merge", *paths, "-o", str(there), "--workers", "2"],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    assert p.stdout.replace(str(there), "OUT") == mine  # the same offsets, stragglers and coverage said
    assert sum(ln.strip().startswith("rank ") for ln in mine.splitlines()) == 4
    a, b = load(here), load(there)
    assert a.n_events == b.n_events > 0
    assert (a.slices.ts_ns == b.slices.ts_ns).all() and (a.slices.dur_ns == b.slices.dur_ns).all()
    assert [f["kind"] for f in a.findings] == [f["kind"] for f in b.findings]
