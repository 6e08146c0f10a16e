"""Damaged input in CI (issue 22 item 3): a trace cut short or damaged fails `check` with exit 3 unless
--allow-partial, and `summary` says first that it is partial and what was lost (text, Markdown, --json)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_prof.analysis import annotate
from neuron_prof.cli import main
from neuron_prof.exporters import write_trace
from neuron_prof.loaders import load
from tests._workload import Workload


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A whole trace in each format (with its findings recorded, as a capture writes them) and cuts of it."""
    d = tmp_path_factory.mktemp("partial")
    trace = annotate(Workload(True).build())
    whole = write_trace(trace, d / "whole.json")
    pf = write_trace(trace, d / "whole.pftrace")
    raw = whole.read_bytes()
    (d / "whole.json.gz").write_bytes(gzip.compress(raw))
    out = {"json": whole, "pftrace": pf, "gz": d / "whole.json.gz"}
    out["cut_json"] = d / "cut.json"
    out["cut_json"].write_bytes(raw[: int(len(raw) * 0.55)])  # the "first 55%"
    gz = (d / "whole.json.gz").read_bytes()
    out["cut_gz"] = d / "cut.json.gz"  # compressed, the findings block at the top is most of the first half
    out["cut_gz"].write_bytes(gz[: int(len(gz) * 0.8)])
    pb = pf.read_bytes()
    out["cut_pftrace"] = d / "cut.pftrace"
    out["cut_pftrace"].write_bytes(pb[: int(len(pb) * 0.55)])
    # damage in the middle: one event's bytes overwritten, the file still ends properly
    i = raw.index(b'"ph"', len(raw) // 2)
    out["damaged_json"] = d / "damaged.json"
    out["damaged_json"].write_bytes(raw[:i] + b"\x01garbage" + raw[i + 8:])
    return out


def test_whole_files_are_not_partial(files: dict[str, Path]) -> None:
    for key in ("json", "pftrace", "gz"):
        assert "partial" not in load(files[key]).metadata, key


@pytest.mark.parametrize("key", ["cut_json", "cut_gz", "cut_pftrace", "damaged_json"])
def test_check_exits_3_on_partial_input(files: dict[str, Path], key: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["check", str(files[key])])
    out = capsys.readouterr().out
    assert rc == 3, out
    first = out.splitlines()[0]
    assert "PARTIAL TRACE" in first and str(files[key]) in first, out
    assert ("truncated" if key != "damaged_json" else "damaged") in first
    assert "--allow-partial" in out and "all limits hold" not in out
    # limits do not change it: a partial trace cannot pass a gate
    assert main(["check", str(files[key]), "--max-recompiles", "1000"]) == 3
    capsys.readouterr()


def test_allow_partial_checks_what_it_holds(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["check", str(files["cut_json"]), "--allow-partial", "--fail-on", "none"])
    out = capsys.readouterr().out
    assert rc == 0 and "PARTIAL TRACE" in out and "all limits hold" in out, out
    # the whole file fails the default gate (the workload has critical problems in its steady steps)
    assert main(["check", str(files["json"])]) == 1
    capsys.readouterr()


def test_summary_says_partial_first_and_what_was_lost(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    whole = load(files["json"])
    assert main(["summary", str(files["cut_json"])]) == 0
    text = capsys.readouterr().out
    assert text.startswith("PARTIAL TRACE (truncated): file ends inside an event"), text[:300]
    assert f"{len(whole.findings)} findings when it was written" in text
    assert "(in what the partial trace holds)" in text
    assert main(["summary", str(files["cut_json"]), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    p = doc["totals"]["partial"]
    assert p["truncated"] is True and p["problems"] and p["bytes_read"] < files["json"].stat().st_size
    # what the file promised and no longer holds: its findings' kinds, by name
    recorded = {f["kind"] for f in whole.findings}
    now = {f["kind"] for f in doc["findings"]}
    assert p["lost_kinds"] == sorted(recorded - now) and p["lost_kinds"]
    assert main(["summary", str(files["cut_pftrace"]), "--markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("> **PARTIAL TRACE (truncated): file ends inside a packet"), md[:200]
    assert main(["summary", str(files["json"]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["partial"] is None


def test_subprocess_exit_code(files: dict[str, Path]) -> None:
    exe = [sys.executable, "-m", "neuron_prof", "check"]
    p = subprocess.run([*exe, str(files["cut_gz"])], capture_output=True, text=True, timeout=120)
    assert p.returncode == 3 and p.stdout.startswith(f"neuron-prof check: {files['cut_gz']}: PARTIAL TRACE"), p
    p = subprocess.run([*exe, str(files["cut_gz"]), "--allow-partial", "--fail-on", "none"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def test_real_kineto_trace_cut_at_55_percent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A torch.profiler trace (no neuron-prof block: nothing recorded about its findings) cut at 55%: exit 3,
    and what was lost is said from what the reader knows."""
    from tests.conftest import shared_kineto

    raw = gzip.decompress(shared_kineto("critical_path_alexnet_trace.json.gz").read_bytes())
    cut = tmp_path / "alexnet.json"
    cut.write_bytes(raw[: int(len(raw) * 0.55)])
    assert main(["check", str(cut)]) == 3
    out = capsys.readouterr().out
    assert out.startswith(f"neuron-prof check: {cut}: PARTIAL TRACE (truncated): file ends inside an event"), out
    assert "Lost: the events after the damage" in out
    whole = tmp_path / "whole.json"
    whole.write_bytes(raw)
    assert main(["check", str(whole), "--fail-on", "none"]) == 0
    capsys.readouterr()
