"""TUI: every view's screen is mounted in the background once the first view is shown.

The first switch to a view used to mount its screen (compose, CSS, layout): 110-135 ms at 1M events
(bench/RESULTS.md). `NeuronProfApp._premount` mounts them after the first screen and the warm tables;
these tests check that it happens, that it changes nothing the user sees, and that keys, quitting and
rank changes during or after it behave as before. No timings here: bench_tui measures them.
"""

from __future__ import annotations

import asyncio

from textual.worker import WorkerState

from neuron_prof.tui.app import NeuronProfApp
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.views import VIEWS
from neuron_prof.tui.widgets.bars import ViewBar
from neuron_prof.tui.widgets.timeline import Timeline
from neuron_prof.tui.widgets.virtual_table import VirtualTable
from tests._demo_trace import COMPILE_OP, demo_like_trace
from tests._tui_pilot import SIZE, ready, screen_text, table


async def settled(pilot, app: NeuronProfApp) -> None:  # type: ignore[no-untyped-def]
    """Wait (a bounded number of pauses) until the app is shown and its workers are all done."""
    await ready(pilot, app)
    for _ in range(250):
        if not any(w.is_running or w.state == WorkerState.PENDING for w in app.workers):
            break
        await pilot.pause(0.02)
    await pilot.pause()


async def premounted(pilot, app: NeuronProfApp) -> None:  # type: ignore[no-untyped-def]
    await settled(pilot, app)
    assert app.premounted_at is not None, "the views were not mounted in the background"


async def started(app: NeuronProfApp) -> None:
    """Wait until the background mounting starts; no Pilot pause, which would wait for it to end."""
    for _ in range(10_000):
        if app.premounter is not None:
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the background mounting did not start")


def mounted_view(app: NeuronProfApp, view: str) -> ViewScreen:
    stack = app.get_screen_stack(view)  # KeyError: the mode's screen was never created
    assert len(stack) == 1
    screen = stack[0]
    assert isinstance(screen, ViewScreen) and screen.VIEW == view
    return screen


async def test_every_view_is_mounted_before_the_first_key() -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app)
        # GIVEN no key pressed since the overview was shown
        assert app.current_mode == "overview"
        overview = app.screen
        findings = overview.focused
        # THEN every view's screen exists, is mounted and composed (its tabs bar and its table are there)
        screens = {view: mounted_view(app, view) for view in VIEWS.tab_keys}
        for view, screen in screens.items():
            assert screen.is_mounted, view
            assert screen.query_one(ViewBar).active == view
            if view != "timeline":
                assert isinstance(screen.table, VirtualTable) and screen.table.is_mounted, view
            assert screen._version == app.data_version, view
        # ... and the shown view is untouched: same screen, same focus
        assert app.screen is overview and overview.focused is findings
        assert isinstance(findings, VirtualTable) and findings.id == "findings"
        # a switch shows the mounted screen itself, with its content, focus on its table
        await pilot.press("2")
        await pilot.pause()
        assert app.screen is screens["compile"]
        assert app.screen.focused is screens["compile"].table
        t = table(app)
        assert t.data["name"][t.order[0]] == COMPILE_OP
        assert "(f32[8,128], f32[128,128])" in screen_text(app)
        await pilot.press("5")
        await pilot.pause()
        assert app.screen is screens["timeline"]
        assert app.screen.focused is app.screen.query_one(Timeline)
        assert any("  cursor " in line for line in screen_text(app).splitlines())


async def test_the_start_view_is_shown_as_before_and_the_others_are_mounted() -> None:
    app = NeuronProfApp([demo_like_trace()], start_view="timeline")
    async with app.run_test(size=SIZE) as pilot:
        await premounted(pilot, app)
        assert app.current_mode == "timeline"
        assert app.screen.focused is app.screen.query_one(Timeline)
        for view in VIEWS.tab_keys:
            assert mounted_view(app, view).is_mounted
        await pilot.press("3")
        await pilot.pause()
        assert table(app).visible_text("call_site")[0] == "model.py:88"


