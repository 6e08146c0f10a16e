"""TUI layer 3: the app driven by Pilot, asserting on what each view shows.

Expected values come from how `demo_like_trace` was built (tests/test_tui_shape.py), not from the
code under test: the 450 ms aten::matmul compile, the model.py:88 fallback site, times in ms from T0.
"""

from __future__ import annotations

import numpy as np

from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.tui.app import NeuronProfApp
from neuron_prof.tui.widgets.timeline import Timeline
from tests._demo_trace import (
    CHURN_SIZES,
    COMPILE_MS,
    COMPILE_OP,
    FALLBACK_OP,
    FALLBACK_SITE,
    MARKUP_NAMES,
    MS,
    T0,
    demo_like_trace,
)
from tests._tui_pilot import SIZE, first_screen, ready, screen_styles, screen_text, shown, table


async def test_overview_ranks_compile_stall_and_fallback_first() -> None:
    from neuron_prof.analysis import analyze

    trace = demo_like_trace()
    top = analyze(trace)[0]
    app = NeuronProfApp([trace])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        text = screen_text(app)
        # GIVEN a trace whose biggest cost is the 450 ms first compile of aten::matmul
        # THEN the first finding row is that stall with the analysis' cost; a fallback is in the top three
        finding_rows = [
            r for r in text.splitlines() if r.lstrip().startswith(("critical", "warning", "info"))
        ]
        assert top.kind == "first_call_compile"
        assert "first_call_compile" in finding_rows[0] and fmt_ns(top.cost_ns) in finding_rows[0]
        assert any("cpu_fallback" in r and FALLBACK_SITE in r for r in finding_rows[:3])
        # the detail pane shows the highlighted (top) finding in full
        assert f"top: {COMPILE_OP}" in text
        # totals: wall = 10 steps of 20 ms + the 450 ms compile; compile 450 + 2 x 30 ms
        assert "wall 650.0 ms" in text
        assert "compile 510.0 ms" in text
        assert "CPU fallback 35.0 ms" in text
        # the step sparkline: the first step is the tall bar
        assert "█▁▁▁▁▁▁▁▁▁" in text
        # headlines: the top compile stall and the top fallback, whatever else costs more
        assert f"top compile stall  {top.title[:50]}" in text
        assert f"top CPU fallback   CPU fallback: {FALLBACK_OP}" in text


async def test_compile_view_top_stall_and_reasons() -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("2")
        t = table(app)
        assert shown(t, "name")[0] == COMPILE_OP
        assert t.visible_text("total_ns")[0] == f"{COMPILE_MS:.1f} ms"
        text = screen_text(app)
        assert "(f32[8,128], f32[128,128])" in text and "train.py:42" in text
        # the recompiled graph (the next op): its reasons show in the detail pane
        await pilot.press("down")
        await pilot.pause()
        assert "size mismatch at index 1" in screen_text(app)


async def test_compile_detail_shows_the_bucket_plan() -> None:
    from neuron_prof.analysis import analyze

    trace = demo_like_trace(churn=True)
    churn = next(f for f in analyze(trace) if f.kind == "shape_churn")
    plan = churn.evidence["plan"]
    app = NeuronProfApp([trace])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("2")
        t = table(app)
        t.move_to(shown(t, "name").index("aten::add.Tensor"))
        await pilot.pause()
        text = screen_text(app)
        # GIVEN 5 sizes of one dimension, THEN the detail names the analysis' plan for them
        assert plan["compiles_before"] == len(CHURN_SIZES)
        assert f"bucket plan: {len(CHURN_SIZES)} compiles -> {plan['k']} bucket" in text
        assert str(list(plan["buckets"])) in text
        assert set(plan["buckets"]) <= set(CHURN_SIZES) and max(plan["buckets"]) == max(CHURN_SIZES)


async def test_fallback_view_top_call_site_and_stack() -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("3")
        t = table(app)
        assert t.visible_text("call_site") == [FALLBACK_SITE, "data.py:12"]
        assert t.visible_text("total_ns")[0] == "30.0 ms"
        text = screen_text(app)
        assert "model.py:88 in forward" in text and "model.head" in text


