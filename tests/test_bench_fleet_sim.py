"""`bench fleet`'s simulated job (issue 24 item 4): generated ranks whose summary is a real one (every rank
loads, the late rank is the straggler), the same in one process and in the bench's projection input."""

from __future__ import annotations

from pathlib import Path

from bench.bench_fleet import write_simulated
from neuron_prof.job import InProcessRunner, job_summary


def test_simulated_job_has_its_straggler(tmp_path: Path) -> None:
    paths = write_simulated(12, tmp_path, late=5)
    doc = job_summary([str(p) for p in paths], InProcessRunner(), args=[str(tmp_path)]).to_dict()
    assert [r["rank"] for r in doc["ranks"]] == list(range(12))
    assert all(r["status"] == "ok" and r["steps"] == 8 for r in doc["ranks"])
    assert [f["rank"] for f in doc["findings"] if f["kind"] == "straggler"] == [5]
    assert not {f["kind"] for f in doc["findings"]} & {"missing_rank", "stopped_rank"}
