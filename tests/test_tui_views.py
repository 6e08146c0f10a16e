"""TUI views are declared once: a screen declares its view, the registry (`neuron_prof.tui.views`) lists it, and
the app's keys and modes, the view bar, the help, the pending message and the background tables follow.

A throwaway view, declared here and added through the registry alone, is driven with Pilot like a user would;
the shipped registry is checked for whole declarations, and the tui package for view lists written elsewhere.
"""

from __future__ import annotations

import ast
import re
import threading
from collections.abc import Iterable
from pathlib import Path

import pytest
from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from neuron_prof.tui._data import CrossTable, RankTable
from neuron_prof.tui.app import NeuronProfApp
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.screens.compile import CompileScreen
from neuron_prof.tui.screens.help import HelpScreen, help_rows, key_span
from neuron_prof.tui.screens.ops import OpsScreen
from neuron_prof.tui.screens.overview import OverviewScreen
from neuron_prof.tui.screens.pending import PendingScreen
from neuron_prof.tui.views import VIEWS, View, Views
from neuron_prof.tui.widgets.bars import ViewBar
from tests._demo_trace import demo_like_trace
from tests._tui_pilot import first_screen, screen_text

TUI = Path(__file__).resolve().parents[1] / "tui"
SLICES = RankTable("slice_count", lambda rank: len(rank.trace.slices))


class SliceCountScreen(ViewScreen):
    """A throwaway view: how many slices the shown rank has."""

    VIEW = "slice_count"
    TITLE = "Slices"
    HELP = "the slice count"
    TABLES = (SLICES,)
    LOADING = "the slice counts"
    JUMPS = False

    def compose_body(self) -> Iterable[Widget]:
        yield Static(Text(f"{SLICES.of(self.data)} slices in this rank"), id="slice-count")


async def test_a_view_added_through_the_registry_alone_is_in_the_bar_the_help_and_on_its_key() -> None:
    trace = demo_like_trace()
    gate = threading.Event()
    app = NeuronProfApp([trace], views=VIEWS.adding(View("x", SliceCountScreen)))
    # its table held back in the background until the test lets it go
    app.before_table = lambda name: (gate.wait(30) and None) if name == SLICES.name else None
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await first_screen(pilot, app)
            # GIVEN the overview: the new view is on the view bar, after the others
            bar = screen_text(app).splitlines()[0]
            assert bar.index("x Slices") > bar.index("9 Lines"), bar
            # WHEN the user asks for the help THEN its key and its words are in the "switch view" line
            await pilot.press("question_mark")
            await pilot.pause()
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            text = screen_text(app)
            assert "1-9, x, tab, shift+tab  switch view: overview," in text
            assert "cost), the slice count" in " ".join(text.split()), text
            await pilot.press("escape")
            # WHEN its key is pressed while its table is still being built THEN it says what it waits for
            await pilot.press("x")
            await pilot.pause()
            assert isinstance(app.screen, PendingScreen) and app.screen.query_one(ViewBar).active == "slice_count"
            assert "x Slices: loading… (the slice counts are being computed" in app.screen.text()
            # ... and once the table is built, the view itself is shown
            gate.set()
            await next(w for w in app.workers if w.name == "warm").wait()
            for _ in range(50):
                if app.current_mode == "slice_count":
                    break
                await pilot.pause(0.02)
            await pilot.pause()
            assert isinstance(app.screen, SliceCountScreen)
            assert f"{len(trace.slices)} slices in this rank" in screen_text(app)
            assert app.screen.query_one(ViewBar).active == "slice_count"
            # tab goes round through it: after the lines view, then back to the overview
            await pilot.press("9", "tab")
            await pilot.pause()
            assert app.current_mode == "slice_count"
            await pilot.press("tab")
            await pilot.pause()
            assert app.current_mode == "overview"
            await pilot.press("q")
    finally:
        gate.set()
    assert app.return_code == 0
    # the shipped app knows nothing of it
    assert "slice_count" not in VIEWS and "x" not in {v.hotkey for v in VIEWS}


