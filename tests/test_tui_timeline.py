"""The timeline as a flame chart: lane cells (pure), lane names, the window, and Pilot at 80x24 and 160x48
(names drawn, search, zoom, enter on a slice, flows), SVG snapshots and a run in a real terminal."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from neuron_prof.model import Arg, Cat, ProcessKind, Trace, TraceBuilder, TrackKind
from neuron_prof.tui._data import prepare
from neuron_prof.tui._flame import MERGED, NONE, box_name, counter_levels, runs, slice_cells
from neuron_prof.tui._lanes import Lane, slice_lane
from neuron_prof.tui.app import NeuronProfApp
from neuron_prof.tui.screens.slice_detail import SliceDetailScreen
from neuron_prof.tui.screens.timeline import LANES, WINDOW
from neuron_prof.tui.widgets.timeline import Timeline
from tests._pty import pty_run
from tests._tui_pilot import ready, screen_text
from tests.test_tui_snapshots import compare

T0 = 1_800_000_000_000_000_000
MS = 1_000_000
STEPS = 4
STEP_MS = 10
LATE_S = 12
"""The device memory counter runs on this long after the profiled region (as the runtime's does)."""


def flame_trace() -> Trace:
    """Four 10 ms steps: ProfilerStep > aten::linear > aten::matmul on the main thread, the matmul
    launching one device execution (a flow), a dataloader thread, and a memory counter whose samples go
    on 12 s past the profiled region."""
    b = TraceBuilder()
    b.process(500, name="python", rank=None)
    main = b.thread_track(500, 500, "thread 500 (python)")
    loader = b.thread_track(500, 501, "thread 501 (dataloader)")
    dev = b.process("neuron0", name="neuron:0", kind=ProcessKind.DEVICE)
    execs = b.track(dev, "neuron:0 executions", TrackKind.DEVICE)
    mem = b.track(dev, "neuron:0 allocated", TrackKind.MEMORY, unit="bytes")
    steps = []
    for k in range(STEPS):
        t = T0 + k * STEP_MS * MS
        steps.append([k, t, t + STEP_MS * MS])
        b.add_slice(main, t, STEP_MS * MS, f"ProfilerStep#{k}", "user_annotation")
        b.add_slice(main, t + MS, 6 * MS, "aten::linear", "cpu_op")
        mm = b.add_slice(
            main, t + 2 * MS, 4 * MS, "aten::matmul", "cpu_op",
            {Arg.CALL_SITE: "/home/me/proj/train.py:42", "Input Dims": [[8, 128], [128, 128]]},
        )
        ex = b.add_slice(execs, t + 3 * MS, 3 * MS, f"neuron_exec:matmul_{k}", Cat.DEVICE)
        b.add_flow(mm, ex, cat="ac2g")
        b.add_slice(loader, t + 7 * MS, 2 * MS, "next_batch", "user_annotation")
        b.add_counter(mem, t, (1 + k) * 1e8)
    end = T0 + STEPS * STEP_MS * MS
    for s in range(1, LATE_S + 1):  # the late samples
        b.add_counter(mem, end + s * 1_000 * MS, 5e7)
    b.metadata.update({"steps": steps, "wall_ns": [T0, end], "source": "flame.json"})
    return b.build()


def lane_of(starts: list[int], durs: list[int]) -> Lane:
    b = TraceBuilder()
    tr = b.thread_track(1, 1)
    for s, d in zip(starts, durs, strict=True):
        b.add_slice(tr, s, d, f"op{s}")
    trace = b.build()
    return slice_lane(trace, np.arange(len(starts)), 0, "x", 0, 0)


# ---- layer 1: pure functions --------------------------------------------------------------------------
def test_cells_are_boxes_for_wide_slices_and_merged_for_sub_cell_ones() -> None:
    # 10 cells of 10 ns: one slice over cells 0-3, then three 2 ns slices inside cell 6
    lane = lane_of([0, 61, 64, 67], [40, 2, 2, 2])
    cells = slice_cells(lane, 0, 100, 10)
    assert cells.key.tolist() == [0, 0, 0, 0, NONE, NONE, MERGED, NONE, NONE, NONE]
    assert runs(cells) == [(0, 4, 0), (4, 6, NONE), (6, 7, MERGED), (7, 10, NONE)]
    assert cells.fill[6] == pytest.approx(0.6)


def test_counter_levels_keep_a_peak_shorter_than_a_cell() -> None:
    lane = Lane("c", "memory", 0, starts=np.array([0, 51, 52]), ends=np.array([0, 51, 52]),
                rows=np.arange(3), values=np.array([10.0, 100.0, 10.0]))
    levels = counter_levels(lane, 0, 100, 10)
    assert levels[5] == 1.0 and levels[4] == pytest.approx(0.1) and levels[9] == pytest.approx(0.1)


def test_box_name_puts_a_python_frames_function_first() -> None:
    assert box_name("/home/me/proj/train.py(147): run_demo") == "run_demo train.py:147"
    assert box_name("aten::mm") == "aten::mm"


def test_lane_names_are_short_and_the_full_name_is_the_title() -> None:
    data = prepare([flame_trace()])
    assert [lane.label for lane in LANES.of(data)] == [
        "nc0 exec", "host main", "  └ depth 1", "  └ depth 2", "dataloader", "nc0 alloc",
    ]
    assert LANES.of(data)[0].title == "neuron:0: neuron:0 executions"
    assert LANES.of(data)[1].title == "python: thread 500 (python)"


def test_window_is_the_profiled_region_with_late_counter_samples() -> None:
    trace = flame_trace()
    end = T0 + STEPS * STEP_MS * MS
    assert trace.time_range()[1] == end + LATE_S * 1_000 * MS  # GIVEN samples 12 s after the region
    data = prepare([trace])
    rank = data.rank
    # THEN the region and the first view are the profiled steps, and the counter is clipped to them
    assert rank.span == (T0, end) and WINDOW.of(data) == (T0, end) and rank.origin == T0
    counter = LANES.of(data)[-1]
    assert counter.is_counter and counter.starts.max() <= end - T0


# ---- layer 3: Pilot -------------------------------------------------------------------------------------
SIZES = [(80, 24), (160, 48)]


async def _open(pilot, app: NeuronProfApp) -> Timeline:  # type: ignore[no-untyped-def]
    await ready(pilot, app)
    tl = app.screen.query_one(Timeline)
    await pilot.pause()
    return tl


@pytest.mark.parametrize("size", SIZES)
async def test_window_axis_and_names_drawn(size: tuple[int, int]) -> None:
    app = NeuronProfApp([flame_trace()], start_view="timeline")
    async with app.run_test(size=size) as pilot:
        tl = await _open(pilot, app)
        assert (tl.t0, tl.t1) == (0.0, STEPS * STEP_MS * MS)
        lines = screen_text(app).splitlines()
        axis = lines[1].rstrip()
        # both edges labelled: the start of the region, and the window's width at the right edge
        assert axis[tl.label_width + 1 :].startswith("0 ns") and axis.endswith("+40.0 ms")
        assert len(axis) == tl.content_width
        text = "\n".join(lines)
        assert "ProfilerStep#0" in text and "ProfilerStep#3" in text  # slices are named boxes
        assert "host main" in text and "nc0 exec" in text and "nc0 alloc" in text
        if size[0] >= 160:
            assert "aten::linear" in text and "aten::matmul" in text
            # the flow's arrival on the device lane
            exec_line = next(ln for ln in lines if ln.startswith("nc0 exec"))
            assert exec_line.count("▶") == STEPS


@pytest.mark.parametrize("size", SIZES)
async def test_zoom_and_pan_keys_and_the_wheel(size: tuple[int, int]) -> None:
    app = NeuronProfApp([flame_trace()], start_view="timeline")
    async with app.run_test(size=size) as pilot:
        tl = await _open(pilot, app)
        w = tl.t1 - tl.t0
        await pilot.press("plus")
        assert tl.t1 - tl.t0 == pytest.approx(w / 2)
        await pilot.press("shift+right")
        assert tl.t0 > 0
        await pilot.press("0")
        assert (tl.t0, tl.t1) == (0.0, w)
        # the wheel over the lanes zooms at the mouse (Pilot 8.2.8 has no scroll helper: its own poster)
        from textual.events import MouseScrollUp

        await pilot._post_mouse_events([MouseScrollUp], Timeline, offset=(tl.label_width + 1 + tl.cells // 2, 1))
        assert tl.t1 - tl.t0 == pytest.approx(w * 0.8)


@pytest.mark.parametrize("size", SIZES)
async def test_search_steps_through_matches(size: tuple[int, int]) -> None:
    app = NeuronProfApp([flame_trace()], start_view="timeline")
    async with app.run_test(size=size) as pilot:
        tl = await _open(pilot, app)
        await pilot.press("slash", *"matmul", "enter")
        await pilot.pause()
        tr = app.data.rank.trace
        found = []
        for _ in range(8):
            lane, row = tl.selected()
            found.append((tr.slice_name(row), lane.label if lane else ""))
            await pilot.press("n")
            await pilot.pause()
        # 4 host ops and 4 device executions, in time order, each shown on its own lane
        assert found[0] == ("aten::matmul", "  └ depth 2")
        assert found[1] == ("neuron_exec:matmul_0", "nc0 exec")
        assert sorted(n for n, _ in found) == sorted(["aten::matmul"] * 4 + [f"neuron_exec:matmul_{k}" for k in range(4)])
        assert "/matmul 8 found" in screen_text(app)
        # n wrapped round to the first match; the status line names a depth lane by its thread
        assert "host main d2 aten::matmul" in screen_text(app)
        await pilot.press("escape")
        assert tl.hits is None and "found" not in screen_text(app)


@pytest.mark.parametrize("size", SIZES)
async def test_enter_shows_args_call_site_and_linked_slices_and_f_follows_the_flow(size: tuple[int, int]) -> None:
    app = NeuronProfApp([flame_trace()], start_view="timeline")
    async with app.run_test(size=size) as pilot:
        tl = await _open(pilot, app)
        await pilot.press("slash", *"aten::matmul", "enter")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, SliceDetailScreen)
        text = app.screen.text()
        assert "name: aten::matmul" in text and "duration: 4.0 ms" in text
        assert "call site: /home/me/proj/train.py:42" in text
        assert "Input Dims: [8, 128], [128, 128]" in text
        assert "linked: → neuron_exec:matmul_0  nc0 exec" in text
        assert "neuron_exec:matmul_0" in screen_text(app)  # drawn, not only stored
        await pilot.press("escape")
        await pilot.pause()
        # f: from the host op to the device execution it launched, and back
        await pilot.press("f")
        await pilot.pause()
        lane, row = tl.selected()
        assert lane is not None and lane.label == "nc0 exec"
        assert app.data.rank.trace.slice_name(row) == "neuron_exec:matmul_0"
        await pilot.press("f")
        await pilot.pause()
        lane, row = tl.selected()
        assert lane is not None and app.data.rank.trace.slice_name(row) == "aten::matmul"


# ---- layer 4: snapshots and a real terminal --------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES)
async def test_timeline_looks_as_stored(size: tuple[int, int]) -> None:
    app = NeuronProfApp([flame_trace()], start_view="timeline")
    async with app.run_test(size=size) as pilot:
        await _open(pilot, app)
        await pilot.press("slash", *"aten::matmul", "enter")
        await pilot.pause()
        compare(f"flame-timeline-{size[0]}x{size[1]}", app.export_screenshot(title="neuron-prof"))


def test_timeline_in_a_real_terminal(tmp_path: Path) -> None:
    """`neuron-prof tui` in a pty: the timeline draws named boxes, `/` finds a slice, `q` exits 0."""
    from neuron_prof.exporters import write_trace

    path = write_trace(flame_trace(), tmp_path / "flame.pftrace")
    state = {"phase": 0}
    last = {"seen": b""}

    def drive(seen: bytes, fd: int) -> bytes | None:
        last["seen"] = seen
        if state["phase"] == 0 and b"Overview" in seen:
            state["phase"] = 1
            return b"5"
        if state["phase"] == 1 and b"ProfilerStep#0" in seen and b"nc0 exec" in seen:
            state["phase"] = 2
            return b"/"
        if state["phase"] == 2 and b"search slices by name" in seen:
            state["phase"] = 3
            return b"next_batch\r"
        if state["phase"] == 3 and b"4 found" in seen:
            state["phase"] = 4
            return b"q"
        return None

    code, _ = pty_run([sys.executable, "-m", "neuron_prof", "tui", str(path)], drive, 90.0)
    assert state["phase"] == 4, last["seen"][-1500:]
    assert code == 0