async def test_keys_pressed_while_the_views_mount_land_where_they_should() -> None:
    seen: list[tuple[str, bool]] = []

    class Recording(NeuronProfApp):
        def action_view(self, view: str) -> None:
            seen.append((view, self.premounted_at is None))
            super().action_view(view)

    app = Recording([demo_like_trace()])
    async with app.run_test(size=SIZE) as pilot:
        await started(app)
        # GIVEN the background mounting has just started, WHEN view keys come in
        await pilot.press("4", "slash", *"addmm", "enter")
        # THEN they act on the views as they would without it
        assert seen == [("ops", True)], "the key came after the mounting ended: nothing tested"
        assert app.current_mode == "ops"
        assert table(app).visible_text("name") == ["aten::addmm"]
        await pilot.press("tab")
        await pilot.pause()
        assert app.current_mode == "timeline"
        await premounted(pilot, app)
        assert app.current_mode == "timeline"
        for view in VIEWS.tab_keys:
            assert mounted_view(app, view).is_mounted
        # the filter typed on the ops view is still there when it is shown again
        await pilot.press("4")
        await pilot.pause()
        assert table(app).visible_text("name") == ["aten::addmm"]


async def test_quitting_while_the_views_mount_ends_the_app_at_once() -> None:
    app = NeuronProfApp([demo_like_trace(0), demo_like_trace(1)])
    async with app.run_test(size=SIZE) as pilot:
        await started(app)
        assert app.premounted_at is None
        await pilot.press("q")
    assert app.return_code == 0 and not app.is_running
    assert app.premounter.state in (WorkerState.CANCELLED, WorkerState.SUCCESS)


async def test_quitting_as_soon_as_the_traces_are_loaded() -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(250):
            if app.ready:
                break
            await pilot.pause(0.005)
        await pilot.press("q")
    assert app.return_code == 0 and not app.is_running


async def test_another_rank_rebuilds_the_hidden_views_in_the_background() -> None:
    app = NeuronProfApp([demo_like_trace(0), demo_like_trace(1, slow=1.5)])
    async with app.run_test(size=SIZE) as pilot:
        await premounted(pilot, app)
        timeline = mounted_view(app, "timeline")
        assert all("rank 1" not in lane.title for lane in timeline.query_one(Timeline).lanes)
        # WHEN rank 1 is chosen on the ranks view
        await pilot.press("8", "down", "enter")
        for _ in range(250):
            screens = [mounted_view(app, view) for view in VIEWS.tab_keys]
            if app.premounted_at is not None and all(s._version == app.data_version for s in screens):
                break
            await pilot.pause(0.02)
        # THEN every view, shown or not, is rebuilt for rank 1 without being shown first
        assert app.current_mode == "overview" and app.data.current == 1
        for view in VIEWS.tab_keys:
            screen = mounted_view(app, view)
            assert screen._version == app.data_version, view
        lanes = app.get_screen_stack("timeline")[0].query_one(Timeline).lanes
        assert any("rank 1" in lane.title for lane in lanes)
        assert "demo-rank1.json" in screen_text(app)
        # ... and shows it so: the timeline's lanes and the ranks view name rank 1
        await pilot.press("5")
        await pilot.pause()
        assert "rank 1" in screen_text(app) and "rank 0" not in screen_text(app)
        await pilot.press("8")
        await pilot.pause()
        assert "showing rank 1" in screen_text(app)
        assert table(app).row == 1


async def test_the_heap_is_frozen_while_the_app_runs_and_unfrozen_when_it_ends() -> None:
    import gc

    before = gc.get_freeze_count()
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=SIZE) as pilot:
        await premounted(pilot, app)
        # GIVEN every view mounted, THEN what is alive is out of the full collections' way
        assert gc.get_freeze_count() > before
        await pilot.press("q")
    # and back in them once the app has ended, so that what it leaves behind is collected
    assert gc.get_freeze_count() == 0
