"""The job summary's parts alone: rank sources from files/folders/globs, the per-rank piece (pure: no torch, no
dask), and the cross-rank findings from hand-made pieces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from neuron_prof.cli import main
from neuron_prof.errors import UsageError
from neuron_prof.job import RankPiece, is_job, rank_sources
from neuron_prof.job._findings import rank_differences, ranks_to_open, step_skew

REPO = Path(__file__).resolve().parents[1]


def _touch(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        (folder / n).write_text("{}")


def test_sources_one_per_rank_in_rank_order(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _touch(
        run,
        "trace.rank10.json",
        "trace.rank2.json",
        "trace.rank2.pftrace",
        "trace.rank1.json.gz",
        "notes.txt",
    )
    want = [
        str(run / "trace.rank1.json.gz"),
        str(run / "trace.rank2.pftrace"),
        str(run / "trace.rank10.json"),
    ]
    assert rank_sources([str(run)]) == want
    assert rank_sources([f"{run}/trace.rank*"]) == want  # the glob matches both formats of rank 2: one kept
    assert rank_sources([str(run / "trace.rank10.json"), f"{run}/*.json"]) == [
        str(run / "trace.rank10.json"),
        str(run / "trace.rank2.json"),
    ]
    # Explorer capture folders: one pid folder per rank, its trace one level down
    exp = tmp_path / "exp"
    _touch(exp / "i-0_pid_11" / "1700000000", "trace.json", "ntrace.pb")
    _touch(exp / "i-0_pid_12" / "1700000000", "trace.json", "ntrace.pb")
    assert rank_sources([str(exp)]) == [str(exp / f"i-0_pid_{p}" / "1700000000") for p in (11, 12)]
    assert rank_sources([f"{exp}/*"]) == rank_sources([str(exp)])
    _touch(tmp_path / "legacy", "system_profile.json")  # Explorer's legacy JSON folder: one trace
    assert rank_sources([str(tmp_path / "legacy")]) == [str(tmp_path / "legacy")]
    assert is_job([str(run)]) and is_job([f"{run}/*.json"]) and is_job(["a.json", "b.json"])
    assert not is_job([str(run / "trace.rank2.json")]) and not is_job([str(exp / "i-0_pid_11")])
    for bad, msg in (
        ([str(tmp_path / "nope.json")], "no such file"),
        ([f"{run}/*.parquet"], "matches no trace"),
        ([str(exp / "i-0_pid_11" / "1700000000" / "x")], "no such file"),
    ):
        with pytest.raises(UsageError, match=msg):
            rank_sources(bad)


def test_summary_of_nothing_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", f"{tmp_path}/trace.rank*.json"]) == 2
    err = capsys.readouterr().err
    assert err == f"neuron-prof: error: {tmp_path}/trace.rank*.json: matches no trace\n"


def test_piece_is_small_and_needs_no_torch_or_dask(tmp_path: Path) -> None:
    """A worker computes the piece with analysis alone: the function imports neither torch nor dask."""
    from neuron_prof.exporters import write_trace
    from neuron_prof.model import TraceBuilder

    b = TraceBuilder()
    main_thread = b.thread_track(10, 1, "main")
    for k in range(2000):
        b.add_slice(main_thread, 1000 * k, 500, [f"ProfilerStep#{k // 200}", "aten::mm"][k % 2], "cpu_op")
    b.metadata["rank"] = 4
    trace = write_trace(b.build(), tmp_path / "trace.rank4.pftrace")
    code = (
        "import sys, json; from neuron_prof.job import rank_piece; p = rank_piece(sys.argv[1], 4); "
        "print(json.dumps([p.rank, p.nbytes(), sorted(m for m in ('torch', 'dask', 'distributed') "
        "if m in sys.modules)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(trace)], capture_output=True, text=True, cwd=REPO, check=True
    ).stdout
    rank, nbytes, heavy = __import__("json").loads(out.splitlines()[-1])
    assert heavy == [] and 0 < nbytes < 1_000_000 and rank == 4


def _piece(
    rank: int, steps: list[float], compiles: dict | None = None, fallbacks: dict | None = None
) -> RankPiece:
    return RankPiece(
        source=f"trace.rank{rank}.json",
        index=rank,
        rank=rank,
        row={"wall_ns": 10**9},
        step_ns=np.asarray(np.array(steps) * 1e6, dtype=np.int64),
        compiles=compiles or {},
        fallbacks=fallbacks or {},
    )


def test_ranks_that_compile_or_fall_back_unlike_the_others() -> None:
    same = {"aten::mm [[8, 8]]": [1, 5_000_000]}
    pieces = [_piece(r, [10, 10], dict(same), {"aten::nonzero": [2, 1_000_000, "a.py:3"]}) for r in range(4)]
    pieces[1].compiles["aten::mm [[9, 8]]"] = [1, 7_000_000]
    pieces[2].compiles["aten::mm [[8, 8]]"] = [3, 15_000_000]  # recompiles a shape the others compile once
    pieces[3].fallbacks["aten::_linalg_svd"] = [4, 8_000_000, "b.py:9"]
    found = rank_differences(pieces, 10**9)
    got = {(f.kind, f.rank, f.count, f.cost_ns) for f in found}
    assert got == {
        ("rank_compiles", 1, 1, 7_000_000),
        ("rank_compiles", 2, 2, 10_000_000),
        ("rank_fallbacks", 3, 4, 8_000_000),
    }
    fb = next(f for f in found if f.kind == "rank_fallbacks")
    assert fb.call_site == "b.py:9" and "aten::_linalg_svd" in fb.title


def test_step_skew_beyond_each_ranks_own_variation() -> None:
    steady = [_piece(r, [100, 101, 99, 100, 100]) for r in range(4)]
    slow = [*steady[:3], _piece(3, [130, 131, 129, 130, 130])]
    (f,) = step_skew(slow)
    assert f.rank == 3 and f.evidence["slowest_ranks"][0] == 3 and "30%" in f.title
    noisy = [*steady[:3], _piece(3, [70, 130, 75, 140, 120])]  # slower median, but within its own jitter
    assert step_skew(noisy) == [] and step_skew(steady) == []
    opener = ranks_to_open(slow, [f], ["run/"])
    assert opener is not None and opener.evidence["ranks"] == [2, 3]  # the slow rank and a typical one
    assert opener.evidence["why"] == {"2": "typical rank (to compare)", "3": "step_skew"}
    assert opener.evidence["command"] == "neuron-prof merge --ranks 2,3 run/ -o merged.pftrace"


def test_ranks_named_by_url_are_read_through_fsspec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from neuron_prof.exporters import write_trace
    from neuron_prof.model import TraceBuilder

    run = tmp_path / "run"
    run.mkdir()
    for r in (0, 1):
        b = TraceBuilder()
        main_thread = b.thread_track(10, 1, "main")
        for k in range(40):
            b.add_slice(main_thread, 1000 * k, 900 + 50 * r, f"ProfilerStep#{k}", "user_annotation")
            b.add_slice(main_thread, 1000 * k + 10, 500, "aten::mm", "cpu_op")
        b.metadata["rank"] = r
        write_trace(b.build(), run / f"trace.rank{r}.pftrace")
    for arg in (f"file://{run}", f"file://{run}/trace.rank*.pftrace"):
        assert main(["summary", arg, "--workers", "0", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert [(r["rank"], r["source"]) for r in doc["ranks"]] == [
            (k, f"file://{run}/trace.rank{k}.pftrace") for k in (0, 1)
        ]
        assert [r["step_median_ns"] for r in doc["ranks"]] == [900, 950]  # each rank read from its own URL
    for bad, msg in (
        (f"file://{run}/nothing*", "matches no trace"),
        ("nosuchproto://b/run/", "cannot read this kind"),
    ):
        assert main(["summary", bad, "--workers", "0"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"neuron-prof: error: {bad}: {msg}") and err.count("\n") == 1


def test_progress_bar_names_each_rank_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from neuron_prof.exporters import write_trace
    from neuron_prof.model import TraceBuilder

    for r in range(3):
        b = TraceBuilder()
        b.add_slice(b.thread_track(10, 1, "main"), 0, 100, "aten::mm", "cpu_op")
        b.metadata["rank"] = r
        write_trace(b.build(), tmp_path / f"trace.rank{r}.pftrace")
    (tmp_path / "trace.rank3.json").write_text("[")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert main(["summary", str(tmp_path), "--workers", "0", "--json"]) == 0
    err = capsys.readouterr().err
    assert "\x1b[32m0/4" in err and "\x1b[32m4/4" in err  # the bar (rich), from none to every rank
    assert err.count("neuron-prof: warning: ") == 1 and "trace.rank3.json" in err


def test_a_job_where_no_rank_loads_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for r in range(2):
        (tmp_path / f"trace.rank{r}.json").write_text("[")
    assert main(["summary", str(tmp_path), "--workers", "0"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and err[-1] == "neuron-prof: error: no rank could be analysed (2 failed; each said why above)"