def test_every_registered_view_has_a_screen_a_title_a_key_and_a_help_line() -> None:
    rows = help_rows(VIEWS)
    switch = rows[0][1]
    assert len(VIEWS) >= 10  # the nine on the bar and the device view
    for v in VIEWS:
        assert issubclass(v.screen, ViewScreen) and v.screen.VIEW == v.key, v
        assert v.key and v.title and v.hotkey and v.help, v
        assert all(isinstance(t, (RankTable, CrossTable)) for t in v.tables), v
        if v.tab:
            assert (v.key, f"{v.hotkey} {v.title}") in VIEWS.tabs
            assert v.help in switch, v
        else:
            assert (v.hotkey, v.help) in rows and v.key not in VIEWS.tab_keys, v
    assert rows[0][0].startswith(key_span([v.hotkey for v in VIEWS if v.tab]))


def test_the_tables_are_built_first_ones_first_then_by_view_then_across_ranks() -> None:
    order = VIEWS.tables
    assert len({t.name for t in order}) == len(order) == len({id(t) for v in VIEWS for t in v.tables})
    firsts = [t.first for t in order]
    assert firsts == sorted(firsts, reverse=True) and firsts[0]
    cross = [isinstance(t, CrossTable) for t in order if not t.first]
    assert cross == sorted(cross) and any(cross)
    rank_tables = [t for t in order if not t.first and isinstance(t, RankTable)]
    by_view = [t for v in VIEWS for t in v.tables if isinstance(t, RankTable) and not t.first]
    assert rank_tables == by_view


def test_a_clash_or_a_missing_declaration_is_refused() -> None:
    with pytest.raises(ValueError, match="hotkey '1' declared twice"):
        Views(View("1", OverviewScreen), View("1", CompileScreen))
    with pytest.raises(ValueError, match="view key 'ops' declared twice"):
        Views(View("1", OpsScreen), View("2", OpsScreen))

    class Untitled(SliceCountScreen):
        TITLE = ""

    with pytest.raises(ValueError, match="Untitled lacks TITLE"):
        Views(View("1", Untitled))

    class SameTableName(SliceCountScreen):
        VIEW = "other"
        TABLES = (RankTable(SLICES.name, lambda rank: 0),)

    with pytest.raises(ValueError, match="table name 'slice_count' declared twice"):
        Views(View("1", SliceCountScreen), View("2", SameTableName))


def test_key_span_writes_a_run_of_digits_as_a_range() -> None:
    assert key_span([str(i) for i in range(1, 10)]) == "1-9"
    assert key_span(["1", "2", "3", "x", "5"]) == "1-3, x, 5"
    assert key_span(["1", "2"]) == "1, 2"


def _view_lists(source: str, keys: set[str]) -> Iterable[tuple[int, set[str]]]:
    """(line, view keys) of each literal naming at least two thirds of `keys`: a tuple, list or set (its
    strings, nested ones too), a dict (its keys) or a string (its words)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            parts: list[ast.AST] = [k for k in node.keys if k is not None]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            parts = [node]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            hit = set(re.findall(r"\w+", node.value)) & keys
            if 3 * len(hit) >= 2 * len(keys):
                yield node.lineno, hit
            continue
        else:
            continue
        found = {n.value for p in parts for n in ast.walk(p) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        if 3 * len(found & keys) >= 2 * len(keys):
            yield node.lineno, found & keys


def test_no_module_but_the_registry_lists_the_views() -> None:
    keys = {v.key for v in VIEWS}
    # the scan sees a list of the views written the ways they were before the registry
    assert [n for n, _ in _view_lists('VIEWS = (("overview", "1 Overview"), ("compile", "2"), ("fallback", "3"),'
                                      '("ops", "4"), ("timeline", "5"), ("memory", "6"), ("ranks", "8"))', keys)]
    assert [n for n, _ in _view_lists('NEEDS = {"overview": (), "compile": 1, "fallback": 2, "ops": 3, "timeline": 4,'
                                      '"memory": 5, "collectives": 6}', keys)]
    assert [n for n, _ in _view_lists('H = "switch: overview, compile stalls, fallback, ops, timeline, memory, ranks"',
                                      keys)]
    assert not list(_view_lists('KIND_VIEW = {"recompile": "compile", "cpu_fallback": "fallback"}', keys))
    found = [f"{p.relative_to(TUI.parent)}:{line}: {sorted(hit)}"
             for p in sorted(TUI.rglob("*.py")) if p.name != "views.py"
             for line, hit in _view_lists(p.read_text(encoding="utf-8"), keys)]
    assert not found, "views listed outside tui/views.py:\n" + "\n".join(found)
