"""Driving the TUI with Pilot in tests: the screen as text and styles, waiting until the traces are loaded,
the current view's table."""

from __future__ import annotations

from rich.style import Style

from neuron_prof.tui.app import NeuronProfApp
from neuron_prof.tui.widgets.virtual_table import VirtualTable

SIZE = (160, 48)


def screen_text(app: NeuronProfApp) -> str:
    """Everything on the screen as plain text (the compositor's lines)."""
    return "\n".join(s.text for s in app.screen._compositor.render_strips())


def screen_styles(app: NeuronProfApp) -> list[Style]:
    return [seg.style for strip in app.screen._compositor.render_strips() for seg in strip if seg.style]


async def first_screen(pilot, app: NeuronProfApp) -> None:  # type: ignore[no-untyped-def]
    """Wait until the traces are loaded and the first view is shown (the other views may still be loading)."""
    for _ in range(500):
        if app.ready and app.current_mode != "loading" and app.shown_at is not None:
            break
        await pilot.pause(0.02)
    assert app.ready, "the traces did not load"
    await pilot.pause()


async def ready(pilot, app: NeuronProfApp) -> None:  # type: ignore[no-untyped-def]
    """Wait until the traces are loaded, every view's tables are built and the start view is shown."""
    await first_screen(pilot, app)
    for _ in range(500):
        if app.warmed_at is not None and app.current_mode != "pending":
            break
        await pilot.pause(0.02)
    assert app.warmed_at is not None, "the views' tables were not built"
    await pilot.pause()


def table(app: NeuronProfApp) -> VirtualTable:
    t = app.screen.table  # type: ignore[attr-defined]
    assert isinstance(t, VirtualTable)
    return t


def shown(t: VirtualTable, key: str) -> list[object]:
    """Column `key`'s raw values in display order (also for columns the table does not draw)."""
    return [t.data[key][r] for r in t.order]
