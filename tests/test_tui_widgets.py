"""TUI layer 2: widgets over numpy columns at a million rows, and the plots."""

from __future__ import annotations

import time

import numpy as np
from textual.app import App, ComposeResult

from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.tui.app import NeuronProfApp
from neuron_prof.tui.screens.base import Detail
from neuron_prof.tui.widgets.plot import braille_area, sparkline
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable
from tests._demo_trace import demo_like_trace

N = 1_000_000


def million_rows() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    names = np.array([f"op_{i}" for i in range(1000)], dtype=object)
    return {"name": names[rng.integers(0, 1000, N)], "dur": rng.integers(0, 10**9, N).astype(np.int64)}


class TableApp(App[None]):
    def __init__(self, data: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.data = data

    def compose(self) -> ComposeResult:
        cols = [Column("name", "op", 0), Column("dur", "dur", 12, fmt_ns, right=True)]
        yield VirtualTable(cols, self.data, filter_key="name")


async def test_virtual_table_million_rows_sort_filter_and_paging() -> None:
    data = million_rows()
    app = TableApp(data)
    async with app.run_test(size=(100, 30)) as pilot:
        t = app.query_one(VirtualTable)
        assert t.virtual_size.height == N + 1
        # sort: the first row shown is the largest duration
        t.sort_by("dur")
        await pilot.pause()
        assert t.value("dur") == data["dur"].max()
        lines = [t.render_line(y).text for y in range(3)]
        assert lines[1].rstrip().endswith(fmt_ns(int(data["dur"].max())))
        # end, then a line-render of the last page costs milliseconds, not seconds
        s = time.perf_counter()
        t.action_cursor_to(-1)
        for y in range(30):
            t.render_line(y)
        assert time.perf_counter() - s < 0.5
        assert t.value("dur") == data["dur"].min()
        # filter on one distinct name keeps exactly its rows, still sorted
        s = time.perf_counter()
        t.filter("op_7")  # op_7, op_70..op_79, op_700..op_799
        # a million rows are indexed in a thread: the key returns at once, the rows come when it is done
        assert time.perf_counter() - s < 0.1
        await app.workers.wait_for_complete()
        await pilot.pause()
        want = np.isin(data["name"], [f"op_{i}" for i in [7, *range(70, 80), *range(700, 800)]])
        assert len(t.order) == int(want.sum())
        assert np.all(np.diff(data["dur"][t.order]) <= 0)
        t.filter("")
        assert len(t.order) == N


async def test_virtual_table_enter_posts_the_data_row() -> None:
    data = {"name": np.array(["a", "b", "c"], dtype=object), "dur": np.array([1, 3, 2], dtype=np.int64)}
    selected: list[int] = []

    class Picking(TableApp):
        def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
            selected.append(event.row)

    app = Picking(data)
    async with app.run_test(size=(60, 10)) as pilot:
        app.query_one(VirtualTable).focus()
        await pilot.press("s", "down", "enter")  # sorted by dur: b, c, a -> second is c (row 2)
        await pilot.pause()
    assert selected == [2]


def test_sparkline_and_braille_levels() -> None:
    assert sparkline(np.array([1, 2, 3, 4, 5, 6, 7, 8]), 8) == "▁▂▃▄▅▆▇█"
    # 1000 points into 10 characters keep each bin's maximum
    v = np.zeros(1000)
    v[555] = 1
    assert sparkline(v, 10) == "▁▁▁▁▁█▁▁▁▁"
    # a full column at the maximum, an empty one at zero: braille 0xFF and 0x00 patterns
    lines = braille_area(np.array([1.0, 1.0, 0.0, 0.0]), width=2, height=2)
    assert lines == ["⣿⠀", "⣿⠀"]
    # half height: the bottom line full, the top line empty
    assert braille_area(np.array([1.0, 1.0, 0.5, 0.5]), width=2, height=2, vmax=1.0)[1] == "⣿⣿"


async def test_loading_reports_progress_then_shows_the_overview() -> None:
    seen: list[tuple[float, str]] = []

    class Recording(NeuronProfApp):
        def on_neuron_prof_app_progress(self, message: NeuronProfApp.Progress) -> None:
            seen.append((message.fraction, message.what))
            super().on_neuron_prof_app_progress(message)

    app = Recording([demo_like_trace(0), demo_like_trace(1)])
    async with app.run_test(size=(120, 40)) as pilot:
        while app.shown_at is None:
            await pilot.pause(0.02)
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert [w for _, w in seen][:2] == ["loading trace", "analysing trace"]
    assert len(seen) == 5  # load + analyse per file, then "ready"


def test_timeline_axis_labels_both_edges_in_a_unit_that_fits() -> None:
    from neuron_prof.tui.screens.timeline import axis_line

    label_w, width = 10, 80
    line = axis_line(2.5e9, 2.5e9 + 4e6, width, label_w=label_w)
    assert len(line) == width
    # the left edge: the window's start since the region start; the right edge ends at the last column
    assert line.index("2.50 s") == label_w + 1
    assert line.endswith("+4.0 ms")
    # the middle tick (+2 ms) is centred on the middle cell; labels never touch
    mid = line.index("+2.0 ms")
    assert abs(mid + len("+2.0 ms") // 2 - (label_w + 1 + (width - label_w - 1) // 2)) <= 1
    assert "  " in line[label_w + 1 :].strip() and "ms+" not in line
    # a µs window speaks µs, a window at 8.68 s speaks s
    assert axis_line(0, 40e3, width, label_w=label_w).endswith("+40 µs")
    assert axis_line(0, 8.68e9, width, label_w=label_w).endswith("+8.68 s")

class DetailApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Detail()


async def test_detail_pane_keeps_a_stack_on_its_lines_and_escapes_the_rest() -> None:
    # GIVEN a stack (one frame a line, as the fallback and compile views give it) and an op name holding ESC
    app = DetailApp()
    async with app.run_test(size=(80, 12)):
        pane = app.query_one(Detail)
        pane.show([("op", "aten::mm\x1b[2J"), ("stack", "\ntrain.py:10\nmodel.py:3")])
        lines = pane.text().splitlines()
    # THEN each frame has its line, and the escape sequence reaches no terminal
    assert lines == ["op: aten::mm\\x1b[2J", "stack: ", "train.py:10", "model.py:3"]
