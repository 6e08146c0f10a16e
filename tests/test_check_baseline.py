"""`check --baseline` and the run history (issue 36 items 2 and 3) on real captures of two versions of one
script on the emulated device: the same version twice passes, the version with a new CPU fallback fails naming
its line (through the finding, not timing), `history` lists the runs, `--baseline last|main` find them; the
step-time bound on synthetic distributions."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from neuron_prof.analysis import step_regression
from neuron_prof.cli import main
from tests.userland import _fork as forked

V1 = """\
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 16, device="neuron")
y = torch.randint(0, 4, (32,), device="neuron")
for step in range(10):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
# V2: a line added inside the loop (the lines below it move down): torch.median falls back to the CPU; and one
# after the update: .item() makes the host wait for the device.
FALLBACK_LINE = "    med = torch.median(x, dim=0).values"
SYNC_LINE = "    last = loss.item()"
V2 = V1.replace("    loss = torch.nn", FALLBACK_LINE + "\n    loss = torch.nn") + SYNC_LINE + "\n"


def _git(d: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=d, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


def _run(d: Path, out: str) -> Path:
    # `neuron-prof run` through main() in a process forked from one that imported torch already (the suite's time)
    r = forked.run([forked.CLI, "run", "--emulate-neuron", "-q", "-o", out, "--no-pftrace", "train.py"], cwd=d,
                   timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "run history" not in r.stderr, r.stderr  # recorded without a problem
    return d / out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    d = tmp_path_factory.mktemp("baseline")
    data = tmp_path_factory.mktemp("history-data")
    saved = os.environ.get("NEURON_PROF_DATA_DIR")
    os.environ["NEURON_PROF_DATA_DIR"] = str(data)  # the subprocesses and main() share this history
    try:
        (d / "train.py").write_text(V1)
        _git(d, "init", "-q", "-b", "main")
        _git(d, "add", "train.py")
        _git(d, "commit", "-qm", "v1")
        first = _run(d, "trace.json")
        # the same version once more, on main: its trace is the baseline of the next run
        again = _run(d, "v1b.json")
        v1_kept = sorted((data / "traces").glob("*-trace.json"))[0]
        _git(d, "checkout", "-qb", "feature")
        (d / "train.py").write_text(V2)
        _git(d, "commit", "-qam", "v2")
        new = _run(d, "trace.json")  # overwrites the first run's file: the history kept its own link
        yield {"dir": d, "first": first, "first_kept": v1_kept, "again": again, "new": new, "data": data}
    finally:
        if saved is None:
            os.environ.pop("NEURON_PROF_DATA_DIR", None)
        else:
            os.environ["NEURON_PROF_DATA_DIR"] = saved


def _fails(out: str) -> list[str]:
    return [ln.strip() for ln in out.splitlines() if ln.strip().startswith("FAIL")]


def test_same_trace_against_itself_passes(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["check", str(runs["again"]), "--baseline", str(runs["again"])])
    out = capsys.readouterr().out
    assert rc == 0 and "all limits hold" in out, out
    assert "within the bound" in out, out


def test_same_version_twice_passes(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["check", str(runs["again"]), "--baseline", str(runs["first_kept"])])
    out = capsys.readouterr().out
    # nothing new: only the step time (measured on a shared machine) may differ beyond its bound
    assert all("steady step regressed" in f for f in _fails(out)), out
    assert rc == (1 if _fails(out) else 0), out


def test_new_fallback_fails_naming_its_line(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    line = V2.splitlines().index(FALLBACK_LINE) + 1
    rc = main(["check", str(runs["new"]), "--baseline", str(runs["again"])])
    out = capsys.readouterr().out
    assert rc == 1, out
    fb = [f for f in _fails(out) if "new CPU fallback" in f]
    assert len(fb) == 1 and f"train.py:{line}" in fb[0] and "median" in fb[0], out
    # the lines below it moved down one: their ops are not new
    assert not [f for f in _fails(out) if "new CPU fallback" in f and f"train.py:{line}" not in f], out
    sync = [f for f in _fails(out) if "new sync point" in f]
    assert sync and all(f"train.py:{V2.splitlines().index(SYNC_LINE) + 1}" in f for f in sync), out


def test_without_baseline_check_is_unchanged(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(runs["new"])]) == 1  # today's default gate: the fallback is a warning
    out = capsys.readouterr().out
    assert "note baseline" not in out and "new CPU fallback" not in out and "[cpu_fallback]" in out, out


def test_history_lists_the_runs(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["git_branch"] for r in rows] == ["feature", "main", "main"]
    assert {r["script"] for r in rows} == {str((runs["dir"] / "train.py").resolve())}
    assert rows[0]["fallback_count"] > 0 and rows[1]["fallback_count"] == 0
    assert rows[0]["findings_by_kind"].get("cpu_fallback") == 1 and "cpu_fallback" not in rows[1]["findings_by_kind"]
    assert all(len(r["git_commit"]) == 40 and r["steady_step_ns"] > 0 for r in rows)
    assert main(["history"]) == 0
    out = capsys.readouterr().out
    assert "3 runs" in out and "feature@" in out and "Trend" in out and "3 runs, steady step" in out, out


@pytest.mark.parametrize("spec", ["last", "main"])
def test_baseline_from_history(runs: dict[str, Path], spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["check", str(runs["new"]), "--baseline", spec])
    out = capsys.readouterr().out
    assert rc == 1 and [f for f in _fails(out) if "new CPU fallback" in f], out
    assert f"note baseline {runs['again'].resolve()}" in out or "v1b.json" in out, out


def test_baseline_last_of_the_first_run_is_a_usage_error(runs: dict[str, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(runs["first_kept"]), "--baseline", "last"]) == 2
    assert "not in the run history" in capsys.readouterr().err


def test_history_write_failure_never_fails_the_summary(runs: dict[str, Path], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("NEURON_PROF_DATA_DIR", str(blocker / "sub"))  # a folder under a file: cannot exist
    assert main(["summary", str(runs["again"])]) == 0
    cap = capsys.readouterr()
    assert "Findings" in cap.out or "findings" in cap.out.lower(), cap.out
    assert "warning: run history" in cap.err, cap.err


def _steps(rng: np.random.Generator, median: float, spread: float, n: int = 30) -> np.ndarray:
    return median + rng.normal(0, spread, n)


def test_step_bound_on_synthetic_distributions() -> None:
    rng = np.random.default_rng(0)
    base = _steps(rng, 100e6, 0.5e6)
    # quiet runs: the 5% floor decides
    assert not step_regression(base, _steps(rng, 103e6, 0.5e6)).regressed  # type: ignore[union-attr]
    reg = step_regression(base, _steps(rng, 110e6, 0.5e6))
    assert reg is not None and reg.regressed and reg.bound_ns == pytest.approx(0.05 * np.median(base))
    # noisy runs (MAD ~ 6.7 ms): the same 10% is within 3 MADs; 40% is not
    noisy = _steps(rng, 100e6, 10e6)
    reg = step_regression(noisy, _steps(rng, 110e6, 10e6))
    assert reg is not None and not reg.regressed and reg.bound_ns == pytest.approx(3 * reg.mad_ns)
    assert reg.bound_ns > 5e6
    assert step_regression(noisy, _steps(rng, 140e6, 10e6)).regressed  # type: ignore[union-attr]
    # faster is never a regression; too few steps is no verdict
    assert not step_regression(base, _steps(rng, 50e6, 0.5e6)).regressed  # type: ignore[union-attr]
    assert step_regression(base[:2], base) is None


def test_a_moved_line_is_not_new() -> None:
    from neuron_prof.analysis.baseline import new_items

    def keys(*items: tuple[str, str]) -> dict[str, dict[str, object]]:
        return {f"{op} @ {site}": {"op": op, "call_site": site, "count": 1, "cost_ns": 1} for op, site in items}

    base = keys(("aten::median", "train.py:9"), ("aten::nonzero", "train.py:12"))
    new = keys(("aten::median", "train.py:10"), ("aten::nonzero", "train.py:13"), ("aten::nonzero", "train.py:14"),
               ("aten::median", "other.py:9"))
    got = sorted(it["call_site"] for it in new_items(base, new))
    assert got == ["other.py:9", "train.py:14"]  # one nonzero moved, one is new; another file's median is new


def test_report_shows_the_step_trend(runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(runs["new"]), "-o", str(out)]) == 0
    page = out.read_text()
    assert "Step-time trend" in page and "last 3 recorded runs" in page and "feature@" in page
    monkeypatch.setenv("NEURON_PROF_DATA_DIR", str(tmp_path / "empty"))  # no history: no trend section
    assert main(["report", str(runs["new"]), "-o", str(out)]) == 0
    assert "Step-time trend" not in out.read_text()


def _held_memory_capture(path: Path, elements: int) -> Path:
    import torch

    import neuron_prof

    held = []
    with neuron_prof.profile(path, quiet=True, pftrace=False) as prof:
        for _ in range(4):
            held.append(torch.ones(elements))  # kept across steps: the peak grows with it
            (torch.ones(64, 64) @ torch.ones(64, 64)).sum()
            prof.step()
    return path


def test_memory_peak_growth_fails_beyond_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("NEURON_PROF_HISTORY", "0")
    base = _held_memory_capture(tmp_path / "base.json", 1_000)
    new = _held_memory_capture(tmp_path / "new.json", 500_000)  # 2 MB a step: past the 1 MiB floor
    rc = main(["check", str(new), "--baseline", str(base)])
    out = capsys.readouterr().out
    assert rc == 1 and [f for f in _fails(out) if "memory peak of host allocated grew" in f], out
    assert not [f for f in _fails(out) if "memory peak" in f and "above --max-memory-growth 0.1)" not in f], out
    main(["check", str(new), "--baseline", str(base), "--max-memory-growth", "1000"])
    assert not [f for f in _fails(capsys.readouterr().out) if "memory peak" in f]
    assert main(["check", str(new), "--max-memory-growth", "1"]) == 2  # a bound needs a baseline
