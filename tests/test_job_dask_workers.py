"""The LocalCluster a job summary starts (issue 24 item 4): its workers run without Dask's
MALLOC_TRIM_THRESHOLD_ (it made a rank's load cost 35-40% more CPU there: every large array a fresh mmap) and
without the statistical profiler, and the summary they compute is the one computed in one process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from neuron_prof.exporters import write_trace
from neuron_prof.job import DaskRunner, InProcessRunner, job_summary
from tests._job_ranks import ddp_rank

def _same(doc: dict) -> dict:
    """The summary without how it was computed (timings, where)."""
    ranks = [{k: v for k, v in r.items() if k not in ("load_s", "analyse_s", "cpu_s")} for r in doc["ranks"]]
    return {"ranks": ranks, "findings": doc["findings"], "alignment": doc["alignment"]}


@pytest.mark.slow
def test_local_cluster_workers_and_their_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    paths = []
    for r in range(4):
        paths.append(str(tmp_path / f"trace.rank{r}.json"))
        write_trace(ddp_rank(r, 4, step_ms=30, coll_ms=4, late_ms=9 if r == 2 else 0), paths[-1])
    one = job_summary(paths, InProcessRunner(), args=[str(tmp_path)]).to_dict()
    with DaskRunner(workers=2) as run:
        # what each worker process was started with (functions pickled by reference: they run there)
        env = run.map(os.getenv, [("MALLOC_TRIM_THRESHOLD_",)] * 2)
        import dask.config

        prof = run.map(dask.config.get, [("distributed.worker.profile.enabled",)] * 2)
        many = job_summary(paths, run, args=[str(tmp_path)]).to_dict()
    assert [r.error for r in env + prof] == [None] * 4
    assert [r.value for r in env] == [None, None]
    assert [r.value for r in prof] == [False, False]
    assert "MALLOC_TRIM_THRESHOLD_" not in os.environ  # the nanny's environment update left no trace here
    assert _same(many) == _same(one)
    assert [r["status"] for r in one["ranks"]] == ["ok"] * 4 and one["findings"]
