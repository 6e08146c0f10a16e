"""`neuron-prof check`: the CI gate's exit codes and violation messages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from neuron_prof.cli import main
from neuron_prof.exporters import write_trace
from tests._workload import MS, WALL, Workload


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("check")
    return {
        "problem": write_trace(Workload(True).build(), d / "problem.pftrace"),
        "clean": write_trace(Workload(False).build(), d / "clean.pftrace"),
    }


def check(capsys: pytest.CaptureFixture[str], path: Path, *opts: str) -> tuple[int, list[str]]:
    rc = main(["check", str(path), *opts])
    return rc, [ln.strip() for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("FAIL")]


def test_fallback_share(traces: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    share = 14e6 / WALL  # 7 fallbacks of 2 ms
    rc, fails = check(capsys, traces["problem"], "--max-fallback-share", f"{share * 0.99:.4f}")
    assert rc == 1 and len(fails) == 1
    assert f"{share:.2%}" in fails[0] and "7 calls" in fails[0]
    assert check(capsys, traces["problem"], "--max-fallback-share", f"{share * 1.01:.4f}") == (0, [])


def test_compile_seconds_and_recompiles(traces: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc, fails = check(capsys, traces["problem"], "--max-compile-seconds", "0.05", "--max-recompiles", "4")
    assert rc == 1 and len(fails) == 2
    assert "compiling took 0.060 s (8 cache misses)" in fails[0]
    assert fails[1].startswith("FAIL 5 recompiles, above --max-recompiles 4") and "train.py:30" in fails[1]
    assert check(capsys, traces["problem"], "--max-compile-seconds", "0.06", "--max-recompiles", "5") == (
        0,
        [],
    )


def test_forbid_fallback(traces: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    for spelling in ("nonzero", "aten::nonzero", "aten::nonzero.default", "unique,nonzero"):
        rc, fails = check(capsys, traces["problem"], "--forbid-fallback", spelling)
        assert rc == 1 and len(fails) == 1
        assert "aten::nonzero ran on the host 7 times at model.py:88" in fails[0]
    assert check(capsys, traces["problem"], "--forbid-fallback", "unique", "--forbid-fallback", "sort") == (
        0,
        [],
    )


def test_clean_trace_passes_every_limit(traces: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "check",
            str(traces["clean"]),
            "--max-fallback-share",
            "0",
            "--max-recompiles",
            "0",
            "--max-compile-seconds",
            "1",
            "--forbid-fallback",
            "nonzero",
            "--fail-on",
            "warning",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "all limits hold" in out


def test_default_gate_is_warning_after_warmup(
    traces: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["check", str(traces["problem"])])
    out = capsys.readouterr().out
    fails = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("FAIL")]
    # every warning or critical finding of the steady steps; the cold-cache compiles of the first step are
    # a warning by their cost (37.5% of the run), but only in warm-up: noted, not counted
    kinds = sorted(f.split("[")[1].split("]")[0] for f in fails)
    assert rc == 1 and kinds == ["cpu_fallback", "dtype_demotion", "probe_error", "recompile", "shape_churn",
                                 "sync_point"], fails
    assert "note 1 warning-or-worse finding only in warm-up, not counted" in out
    rc, fails = check(capsys, traces["problem"], "--fail-on", "critical")
    assert rc == 1 and len(fails) == 2 and all(f.startswith("FAIL critical finding") for f in fails), fails
    assert check(capsys, traces["clean"]) == (0, [])
    # a limit given alone replaces the default gate; --fail-on none turns the gate off
    assert check(capsys, traces["problem"], "--max-compile-seconds", "1")[0] == 0
    assert check(capsys, traces["problem"], "--fail-on", "none")[0] == 0


def test_bad_input_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err.strip()
    # one line naming the file and what is wrong with it
    assert err == f"neuron-prof: error: {tmp_path / 'nope.json'}: no such file", err
    assert main(["check", str(tmp_path / "nope.json"), "--max-fallback-share", "2"]) == 2
    err = capsys.readouterr().err
    assert "--max-fallback-share" in err and "0<=x<=1" in err, err


def test_subprocess_smoke(traces: dict[str, Path]) -> None:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "neuron_prof",
            "check",
            str(traces["problem"]),
            "--forbid-fallback",
            "nonzero",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1 and "forbidden fallback aten::nonzero" in p.stdout


SVD_SCRIPT = """\
import torch
x = torch.randn(8, 8).to("neuron")
for _ in range(3):
    s = torch.linalg.svdvals(x)
    v = torch.sort(x, dim=-1).values
