"""Missing and stopped ranks (issue 22 item 2): the job summary and `merge` know the world size from each
trace's metadata; a rank with no trace and a rank whose trace ends early are findings naming the rank, its
last step and its last collective."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_prof.cli import main
from neuron_prof.exporters import write_trace
from neuron_prof.model import Meta, Trace
from tests._job_ranks import ddp_rank

STEPS = 8


def rank_trace(rank: int, world: int, steps: int = STEPS) -> Trace:
    """One rank of the job; one with fewer steps stopped early (SIGTERM)."""
    return ddp_rank(rank, world, steps=steps, stopped=steps < STEPS)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ranks 0, 1 and 2 of a 4-rank job; rank 2 stopped after 5 of 8 steps; rank 3 wrote nothing."""
    d = tmp_path_factory.mktemp("job") / "run"
    d.mkdir()
    for r in range(3):
        write_trace(rank_trace(r, 4, steps=5 if r == 2 else STEPS), d / f"trace.rank{r}.json")
    return d


def _findings(doc: dict, kind: str) -> list[dict]:
    return [f for f in doc["findings"] if f["kind"] == kind]


def test_job_summary_names_missing_and_stopped_ranks(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(job), "--workers", "0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (miss,) = _findings(doc, "missing_rank")
    assert miss["severity"] == "critical" and miss["evidence"]["missing"] == [3]
    assert miss["evidence"]["world_size"] == 4 and miss["evidence"]["present"] == [0, 1, 2]
    assert "1 of 4 ranks have no trace: rank 3" in miss["title"]
    assert "the other ranks reached step 7 and allreduce (group 0) #8" in miss["title"]
    (stop,) = _findings(doc, "stopped_rank")
    assert stop["rank"] == 2 and stop["severity"] == "critical"
    ev = stop["evidence"]
    assert (ev["last_step"], ev["steps"], ev["max_steps"]) == (4, 5, 8)
    assert ev["last_collective"] == "allreduce (group 0) #5" and ev["never_reached"] == "allreduce (group 0) #6"
    assert ev["capture_exit"] == "SIGTERM"
    assert stop["title"] == ("Rank 2 stopped early: last step 4 (5 steps; others 8); last collective allreduce "
                             "(group 0) #5; never reached allreduce (group 0) #6 (rank 0 did); its profile ended "
                             "with SIGTERM")
    # the rank to open first is the one that stopped
    (opener,) = _findings(doc, "ranks_to_open")
    assert opener["evidence"]["why"]["2"] == "stopped_rank"
    assert main(["summary", str(job), "--workers", "0"]) == 0
    text = capsys.readouterr().out
    assert "missing_rank" in text and "stopped_rank" in text and "Rank 2 stopped early" in text


def test_a_rank_that_raised_is_charged_to_its_raising_line(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A rank whose profile ended with an exception: the stopped_rank finding names the line that raised."""
    for r in range(2):
        t = rank_trace(r, 2, steps=5 if r == 1 else STEPS)
        if r == 1:
            t.metadata["capture_exit"] = "exception: ValueError: bad batch"
            t.metadata[Meta.EXIT_SITE] = "train.py:41"
        write_trace(t, tmp_path / f"trace.rank{r}.json")
    assert main(["summary", str(tmp_path), "--workers", "0", "--json"]) == 0
    (stop,) = _findings(json.loads(capsys.readouterr().out), "stopped_rank")
    assert stop["rank"] == 1 and stop["call_site"] == "train.py:41"
    assert stop["title"].endswith("its profile ended with exception: ValueError: bad batch at train.py:41")


def test_a_whole_job_has_neither(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for r in range(2):
        write_trace(rank_trace(r, 2), tmp_path / f"trace.rank{r}.json")
    assert main(["summary", str(tmp_path), "--workers", "0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not _findings(doc, "missing_rank") and not _findings(doc, "stopped_rank")


def test_one_rank_of_a_larger_world(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_trace(rank_trace(0, 4), tmp_path / "trace.rank0.json")
    write_trace(rank_trace(1, 4), tmp_path / "trace.rank1.json")
    (tmp_path / "trace.rank1.json").unlink()
    assert main(["summary", str(tmp_path), "--workers", "0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (miss,) = _findings(doc, "missing_rank")
    assert miss["evidence"]["missing"] == [1, 2, 3]


def test_merge_says_it(job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "merged.json"
    assert main(["merge", str(job), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "missing rank: 1 of 4 ranks have no trace: rank 3" in text, text
    assert "stopped rank: Rank 2 stopped early: last step 4" in text, text
    kinds = {f["kind"] for f in json.loads(out.read_bytes())["neuron_prof"]["findings"]}
    assert {"missing_rank", "stopped_rank"} <= kinds


def test_subprocess(job: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "neuron_prof", "summary", str(job), "--workers", "0", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    kinds = {f["kind"] for f in json.loads(p.stdout)["findings"]}
    assert {"missing_rank", "stopped_rank"} <= kinds


def test_real_kineto_traces_know_their_world(capsys: pytest.CaptureFixture[str]) -> None:
    """Two ranks' real torch.profiler traces whose distributedInfo says world_size 128: 126 ranks missing."""
    from tests.conftest import shared_kineto

    paths = [str(shared_kineto(f"trace_filter_sampled_rank-{r}.json.gz")) for r in (0, 1)]
    assert main(["summary", *paths, "--workers", "0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (miss,) = _findings(doc, "missing_rank")
    assert miss["evidence"]["world_size"] == 128 and miss["evidence"]["missing"] == list(range(2, 128))
    assert miss["title"].startswith("126 of 128 ranks have no trace: ranks 2, 3, 4,") and ", ..." in miss["title"]



def test_a_critical_finding_without_a_cost_comes_before_cheaper_ones() -> None:
    """Issue 34: a critical stopped_rank (no time cost of its own) came fifth, after cheaper findings, wherever
    findings are listed in cost order (`sort_findings`, the one order); the rest is read in its light."""
    from neuron_prof.analysis import Finding
    from neuron_prof.analysis.pipeline import sort_findings

    def f(kind: str, severity: str, cost_ns: int) -> Finding:
        return Finding(kind=kind, severity=severity, title=kind, cost_ns=cost_ns, share=0.0, count=1, call_site="",
                       module="", advice="", evidence={})
    got = sort_findings([f("straggler", "warning", 5_000_000), f("collective", "critical", 9_000_000),
                         f("stopped_rank", "critical", 0), f("sync_point", "info", 0)])
    assert [x.kind for x in got] == ["stopped_rank", "collective", "straggler", "sync_point"]