async def test_jump_from_fallback_row_lands_at_its_time() -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("3", "t")
        await pilot.pause()
        assert app.current_mode == "timeline"
        tl = app.screen.query_one(Timeline)
        # the first aten::_unique2 call: step 0 starts at T0, +1 ms, +450 ms compile, +6 ms
        expected = T0 + MS + COMPILE_MS * MS + 6 * MS
        assert tl.cursor_abs == expected
        assert tl.lanes[tl.lane].kind == "fallback"
        status = screen_text(app).splitlines()
        line = next(s for s in status if "  cursor " in s)
        assert f"cursor {(expected - T0) / 1e6:,.3f} ms" in line and FALLBACK_OP in line


async def test_timeline_zoom_and_pan_keys() -> None:
    app = NeuronProfApp([demo_like_trace()], start_view="timeline")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        tl = app.screen.query_one(Timeline)
        w0 = tl.t1 - tl.t0
        await pilot.press("plus")
        assert abs((tl.t1 - tl.t0) - w0 / 2) < 1
        await pilot.press("minus")
        assert abs((tl.t1 - tl.t0) - w0) < 1
        c = tl.cursor_ns
        await pilot.press("right", "right")
        assert abs(tl.cursor_ns - (c + 2 * w0 / tl.cells)) < 1
        await pilot.press("plus", "shift+right")
        assert tl.t0 > 0
        # a click picks the lane and the time under the mouse
        await pilot.click(Timeline, offset=(tl.label_width + 1 + 10, 2))
        assert tl.lane == 2
        assert abs(tl.cursor_ns - tl.time_of(10)) < 1


async def test_ops_filter_drill_in_and_jump() -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("4", "slash", *"addmm", "enter")
        t = table(app)
        assert t.visible_text("name") == ["aten::addmm"]
        await pilot.press("enter")
        await pilot.pause()
        calls = app.screen.table  # type: ignore[attr-defined]
        assert len(calls.order) == 10
        first = int(calls.value("ts_ns"))
        await pilot.press("t")
        await pilot.pause()
        tl = app.screen.query_one(Timeline)
        assert tl.cursor_abs == first
        assert "aten::addmm" in screen_text(app)


async def test_markup_in_op_names_is_shown_literally_and_never_clickable() -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("4")
        await pilot.pause()
        text = screen_text(app)
        for name in MARKUP_NAMES:
            assert name in text, name
        assert not any(st.meta and "@click" in st.meta for st in screen_styles(app))
        # clicking on the drawn name runs no action: the app keeps running, on the same view
        name = MARKUP_NAMES[3]
        lines = text.splitlines()
        y = next(i for i, line in enumerate(lines) if name in line)
        await pilot.click(offset=(lines[y].index(name) + 2, y))
        await pilot.pause()
        assert app.is_running and app.current_mode == "ops"
        # the same name on the timeline's status line
        t = table(app)
        row = int(np.flatnonzero(t.data["name"] == name)[0])
        t.move_to(int(np.flatnonzero(t.order == row)[0]))
        await pilot.press("t")
        await pilot.pause()
        assert name in screen_text(app)
        assert not any(st.meta and "@click" in st.meta for st in screen_styles(app))


async def test_help_and_perfetto_hint() -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot, app)
        await pilot.press("question_mark")
        await pilot.pause()
        assert "jump to the highlighted row" in screen_text(app)
        await pilot.press("escape")
        await pilot.press("o")
        await pilot.pause()
        assert "neuron-prof open demo-rank0.json" in app.perfetto_hint()
        assert any("ui.perfetto.dev" in str(n.message) for n in app._notifications)
        await pilot.press("q")
    assert app.return_code == 0