print(float(s.sum()))
"""


def test_forbidden_fallback_by_the_name_the_user_called(tmp_path: Path) -> None:
    """On the emulated device torch.linalg.svdvals falls back as aten::_linalg_svd (silently, as the real
    backend does for svd): every spelling of the user's call matches it; a name that matched no fallback is
    said, with what did fall back, instead of passing silently."""
    script = tmp_path / "svd.py"
    script.write_text(SVD_SCRIPT)
    out = tmp_path / "t.json"
    exe = str(Path(sys.executable).with_name("neuron-prof"))
    r = subprocess.run([exe, "run", "--emulate-neuron", "-q", "-o", str(out), str(script)], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for spelling in ("torch.linalg.svdvals", "linalg_svdvals", "aten::linalg_svdvals", "aten::_linalg_svd"):
        p = subprocess.run([exe, "check", str(out), "--forbid-fallback", spelling], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 1, p.stdout + p.stderr
        fail = [ln for ln in p.stdout.splitlines() if "FAIL" in ln]
        assert len(fail) == 1 and "aten::_linalg_svd" in fail[0] and "ran on the host 3 times at svd.py:4" in fail[0]
    p = subprocess.run([exe, "check", str(out), "--forbid-fallback", "sortt", "--forbid-fallback", "aten::addmm"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout
    assert "note --forbid-fallback sortt: no op of that name ran; ops that fell back: aten::_linalg_svd, aten::sort" \
        in p.stdout
    assert "note --forbid-fallback aten::addmm" in p.stdout


def test_fail_lines_name_each_site_once() -> None:
    from neuron_prof.analysis import Finding, Report
    from neuron_prof.cli._check import violations

    # GIVEN findings whose titles end " at SITE" (as first-call compiles and memory peaks write them)
    site = "train.py:42"
    rec = Finding("recompile", "critical", f"forward recompiled 3 times at {site}", 15 * MS, 0.1, 3, site)
    peak = Finding("memory_peak", "warning", f"Memory peak reached 6.0 GiB at {site}", 0, 0.0, 1, site)
    fails = violations(Report({"wall_ns": WALL}, [rec, peak]), max_recompiles=0, fail_on="warning")
    # THEN each FAIL line names the call site once, at its end
    assert len(fails) == 3 and all(f.count(site) == 1 and f.endswith(site) for f in fails), fails


def test_without_steady_steps_every_finding_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace with no steps cannot tell warm-up from steady state: the default gate counts every finding
    and says why."""
    from neuron_prof.model import Arg, Cat, Meta, ProcessKind, TraceBuilder, TrackKind

    b = TraceBuilder()
    host = b.process(100, "host", ProcessKind.HOST)
    b.thread_track(100, 1, "main")
    fb = b.track(host, "fallback", TrackKind.FALLBACK)
    t0 = 1_700_000_000_000_000_000
    for k in range(3):
        b.add_slice(fb, t0 + k * 10 * MS, 2 * MS, "aten::nonzero", Cat.FALLBACK,
                    {Arg.CALL_SITE: "model.py:88", Arg.SHAPES: [[8, 128]], Arg.DTYPES: ["float32"]})
    b.metadata[Meta.WALL] = [t0, t0 + 30 * MS]
    p = write_trace(b.build(), tmp_path / "nosteps.json")
    rc = main(["check", str(p)])
    out = capsys.readouterr().out
    assert rc == 1 and "[cpu_fallback]" in out and "note no steady steps to tell warm-up by" in out, out
