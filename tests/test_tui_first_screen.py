"""TUI: the overview is the first screen, from the first pass; the other views fill in after it.

A table is held back through the app's documented hook (`NeuronProfApp.before_table`, called in the background
thread before each table is built) on a `threading.Event`: the test decides when the "slow stage" ends, and
waits for the background worker itself, never for a time. No timings here: bench_tui measures them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from textual.worker import Worker

from neuron_prof.analysis import Finding, report, sort_findings
from neuron_prof.analysis.efficiency.critical_path import ON_CRITICAL_PATH
from neuron_prof.tui._data import RankTable
from neuron_prof.tui.app import NeuronProfApp
from neuron_prof.tui.screens.help import HelpScreen
from neuron_prof.tui.screens.ops import OpsScreen
from neuron_prof.tui.screens.pending import PendingScreen
from neuron_prof.tui.views import VIEWS
from neuron_prof.tui.widgets.bars import ViewBar
from tests._demo_trace import COMPILE_OP, FALLBACK_SITE, demo_like_trace
from tests._tui_pilot import first_screen, screen_text, shown, table

SIZES = [(80, 24), (160, 48)]
RANK_TABLES = tuple(t.name for t in VIEWS.tables if isinstance(t, RankTable))
"""The shown rank's tables, in the order the background builds them."""


class Held:
    """`before_table` hook: records the order tables are built in and holds those named until released."""

    def __init__(self, *names: str) -> None:
        self.names = set(names)
        self.order: list[str] = []
        self.gate = threading.Event()
        self.fail: set[str] = set()

    def __call__(self, name: str) -> None:
        self.order.append(name)
        if name in self.fail:
            raise RuntimeError(f"{name} broke")
        if name in self.names:
            assert self.gate.wait(30), "the test never released the held table"


@pytest.fixture
def held() -> Iterator[Held]:
    h = Held(*RANK_TABLES)
    yield h
    h.gate.set()  # never leave the background thread waiting


def _warm_worker(app: NeuronProfApp) -> Worker[None]:
    return next(w for w in app.workers if w.name == "warm")


async def _filled(pilot, app: NeuronProfApp) -> None:  # type: ignore[no-untyped-def]
    """Wait for the background worker to build every table, then for the app to handle what it posted."""
    await _warm_worker(app).wait()
    await pilot.pause()
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_overview_shows_before_the_other_views_and_a_waiting_view_fills_in(size, held) -> None:
    trace = demo_like_trace()
    app = NeuronProfApp([trace])
    app.before_table = held
    async with app.run_test(size=size) as pilot:
        await first_screen(pilot, app)
        # GIVEN every other view's tables held back in the background
        assert app.current_mode == "overview" and held.order == [RANK_TABLES[0]]
        assert not app.is_ready("ops") and app.warmed_at is None
        # THEN the overview is whole: totals and the ranked findings, the top compile stall first
        text = screen_text(app)
        assert "wall 650.0 ms" in text
        assert f"top: {COMPILE_OP}" in text or COMPILE_OP in text
        rows = [r for r in text.splitlines() if r.lstrip().startswith(("critical", "warning", "info"))]
        assert rows and "compile" in rows[0]
        # ... with exactly summary's totals and findings (one analysis path)
        rep = report(trace)
        # (all but `efficiency`: a per-event pass that `report` adds, never a first screen's)
        assert app.data.rank.totals == {k: v for k, v in rep.totals.items() if k != "efficiency"}
        # the same findings: `report` also marks those on a step's critical path (its efficiency pass) and lists
        # them first; the first screen keeps the cost order
        unmarked = [Finding.from_dict({**d, "evidence": {k: v for k, v in d["evidence"].items()
                                                          if k != ON_CRITICAL_PATH}})
                    for d in (f.to_dict() for f in rep.findings)]
        assert [f.to_dict() for f in app.data.rank.findings] == [f.to_dict() for f in sort_findings(unmarked)]
        # WHEN the user asks for the ops view while its table is being built
        await pilot.press("4")
        await pilot.pause()
        # THEN that view's tab is highlighted and it says it is loading
        assert isinstance(app.screen, PendingScreen)
        assert app.screen.query_one(ViewBar).active == "ops"
        assert "Ops: loading…" in app.screen.text()
        assert "loading…" in screen_text(app)
        # keys still work meanwhile: the overview is there at once, and back to the waiting view
        await pilot.press("1")
        await pilot.pause()
        assert app.current_mode == "overview" and app.waiting is None
        await pilot.press("4")
        await pilot.pause()
        assert app.waiting == ("ops", None)
        # WHEN the tables are built while the help is open over the message
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        held.gate.set()
        await _filled(pilot, app)
        # THEN the help stays until closed, and then the view is there
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        await pilot.pause()
        # THEN the ops view replaces the message, with its table
        assert app.current_mode == "ops" and isinstance(app.screen, OpsScreen)
        assert "aten::addmm" in shown(table(app), "name")
        assert "loading…" not in screen_text(app)
        assert app.warmed_at is not None


async def test_the_view_waited_for_is_built_next(held) -> None:
    app = NeuronProfApp([demo_like_trace()])
    app.before_table = held
    async with app.run_test(size=(160, 48)) as pilot:
        await first_screen(pilot, app)
        assert held.order == ["ops"]  # the first table is being built (held)
        # WHEN the user waits for the lines view, last in the default order
        await pilot.press("9")
        await pilot.pause()
        assert isinstance(app.screen, PendingScreen) and app.screen.view == "lines"
        held.gate.set()
        await _filled(pilot, app)
        # THEN its table was built right after the one in progress, and the view is shown
        assert held.order[:2] == ["ops", "lines"]
        assert app.current_mode == "lines"
        assert any(FALLBACK_SITE in str(v) for v in shown(table(app), "call_site"))


async def test_a_table_that_fails_is_said_by_its_view_and_the_others_fill_in(held) -> None:
    app = NeuronProfApp([demo_like_trace()])
    held.fail = {"memory"}
    app.before_table = held
    async with app.run_test(size=(80, 24)) as pilot:
        await first_screen(pilot, app)
        await pilot.press("6")
        await pilot.pause()
        held.gate.set()
        await _filled(pilot, app)
        # THEN the memory view says why it cannot show, and stays on that message
        assert isinstance(app.screen, PendingScreen)
        assert "memory could not be computed: RuntimeError: memory broke" in app.screen.text()
        assert app.waiting is None
        # ... while every other view is there
        await pilot.press("4")
        await pilot.pause()
        assert app.current_mode == "ops"
        await pilot.press("2")
        await pilot.pause()
        assert app.current_mode == "compile"


async def test_closing_while_the_tables_are_built_is_quiet(held) -> None:
    """The app closed (Pilot's end, which closes the screens while the app's message loop still runs) while
    a table is being built: the table announced after the screens are gone is ignored, not a ScreenStackError
    raised from the message loop."""
    app = NeuronProfApp([demo_like_trace()])
    app.before_table = held
    close_all = app._close_all  # Textual's step of closing that removes every screen

    async def close_then_build() -> None:
        await close_all()
        held.gate.set()  # the held table is built now, with no screen left, and announced (TableReady)
        warm = next(t for t in threading.enumerate() if t.name == "neuron-prof-warm")
        await asyncio.to_thread(warm.join, 30)
        assert not warm.is_alive()
        for _ in range(5):
            await asyncio.sleep(0)  # the message loop handles what was posted

    app._close_all = close_then_build  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        await first_screen(pilot, app)
        assert held.order == [RANK_TABLES[0]] and app.warmed_at is None