async def test_perfetto_hint_names_the_native_trace_beside_a_rank_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 31: the hint named trace.pftrace for trace.rank0.json (the stem cut at its first dot)."""
    from neuron_prof.exporters import write_trace

    trace = demo_like_trace()
    src = write_trace(trace, tmp_path / "trace.rank0.json")
    native = write_trace(trace, tmp_path / "trace.rank0.pftrace")
    app = NeuronProfApp([str(src)])
    async with app.run_test(size=SIZE) as pilot:
        await first_screen(pilot, app)
        assert f"neuron-prof open {native}" in app.perfetto_hint()
        native.unlink()  # without it, the hint names the JSON itself
        assert f"neuron-prof open {src}" in app.perfetto_hint()
        await pilot.press("q")


async def test_views_cycle_with_tab_and_every_view_renders() -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        seen = []
        for _ in range(9):
            seen.append(app.current_mode)
            await pilot.press("tab")
            await pilot.pause()
        assert seen == [
            "overview",
            "compile",
            "fallback",
            "ops",
            "timeline",
            "memory",
            "collectives",
            "ranks",
            "lines",
        ]
        assert app.current_mode == "overview"
        await pilot.press("6")
        await pilot.pause()
        # memory peak: (1 + step % 3) x 100 MB peaks at 300 MB first at step 2
        assert "286.1 MiB" in screen_text(app)
        await pilot.press("7")
        await pilot.pause()
        assert "4.00 GB/s" in screen_text(app)


async def test_several_ranks_and_switching() -> None:
    app = NeuronProfApp([demo_like_trace(1, slow=1.5), demo_like_trace(0)])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        # ranks are ordered by rank number whatever the order on the command line
        assert "demo-rank0.json" in screen_text(app)
        await pilot.press("8")
        await pilot.pause()
        t = table(app)
        assert t.visible_text("rank") == ["0", "1"]
        assert t.visible_text("step_ns") == ["20.0 ms", "30.0 ms"]
        await pilot.press("down", "enter")
        await pilot.pause()
        await pilot.pause()
        assert app.current_mode == "overview"
        assert "demo-rank1.json" in screen_text(app)
        await pilot.press("7")
        await pilot.pause()
        assert sorted(table(app).visible_text("rank")) == ["0", "1"]


async def test_jump_from_another_ranks_collective_shows_that_ranks_timeline() -> None:
    app = NeuronProfApp([demo_like_trace(0), demo_like_trace(1, slow=1.5)])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("5", "7")  # the timeline exists (rank 0) before the jump to rank 1
        await pilot.pause()
        t = table(app)
        t.move_to(t.visible_text("rank").index("1"))
        await pilot.press("t")
        for _ in range(5):
            await pilot.pause()
        assert app.current_mode == "timeline" and app.data.current == 1
        tl = app.screen.query_one(Timeline)
        lane = tl.lanes[tl.lane]
        assert lane.kind == "collective" and "rank 1" in lane.title
        # rank 1's first all_reduce: step 0 of rank 1 starts at T0; +1 ms, +450 ms compile, +13 ms
        assert tl.cursor_abs == T0 + MS + COMPILE_MS * MS + 13 * MS
        assert "all_reduce" in screen_text(app)
        # the overview follows the chosen rank too
        await pilot.press("1")
        await pilot.pause()
        assert "demo-rank1.json" in screen_text(app)


async def test_missing_file_ends_with_its_error() -> None:
    app = NeuronProfApp(["/nonexistent/trace.json"])
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            if not app.is_running:
                break
            await pilot.pause(0.02)
    assert app.return_code == 2
    assert app.error is not None and "/nonexistent/trace.json: no such file" in app.error


async def test_enter_on_a_finding_opens_its_view_at_its_row_and_t_jumps_to_its_time() -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        t = table(app)
        kinds = list(t.data["kind"][t.order])
        fb = kinds.index("cpu_fallback")
        finding = app.data.rank.findings[int(t.order[fb])]
        t.move_to(fb)
        await pilot.press("enter")
        await pilot.pause()
        assert app.current_mode == "fallback"
        assert table(app).value("call_site") == finding.call_site == FALLBACK_SITE
        # back to the overview: t on the same finding lands at the finding's own time
        await pilot.press("1", "t")
        await pilot.pause()
        tl = app.screen.query_one(Timeline)
        assert tl.cursor_abs == finding.ts_ns == T0 + MS + COMPILE_MS * MS + 6 * MS
