"""`neuron-prof summary`: text, --json (stable schema) and --markdown, in-process and as a subprocess."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from neuron_prof.analysis import KINDS, SEVERITIES, analyze
from neuron_prof.cli import main
from neuron_prof.exporters import write_trace
from tests._workload import MS, WALL, Workload

FINDING_KEYS = {
    "kind",
    "severity",
    "title",
    "cost_ns",
    "share",
    "count",
    "call_site",
    "module",
    "advice",
    "evidence",
    "ts_ns",
    "rank",
    "after_warmup",
}
TOTAL_KEYS = {
    "wall_ns",
    "start_ns",
    "end_ns",
    "events",
    "rank",
    "capture_exit",
    "capture_reduced",
    "steps",
    "host_busy_ns",
    "device_busy_ns",
    "device_busy_share",
    "devices",
    "compile_ns",
    "compile_count",
    "compile_miss_count",
    "fallback_ns",
    "fallback_count",
    "sync_ns",
    "sync_count",
    "collective_ns",
    "collective_count",
    "top_ops",
    "top_device_ops",
    "steady_per_step",
    "findings_by_severity",
    "findings_by_kind",
    "partial",
    "shares",
    "neuron_explorer",
    "host_runqueue",
    "efficiency",
}


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("summary")
    return {
        "problem": write_trace(Workload(True).build(), d / "problem.pftrace"),
        "clean": write_trace(Workload(False).build(), d / "clean.pftrace"),
    }


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_json_schema(traces: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "summary", str(traces["problem"]), "--json")
    assert rc == 0
    doc = orjson.loads(out)
    assert doc["schema"] == "neuron-prof.summary" and doc["version"] == 1
    assert set(doc["totals"]) == TOTAL_KEYS
    assert doc["totals"]["wall_ns"] == WALL
    for f in doc["findings"]:
        assert set(f) == FINDING_KEYS
        assert f["kind"] in KINDS and f["severity"] in SEVERITIES and 0 <= f["share"] <= 1
    # the same findings as analysing the in-memory trace (the file round trip loses nothing we use)
    expect = [f.to_dict() for f in analyze(Workload(True).build())]
    strip = lambda fs: [{k: v for k, v in f.items() if k != "evidence"} for f in fs]  # noqa: E731
    assert strip(doc["findings"]) == strip(orjson.loads(orjson.dumps(expect)))
    fb = next(f for f in doc["findings"] if f["kind"] == "cpu_fallback")
    assert fb["call_site"] == "model.py:88" and fb["count"] == 7


def test_text(traces: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "summary", str(traces["problem"]))
    assert rc == 0
    # steps 2-6 recompile (the churn): the steady steps are the 2 that do not (analysis.steps.phases)
    assert "Wall time 120.0 ms" in out and "5 recompiling (10.0 ms each), 2 steady (10.0 ms median)" in out
    assert "first_call_compile" in out and "model.py:88" in out and "What to do" in out
    assert "[120, 256, 512]" in out  # the bucket plan
    assert "\x1b[" not in out  # no colour when not a terminal
    rc, out, _ = run(capsys, "summary", str(traces["clean"]))
    assert rc == 0 and "Findings: 0 critical, 0 warning, 2 info" in out


def test_the_header_keeps_a_long_path_whole_on_its_line(traces: dict[str, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A path longer than the 120 columns is neither wrapped nor cut: the first line names the file to copy."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "trace.pftrace"
    path.write_bytes(traces["clean"].read_bytes())
    rc, out, _ = run(capsys, "summary", str(path))
    assert rc == 0 and out.splitlines()[0] == f"neuron-prof summary: {path}"


def test_markdown(traces: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "summary", str(traces["problem"]), "--markdown")
    assert rc == 0
    assert out.startswith("## neuron-prof summary")
    assert "| # | severity | kind |" in out and "### What to do" in out
    rows = [ln for ln in out.splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    assert len(rows) == len(analyze(Workload(True).build()))
    assert all(ln.count(" | ") == 7 for ln in rows)  # pipes inside titles are escaped


def test_output_file_and_errors(
    traces: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "s.json"
    rc, out, _ = run(capsys, "summary", str(traces["problem"]), "--json", "-o", str(out_file))
    assert rc == 0 and out == "" and orjson.loads(out_file.read_bytes())["findings"]
    rc, _, err = run(capsys, "summary", str(tmp_path / "missing.json"))
    assert rc == 2 and "missing.json" in err and "Traceback" not in err
    rc, _, err = run(capsys, "summary", str(traces["problem"]), "--json", "--markdown")
    assert rc == 2 and "--json" in err


def test_subprocess_smoke(traces: dict[str, Path]) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "neuron_prof", "summary", str(traces["problem"]), "--json"],
        capture_output=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert orjson.loads(p.stdout)["findings"][0]["kind"] == "first_call_compile"


@pytest.mark.parametrize("suffix", [".json", ".pftrace"])
def test_annotated_findings_survive_the_file(suffix: str, tmp_path: Path) -> None:
    """annotate() puts the findings in the trace; both writers keep them and re-analysis agrees."""
    from neuron_prof.analysis import annotate
    from neuron_prof.loaders import load

    tr = annotate(Workload(True).build())
    back = load(write_trace(tr, tmp_path / f"t{suffix}"))
    assert orjson.loads(orjson.dumps(list(back.findings))) == orjson.loads(orjson.dumps(list(tr.findings)))
    again = [f.to_dict() for f in analyze(back)]
    want = orjson.loads(orjson.dumps(list(tr.findings)))
    if suffix == ".json":
        assert again == want
    else:  # the .pftrace reader orders slices its own way: evidence rows differ, nothing else
        drop = lambda fs: [{k: v for k, v in f.items() if k != "evidence"} for f in fs]  # noqa: E731
        assert drop(again) == drop(want)
    if suffix == ".pftrace":
        from tests.conftest import pftrace_check

        p = pftrace_check(tmp_path / f"t{suffix}")
        assert p.returncode == 0, p.stdout + p.stderr


def test_trace_strings_are_literal_text() -> None:
    """Rich markup and Markdown table syntax inside op names and call sites are shown as they are."""
    from neuron_prof.analysis import report
    from neuron_prof.exporters.summary import summary_markdown, summary_text
    from neuron_prof.model import Arg, Cat, TraceBuilder, TrackKind

    b = TraceBuilder()
    fb = b.track(b.process(1, "h"), "fallback", TrackKind.FALLBACK)
    op = "[bold red]aten::x|y[/bold red]"
    b.add_slice(fb, 0, 1000, op, Cat.FALLBACK, {Arg.CALL_SITE: "a|b.py:[3]"})
    rep = report(b.build())
    text = summary_text(rep, width=300)
    assert op in text and "a|b.py:[3]" in text
    md = summary_markdown(rep)
    assert "\\[bold red\\]" not in md and "aten::x\\|y" in md and "a\\|b.py:[3]" in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| 1 |"))
    assert row.replace("\\|", "").count("|") == 9


def test_summary_warns_on_stderr_about_a_truncated_trace(tmp_path, capsys) -> None:
    import gzip

    from tests.conftest import KINETO_DIR

    src = KINETO_DIR / "nccl_parser_config_nccl_data.json.gz"
    if not src.exists():
        import pytest

        pytest.skip("../shared/traces absent")
    cut = tmp_path / "cut.json"
    cut.write_bytes(gzip.decompress(src.read_bytes())[:300_000])
    from neuron_prof.cli import main

    assert main(["summary", str(cut), "--json"]) == 0
    out, err = capsys.readouterr()
    import json

    assert "findings" in json.loads(out)
    assert "truncated" in err and str(cut) in err


# ---- what a new user stumbled on (issue 16) ---------------------------------------------------------------
def test_findings_are_one_line_each_at_120_columns(traces: dict[str, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "summary", str(traces["problem"]))
    lines = out.splitlines()
    top = lines.index(next(ln for ln in lines if ln.lstrip().startswith("#  severity")))
    n = len(analyze(Workload(True).build()))
    rows = lines[top + 1 : top + 1 + n]
    # GIVEN n findings, THEN the table is n lines of at most 120 columns, numbered 1..n, then a blank line
    assert [int(r.split()[0]) for r in rows] == list(range(1, n + 1)) and lines[top + 1 + n] == ""
    assert all(len(r.rstrip()) <= 120 for r in rows)
    # the call site is in `where` only: never repeated in the title on the same line
    assert all(r.count("model.py:88") <= 1 for r in rows), rows
    # below, each finding in full, then what to do
    assert "Details" in lines and " 1. [" in out and "What to do:" in out
    # a site is named twice in the findings: its table row and the "at" line of its details (titles lose
    # " at SITE"); the lines view below names it once more, as a line of the user's code
    findings_part = out.split("Where the time goes")[0]
    for site in ("train.py:42", "/home/u/model.py:120"):
        assert findings_part.count(site) == 2, (site, out)


def test_gpu_summary_lists_device_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import KINETO_DIR

    path = KINETO_DIR / "critical_path_alexnet_trace.json.gz"
    if not path.exists():
        pytest.skip("../shared/traces absent")
    rc, out, _ = run(capsys, "summary", str(path))
    # the GPU's own kernels, under a heading of their own, with the time the device spent in them
    assert rc == 0 and " device op " in out
    device = out[out.index(" device op ") :]
    assert "ampere_sgemm_32x32_sliced1x4_tn" in device and "2.6 ms" in device


def test_per_step_line_never_exceeds_the_step(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import KINETO_DIR

    path = KINETO_DIR / "cpu_only_rank34.json.gz"
    if not path.exists():
        pytest.skip("../shared/traces absent")
    rc, out, _ = run(capsys, "summary", str(path))
    line = next(ln for ln in out.splitlines() if ln.startswith("Per steady step ("))
    # GIVEN overlapping allreduce calls, THEN the per-step collective time fits in the step
    step_ms = float(re.search(r"\(([\d.]+) ms\)", line).group(1))  # type: ignore[union-attr]
    coll_ms = float(re.search(r"collectives ([\d.]+) ms", line).group(1))  # type: ignore[union-attr]
    assert 0 < coll_ms <= step_ms, line


def test_no_bare_per_step_heading_and_a_crash_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from neuron_prof.model import TraceBuilder

    # GIVEN steps with nothing on a device or a probe track, from a script that raised
    b = TraceBuilder()
    main_t = b.thread_track(1, 1, "main")
    for i in range(4):
        b.add_slice(main_t, i * 10 * MS, 10 * MS, f"ProfilerStep#{i}", "user_annotation")
        b.add_slice(main_t, i * 10 * MS + MS, MS, "aten::add", "cpu_op")
    b.metadata["capture_exit"] = "exception: ValueError: boom"
    path = write_trace(b.build(), tmp_path / "crashed.json")
    rc, out, _ = run(capsys, "summary", str(path))
    assert rc == 0
    assert "Per steady step (" not in out  # no heading with nothing after it
    assert out.splitlines()[1] == ("The profiled code did not finish: exception: ValueError: boom "
                                   "(the trace covers the run until then)")
    rc, out, _ = run(capsys, "summary", str(path), "--json")
    assert orjson.loads(out)["totals"]["capture_exit"] == "exception: ValueError: boom"


def test_the_steps_line_puts_each_figure_beside_its_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34: "Steps 14 (2 warm-up, 1.20 s each on average...)" read as every step's average: the warm-up
    average stands beside the warm-up steps, the median beside the steady ones."""
    path = write_trace(Workload().build(), tmp_path / "w.json")
    assert main(["summary", str(path)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("Steps "))
    assert re.fullmatch(r"Steps (\d+): (\d+) warm-up \([\d.]+ \S+ each on average\), (?:(\d+) recompiling "
                        r"\([\d.]+ \S+ each\), )?(\d+) steady \([\d.]+ \S+ median\)", line), line
    n, w, *rest = map(int, re.findall(r"\d+(?= warm-up| recompiling| steady|:)", line))
    assert n == w + sum(rest), line
