"""The TUI as a new user meets it (issue 16): every view at 80x24 and 160x48, help, empty views, drill-ins.

Call sites carry the long paths a user's project has (`LONG`); expected values come from how
`demo_like_trace` was built, and from the shapes of the real Kineto traces in ../shared.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from neuron_prof.model import TraceBuilder
from neuron_prof.tui.app import NeuronProfApp
from neuron_prof.tui.screens.ops import OPS, CallsScreen
from neuron_prof.tui.views import VIEWS
from tests._demo_trace import FALLBACK_SITE, LONG, MS, T0, demo_like_trace
from tests._tui_pilot import ready, screen_text, shown, table
from tests.conftest import KINETO_DIR

SITES = ("train.py:42", "train.py:50", FALLBACK_SITE, "data.py:12")
SIZES = [(80, 24), (160, 48)]
ALEXNET = KINETO_DIR / "critical_path_alexnet_trace.json.gz"


def real(path: Path) -> Path:
    if not path.exists():
        pytest.skip("../shared/traces absent")
    return path


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_every_view_fits_the_screen(size: tuple[int, int]) -> None:
    app = NeuronProfApp([demo_like_trace(site_dir=LONG)])
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app)
        for view, label in VIEWS.tabs:
            app.show_view(view)
            await pilot.pause()
            lines = screen_text(app).splitlines()
            # GIVEN any view, THEN the top bar names all eight views within the width: each reachable
            bar = lines[0]
            for _, other in VIEWS.tabs:
                number, word = other.split()[:2]
                assert f"{number} {word[:4]}" in bar, (view, bar)
            assert f"{label.split()[0]} {label.split()[1]}" in bar  # the shown one by its whole first word
            text = "\n".join(lines)
            if view == "overview":
                # every finding's call site keeps its file and :LINE, shortened in the middle
                for site in ("train.py:42", FALLBACK_SITE, "train.py:70"):
                    assert f"/{site}" in text, (site, text)
            if view == "fallback":
                for site in (FALLBACK_SITE, "data.py:12"):
                    assert f"/{site}" in text, text
            if view == "ops":
                header = next(ln for ln in lines if ln.startswith("op "))
                # whole column titles, never a cut "me"; every duration cell keeps its unit
                assert re.findall(r"\b(self|total)\b", header) == ["self", "total"], header
                for ln in lines[2:8]:
                    for cell in re.findall(r"\d[\d.,]* ?(?:s|ms|µs|ns)?\b", ln):
                        if "." in cell:
                            assert cell.endswith(("s", "ms", "µs", "ns")), (cell, ln)
        # narrower still, the ops view drops whole columns rather than cut a title or a unit
        app.show_view("ops")
        await pilot.resize_terminal(66, size[1])
        await pilot.pause()
        header = next(ln for ln in screen_text(app).splitlines() if ln.startswith("op "))
        assert header.split() == ["op", "on", "self▼", "total", "calls"], header
        await pilot.resize_terminal(*size)
        # compile view: an expanded op's signatures keep their line too
        app.show_view("compile")
        await pilot.pause()
        t = table(app)
        t.move_to(shown(t, "name").index("aten::matmul"))
        await pilot.press("right")
        await pilot.pause()
        assert "/train.py:42" in screen_text(app)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_help_is_fully_visible(size: tuple[int, int]) -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app)
        await pilot.press("question_mark")
        await pilot.pause()
        box = app.screen.query_one("#help")
        # GIVEN an 80x24 terminal, THEN the help box lies inside the screen, borders and all
        assert box.region.right <= size[0] and box.region.bottom <= size[1], box.region
        assert "neuron-prof keys" in screen_text(app)
        # WHEN the user scrolls to its end, THEN the last key (q quit) is on the screen
        await pilot.press("end")
        await pilot.pause()
        assert re.search(r"\bq\s+quit\b", screen_text(app)), screen_text(app)


async def test_evidence_and_enter_on_a_finding_filter_its_view() -> None:
    app = NeuronProfApp([demo_like_trace(site_dir=LONG)])
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot, app)
        t = table(app)
        # the evidence reads in units: no "_ns=" key and no raw nanosecond count
        for i in range(min(4, len(t.order))):
            t.move_to(i)
            await pilot.pause()
            detail = screen_text(app).split("evidence:", 1)[-1]
            assert "_ns" not in detail and not re.search(r"\d{7,}", detail), detail
        # GIVEN the fallback finding at model.py:88 WHEN enter THEN the fallback view shows only that line
        t.move_to(shown(t, "call_site").index(LONG + FALLBACK_SITE))
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()
        assert app.current_mode == "fallback"
        f = table(app)
        assert shown(f, "call_site") == [LONG + FALLBACK_SITE]
        assert app.screen.query_one("#filter").value == LONG + FALLBACK_SITE  # type: ignore[attr-defined]
        # esc shows every line again (data.py:12 too)
        await pilot.press("escape")
        await pilot.pause()
        assert set(shown(f, "call_site")) == {LONG + FALLBACK_SITE, LONG + "data.py:12"}
        # enter on a fallback line lists its fallbacks (one per step at model.py:88), not the timeline
        f.move_to(shown(f, "call_site").index(LONG + FALLBACK_SITE))
        count = int(f.value("count"))
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, CallsScreen) and len(app.screen.table.order) == count == 10
        assert "fallbacks at" in screen_text(app)
        await pilot.press("escape")
        # enter on a compile signature lists its compiles
        await pilot.press("2")
        await pilot.pause()
        c = table(app)
        c.move_to(shown(c, "name").index("forward_graph"))
        await pilot.press("right", "down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, CallsScreen), app.screen
        assert "compiles at" in screen_text(app) and len(app.screen.table.order) == 1


def _deep_trace():  # type: ignore[no-untyped-def]
    """linear > matmul > mm on one thread: aten::mm at depth 3, below the lanes the timeline shows."""
    b = TraceBuilder()
    b.process(1, name="host")
    main = b.thread_track(1, 1, "MainThread")
    for step in range(3):
        t = T0 + step * 10 * MS
        b.add_slice(main, t, 9 * MS, f"ProfilerStep#{step}", "user_annotation")
        b.add_slice(main, t + MS, 6 * MS, "aten::linear", "cpu_op")
        b.add_slice(main, t + 2 * MS, 4 * MS, "aten::matmul", "cpu_op")
        b.add_slice(main, t + 3 * MS, 2 * MS, "aten::mm", "cpu_op")
    return b.build()


async def test_a_jump_to_a_deep_op_lands_on_it() -> None:
    app = NeuronProfApp([_deep_trace()])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        await pilot.press("4")
        await pilot.pause()
        t = table(app)
        t.move_to(shown(t, "name").index("aten::mm"))
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("t")
        await pilot.pause()
        await pilot.pause()
        assert app.current_mode == "timeline"
        lane, row = app.screen.timeline.under_cursor()  # type: ignore[attr-defined]
        # GIVEN aten::mm at depth 3, THEN the cursor is on aten::mm, not on its parent aten::matmul
        assert lane is not None and row >= 0
        assert app.data.rank.trace.slice_name(row) == "aten::mm" and lane.depth == 3


async def test_a_gpu_trace_says_what_it_lacks() -> None:
    app = NeuronProfApp([real(ALEXNET)])
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot, app)
        text = screen_text(app)
        # a GPU has no compile step nor CPU fallback: no zero totals that read as measurements
        assert "compile 0 ns" not in text and "CPU fallback 0 ns" not in text
        assert "sync " in text
        for view, says in (("compile", "No compiles:"), ("fallback", "No CPU fallbacks:"),
                           ("collectives", "No collectives:")):
            app.show_view(view)
            await pilot.pause()
            assert says in screen_text(app), view
        # device lanes come first, named short by their device ("gpu0 s7"), the full name in the title
        app.show_view("timeline")
        await pilot.pause()
        lanes = app.screen.timeline.lanes  # type: ignore[attr-defined]
        assert lanes[0].label == "gpu0 s7", [lane.label for lane in lanes]
        assert lanes[0].title == "python3.10 (GPU 0): stream 7"
        assert "host main" in [lane.label for lane in lanes]
        # the o toast starts with the file to open
        await pilot.press("o")
        await pilot.pause()
        assert str(list(app._notifications)[-1].message).startswith(str(ALEXNET))


async def test_mtia_stream_lanes_come_first_and_stay_apart() -> None:
    app = NeuronProfApp([real(KINETO_DIR / "mtia_inference_trace_mtia_inference_rank_0.json.gz")])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        app.show_view("timeline")
        await pilot.pause()
        tl = app.screen.timeline  # type: ignore[attr-defined]
        lines = screen_text(app).splitlines()[2:-3]
        labels = [ln[: tl.label_width].strip() for ln in lines]
        # GIVEN ~140 host threads, THEN the screen starts with the MTIA streams; queues and streams differ
        assert labels[0] == "mtia17 s101", labels
        drawn = [lab for lab in labels if lab and not lab.startswith("└")]
        assert len(drawn) == len(set(drawn)), drawn


def test_an_annotation_is_not_device_work() -> None:
    from neuron_prof.tui._data import prepare

    # GIVEN a DDP trace: Kineto copies the user annotation DistributedDataParallel.forward onto the GPU
    data = prepare([real(KINETO_DIR / "trace_filter_sampled_rank-0.json.gz")], lambda f, s: None, lambda: False)
    ops = OPS.of(data)
    where = {str(n): str(w) for n, w in zip(ops["name"], ops["where"])}
    # THEN the ops view lists it once, as host time, never as a device op with its self time
    assert where.get("DistributedDataParallel.forward") == "host"
    assert [n for n in ops["name"] if str(n) == "DistributedDataParallel.forward"] == ["DistributedDataParallel.forward"]
