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


async def ready(pilot, app: NeuronProfApp) -> None:  # type: ignore[no-untyped-def]
    for _ in range(200):
        if app.ready and app.current_mode != "loading":
            break
        await pilot.pause(0.02)
    assert app.ready, "the traces did not load"
    await pilot.pause()


def table(app: NeuronProfApp) -> VirtualTable:
    t = app.screen.table  # type: ignore[attr-defined]
    assert isinstance(t, VirtualTable)
    return t


def shown(t: VirtualTable, key: str) -> list[object]:
    """Column `key`'s raw values in display order (also for columns the table does not draw)."""
    return [t.data[key][r] for r in t.order]
