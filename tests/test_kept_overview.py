"""The overview and the summary report are computed once per trace file and kept beside its column cache: a
second TUI open draws its first screen from the kept overview (no first pass), a second `summary`/`check`
prints from the kept report, byte for byte what a fresh computation prints; a changed file invalidates both."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

import neuron_prof.cli._reports as reports
import neuron_prof.tui._data as tui_data
from bench.gen_trace import write
from neuron_prof.analysis import Context, Report, overview, step_breakdown
from neuron_prof.cli import main
from neuron_prof.loaders import _cache, kept, load
from neuron_prof.tui.app import NeuronProfApp
from tests._tui_pilot import first_screen, ready, screen_text

EVENTS = 12_000
"""Enough events for a file above the cache's MIN_SIZE (an index, so something to keep beside)."""
MARK = "KEPT-DOC"


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    path = write(EVENTS, tmp_path / "big.json")
    assert path.stat().st_size > _cache.MIN_SIZE
    return path


class Passes:
    """Counts the TUI's first passes (`_data.analyse`, the real one runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = tui_data.analyse

        def counted(*a, **k):  # type: ignore[no-untyped-def]
            self.n += 1
            return real(*a, **k)

        monkeypatch.setattr(tui_data, "analyse", counted)


async def _open(path: Path, held: bool = False) -> tuple[NeuronProfApp, str]:
    """Open `path` at 80x24 and read the first screen; `held`: every other view's table is held back in the
    background meanwhile (`NeuronProfApp.before_table`), and a key is handled on the first screen."""
    app = NeuronProfApp([path])
    gate = threading.Event()

    def hold(name: str) -> None:
        gate.wait(30)

    if held:
        app.before_table = hold
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await first_screen(pilot, app)
            text = screen_text(app)
            if held:
                assert app.warmed_at is None and not app.is_ready("ops")  # the tables are still held
                table = app.screen.table  # type: ignore[attr-defined]
                await pilot.press("down")
                assert table.cursor == 1
            await pilot.press("q")
    finally:
        gate.set()
    return app, text


def _fresh(path: Path) -> dict:
    trace = load(path)
    ctx = Context(trace)
    first = overview(trace, ctx)
    return Report(first.totals, first.findings, steps=step_breakdown(trace, ctx)).to_dict()


async def test_second_open_draws_the_first_screen_from_the_kept_overview(
        trace_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    passes = Passes(monkeypatch)
    # GIVEN a first open: the first pass runs and its overview is kept, equal to a fresh computation's
    app, text = await _open(trace_file)
    assert passes.n == 1
    doc = kept.read_json(trace_file, kept.OVERVIEW)
    assert doc is not None and doc == _fresh(trace_file)
    first = app.data.rank
    # WHEN the kept overview is made distinguishable and the file opened again
    doc["totals"]["wall_ns"] = first.totals["wall_ns"] + 1
    doc["findings"].insert(0, {**doc["findings"][0], "title": MARK, "cost_ns": 10 ** 15, "share": 1.0})
    assert kept.write_json(trace_file, kept.OVERVIEW, doc)
    app, text = await _open(trace_file, held=True)
    # THEN no first pass ran: the first screen shows the kept document, steps and all
    assert passes.n == 1
    rank = app.data.rank
    assert rank.findings[0].title == MARK and MARK in text
    assert rank.totals["wall_ns"] == first.totals["wall_ns"] + 1
    assert rank.step_parts == first.step_parts


async def test_a_changed_file_invalidates_the_kept_overview(trace_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    passes = Passes(monkeypatch)
    await _open(trace_file)
    assert kept.read_json(trace_file, kept.OVERVIEW) is not None
    # WHEN the file changes (its mtime: the column cache's own key)
    st = trace_file.stat()
    os.utime(trace_file, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert kept.read_json(trace_file, kept.OVERVIEW) is None
    await _open(trace_file)
    assert passes.n == 2  # computed again, and kept again for the changed file
    assert kept.read_json(trace_file, kept.OVERVIEW) == _fresh(trace_file)


def test_a_changed_neuron_prof_invalidates_the_kept_documents(trace_file: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    load(trace_file)
    assert kept.write_json(trace_file, kept.OVERVIEW, {"totals": {}, "findings": []})
    assert kept.read_json(trace_file, kept.OVERVIEW) == {"totals": {}, "findings": []}
    monkeypatch.setattr(kept, "code_version", lambda: "another")
    assert kept.read_json(trace_file, kept.OVERVIEW) is None


def test_no_cache_keeps_nothing(trace_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_PROF_CACHE", "0")
    load(trace_file)
    assert not kept.write_json(trace_file, kept.OVERVIEW, {"totals": {}, "findings": []})
    assert kept.read_json(trace_file, kept.OVERVIEW) is None


def _no_report(*a: object, **k: object) -> None:
    raise AssertionError("the report was computed again")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    rc = main(list(args))
    return rc, capsys.readouterr().out


@pytest.mark.parametrize("args", [("summary", "--json"), ("summary",), ("summary", "--markdown"), ("check",)],
                         ids=" ".join)
def test_summary_and_check_from_the_kept_report_are_byte_identical(
        trace_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        args: tuple[str, ...]) -> None:
    fresh = _run(capsys, *args, str(trace_file))  # computed, then kept
    assert kept.read_json(trace_file, kept.report_name(None)) is not None
    with monkeypatch.context() as m:
        m.setattr(reports, "report", _no_report)  # the name the CLI calls (patching analysis.report did nothing)
        again = _run(capsys, *args, str(trace_file))
    assert again == fresh
    # and a fresh computation without any cache prints the same
    monkeypatch.setenv("NEURON_PROF_CACHE", "0")
    assert _run(capsys, *args, str(trace_file)) == fresh


def test_summary_keeps_the_overview_the_tui_would_compute(trace_file: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    _run(capsys, "summary", "--json", str(trace_file))
    assert kept.read_json(trace_file, kept.OVERVIEW) == _fresh(trace_file)
    # another warm-up is another report, and not the TUI's overview
    _run(capsys, "summary", "--json", "--warmup-steps", "0", str(trace_file))
    assert kept.read_json(trace_file, kept.report_name(0)) is not None


async def test_the_views_draw_the_same_from_the_kept_overview(trace_file: Path) -> None:
    async def views() -> list[str]:
        app = NeuronProfApp([trace_file])
        texts = []
        async with app.run_test(size=(80, 24)) as pilot:
            await ready(pilot, app)
            # the views that read the overview's totals, findings and steps: the overview, its step bars, ranks
            for key in ("b", "8"):
                texts.append(screen_text(app))
                await pilot.press(key)
                await pilot.pause()
            texts.append(screen_text(app))
            await pilot.press("q")
        assert not app.data.failed
        return texts

    fresh = await views()  # the first pass, kept
    assert kept.read_json(trace_file, kept.OVERVIEW) is not None
    assert await views() == fresh


def test_the_html_report_from_the_kept_report_is_byte_identical(
        trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def page(k: int) -> bytes:
        assert main(["report", str(trace_file), "-o", str(tmp_path / f"{k}.html")]) == 0
        return (tmp_path / f"{k}.html").read_bytes()

    fresh = page(0)  # computed and kept
    assert kept.read_json(trace_file, kept.report_name(None)) is not None

    monkeypatch.setattr(reports, "report", _no_report)
    assert page(1) == fresh


def test_a_report_in_which_an_analysis_failed_is_not_kept(trace_file: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """An analysis that raised (out of memory, say) is said in the summary, and the next summary computes again:
    a kept report would repeat the failure on every later open."""
    import neuron_prof.analysis.pipeline as pipeline

    pipeline._load()
    name = next(iter(pipeline.ANALYSES))

    def out_of_memory(*a: object, **k: object) -> list:
        raise MemoryError("no room")

    with monkeypatch.context() as m:
        m.setitem(pipeline.ANALYSES, name, out_of_memory)
        rank = tui_data._rank(load(trace_file), str(trace_file), path=trace_file)  # the TUI's first screen
        assert any(pipeline.analysis_failed(f) for f in rank.findings)
        assert kept.read_json(trace_file, kept.OVERVIEW) is None
        _, text = _run(capsys, "summary", "--json", str(trace_file))
    assert f"Analysis {name} failed: MemoryError" in text
    assert kept.read_json(trace_file, kept.report_name(None)) is None
    assert kept.read_json(trace_file, kept.OVERVIEW) is None
    _, again = _run(capsys, "summary", "--json", str(trace_file))
    assert "failed: MemoryError" not in again and kept.read_json(trace_file, kept.report_name(None)) is not None
