"""The LocalCluster a job summary starts (issue 24 item 4): its workers run without Dask's
MALLOC_TRIM_THRESHOLD_ (it made a rank's load cost 35-40% more CPU there: every large array a fresh mmap) and
without the statistical profiler, and the summary they compute is the one computed in one process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from neuron_prof.exporters import write_trace
from neuron_prof.job import DaskRunner, InProcessRunner, job_summary
from neuron_prof.model import Meta, Trace, TraceBuilder, TrackKind

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


def _rank(rank: int, world: int, late_ms: int) -> Trace:
    """A DDP-like rank: 8 steps, one all_reduce each; `late_ms` of data loading before it on a late rank."""
    b = TraceBuilder()
    pid = 1000 + rank
    p = b.process(pid, name="python", rank=rank)
    main_t = b.thread_track(pid, 1, "main")
    coll = b.track(p, "collectives", TrackKind.COLLECTIVE)
    rows = []
    for k in range(8):
        s = T0 + k * 30 * MS
        b.add_slice(main_t, s, 12 * MS, "aten::mm", "cpu_op")
        if late_ms:
            b.add_slice(main_t, s + 12 * MS, late_ms * MS, "enumerate(DataLoader)#_SingleProcessDataLoaderIter",
                        "user_annotation")
        b.add_slice(coll, s + 13 * MS + late_ms * MS, 4 * MS, "all_reduce",
                    args={"group": "0", "bytes_in": 4096, "bytes_out": 4096})
        rows.append([k, s, s + 30 * MS])
    b.metadata[Meta.RANK] = rank
    b.metadata[Meta.WORLD_SIZE] = world
    b.metadata[Meta.STEPS] = rows
    b.metadata[Meta.WALL] = [T0, T0 + 8 * 30 * MS]
    return b.build()


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
        write_trace(_rank(r, 4, 9 if r == 2 else 0), paths[-1])
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
