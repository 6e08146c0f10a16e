"""One-line bars: the view switcher at the top and the key bar at the bottom.

Textual's `Tabs` and `Footer` build one widget per tab or key; applying their styles made the first
switch to each view cost 0.5-1 s (measured, 2 cores). These draw one line of Text each, so a view
switch costs one widget's layout.
"""

from __future__ import annotations

from rich.text import Text
from textual.events import Click
from textual.message import Message
from textual.widget import Widget


class ViewBar(Widget):
    """The views as one line of labels; the active one is highlighted; a click posts `Chosen`."""

    DEFAULT_CSS = """
    ViewBar { height: 1; background: $panel; }
    """

    class Chosen(Message):
        def __init__(self, view: str) -> None:
            super().__init__()
            self.view = view

    def __init__(self, views: tuple[tuple[str, str], ...], active: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.views = views
        self.active = active
        self._spans: list[tuple[int, int, str]] = []

    def _labels(self, tier: int) -> list[str]:
        """The labels at `tier`: 0 full ("2 Compile stalls"), 1 first word ("2 Compile"), 2 four letters
        ("2 Comp"), 3 the number only; the active view keeps at least its first word."""
        out = []
        for view, label in self.views:
            words = label.split()
            short = " ".join(words[:2])
            if tier == 0:
                out.append(label)
            elif tier == 1 or view == self.active:
                out.append(short)
            elif tier == 2:
                out.append(short[: len(words[0]) + 5])
            else:
                out.append(words[0])
        return out

    def render(self) -> Text:
        # the widest labels that fit: at 80 columns every view is still named and reachable by click
        # (the space between labels goes before a label is shortened further)
        width = self.size.width or 80
        for tier, gap in ((0, 1), (1, 1), (2, 1), (2, 0), (3, 1)):
            labels = self._labels(tier)
            if sum(len(x) + 2 + gap for x in labels) - gap <= width:
                break
        t = Text(no_wrap=True, overflow="ellipsis")
        self._spans = []
        for (view, _), label in zip(self.views, labels):
            start = len(t)
            t.append(f" {label} ", style="bold reverse" if view == self.active else "")
            self._spans.append((start, len(t), view))
            t.append(" " * gap)
        return t

    def on_click(self, event: Click) -> None:
        for a, b, view in self._spans:
            if a <= event.x < b:
                self.post_message(self.Chosen(view))
                return


class KeyBar(Widget):
    """The screen's active key bindings (those with `show`) as one line: key, then what it does."""

    DEFAULT_CSS = """
    KeyBar { height: 1; dock: bottom; background: $panel; }
    """

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, lambda _screen: self.refresh())

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def render(self) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        seen: set[str] = set()
        width = self.size.width or 80
        for _node, binding, enabled, _tooltip in self.screen.active_bindings.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            key = f" {self.app.get_key_display(binding)} "
            what = f" {binding.description}  "
            if t.cell_len + len(key) + len(what.rstrip()) > width:
                break  # keys drop whole, never "Fil…"
            t.append(key, style="bold reverse" if enabled else "dim reverse")
            t.append(what, style="" if enabled else "dim")
        return t
