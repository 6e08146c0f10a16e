"""ViewScreen: what every view shares: the view tabs, a footer, `/` filter, `t` jump and rank changes.

A subclass declares its view in class attributes (VIEW, TITLE, HELP, TABLES, LOADING: its key, its tab, its
words in the help, the tables it shows and what is being computed while they are not there), implements
`compose_body()` and, when it has a main table, sets `self.table`; the timeline jump target of the
highlighted row comes from `jump_target()` (columns ``ts_ns`` and ``track``). The registry of views
(`neuron_prof.tui.views`) lists each screen once; the app, the view bar, the help and the background
tables read it from there.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Static

from neuron_prof.analysis.fmt import printable
from neuron_prof.tui._data import RankData, TuiData, ViewTable
from neuron_prof.tui.widgets.bars import KeyBar, ViewBar
from neuron_prof.tui.widgets.virtual_table import VirtualTable


class ViewHost(Protocol):
    """What a view asks of the app that shows it (tui.app.NeuronProfApp; named by shape so that the app,
    which imports the screens, is not imported back)."""

    data: TuiData
    data_version: int
    pending_jump: tuple[int, int | None, int | None] | None
    tabs: tuple[tuple[str, str], ...]
    """(view, label) of every view on the view bar, in order ("compile", "2 Compile stalls")."""

    def show_view(self, view: str, focus_key: str | None = None) -> None: ...

    def jump(self, ts_ns: int, track: int | None = None, row: int | None = None) -> None: ...

    def select_rank(self, index: int) -> None: ...


class ViewScreen(Screen[None]):
    """Base of the views."""

    VIEW: ClassVar[str] = ""
    """The view's key: its mode in the app and `show_view`'s name for it ("compile")."""
    TITLE: ClassVar[str] = ""
    """Its name on the view bar, after its key ("Compile stalls")."""
    HELP: ClassVar[str] = ""
    """What the help says of it: its words in the "switch view" line for a view on the bar ("compile
    stalls"), its own line for one off the bar, reached by its key only (the device view)."""
    TABLES: ClassVar[tuple[ViewTable, ...]] = ()
    """The tables it shows (`_data.RankTable`, `_data.CrossTable`), built in the background after the first
    screen; until they are, the app shows PendingScreen in its place."""
    LOADING: ClassVar[str] = "its tables"
    """What PendingScreen says is being computed meanwhile ("the compile stalls")."""
    JUMPS: ClassVar[bool] = True
    """Whether rows of this view have a place on the timeline (`t`)."""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter"),
        Binding("t", "jump", "Timeline jump"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("shift+down,J", "scroll_detail(3)", "Scroll detail", show=False),
        Binding("shift+up,K", "scroll_detail(-3)", "Scroll detail up", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.table: VirtualTable | None = None
        self._version = -1

    @property
    def np_app(self) -> ViewHost:
        return self.app  # type: ignore[return-value]

    @property
    def data(self) -> TuiData:
        return self.np_app.data

    @property
    def rank(self) -> RankData:
        return self.data.rank

    def compose(self) -> ComposeResult:
        self._version = self.np_app.data_version
        yield ViewBar(self.np_app.tabs, self.VIEW, id="views")
        yield from self.compose_body()
        yield KeyBar()

    def compose_body(self) -> Iterable[Widget]:
        raise NotImplementedError

    def ready(self) -> None:
        """Called once the view's widgets are mounted (first time and after a rebuild)."""
        if self.table is not None:
            self.table.focus()
            self.show_row(self.table.row)

    def show_row(self, row: int) -> None:
        """Views with a detail pane fill it for the table's row `row` (-1: the table is empty)."""

    def on_virtual_table_row_highlighted(self, event: VirtualTable.RowHighlighted) -> None:
        self.show_row(event.row)

    def on_mount(self) -> None:
        # not attached: the app is exiting (`q` while this screen mounted in the background); its
        # widgets were not mounted, and there is nothing to show
        if self.is_attached:
            self.ready()

    async def rebuild(self) -> None:
        """Compose the view again from the current data (another rank was chosen)."""
        self.table = None
        await self.recompose()
        if self.is_attached:
            self.ready()

    async def catch_up(self) -> None:
        """Rebuild if the view was built for another rank than the one shown now.

        Runs in the screen's own message queue (its resume, `select_rank` and the app's background
        rebuild all call it there), so two rebuilds never interleave.
        """
        # _version is -1 until the first compose: before that there is nothing to rebuild
        if 0 <= self._version != self.np_app.data_version:
            await self.rebuild()

    async def on_screen_resume(self) -> None:
        if 0 <= self._version != self.np_app.data_version:
            await self.catch_up()
        elif self.table is not None and self.focused is None:
            self.table.focus()

    def on_view_bar_chosen(self, event: ViewBar.Chosen) -> None:
        event.stop()
        if event.view != self.VIEW:
            self.np_app.show_view(event.view)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # no table (timeline): no filter key in the key bar
        if action in ("filter", "clear_filter") and self.table is None:
            return False
        return not (action == "jump" and not self.JUMPS)

    def action_scroll_detail(self, lines: int) -> None:
        """shift+↓/↑: scroll the detail pane, whose end a short screen cannot show (80x24: the advice)."""
        for pane in self.query(Detail):
            pane.scroll_relative(y=lines, animate=False, immediate=True)

    # ---- filter -----------------------------------------------------------------------------
    def action_filter(self) -> None:
        if self.table is None:
            return
        self._filter_box().focus()

    def _filter_box(self, value: str | None = None) -> Input:
        """The filter box, shown (with `value` in it, when given)."""
        # mounted on first use: an Input costs ~50 ms of style work per view even when hidden
        found = self.query("#filter")
        if found:
            box = found.first(Input)
            if value is not None:
                box.value = value
        else:
            box = Input(value or "", placeholder="filter (enter: keep, esc: clear)", id="filter")
            self.mount(box, before=self.query_one(KeyBar))
        box.remove_class("-hidden")
        return box

    def open_filtered(self, key: str) -> bool:
        """Show only the rows matching `key` (a finding's call site or name), the best one highlighted; the
        filter box says so and esc shows every row again. A key no row matches only highlights."""
        t = self.table
        if t is None or not key:
            return False
        t.filter(key)
        if not len(t.order):
            t.filter("")
            return self.focus_key(key)
        self._filter_box(key)
        t.focus()
        self.focus_key(key)
        return True

    def on_input_changed(self, event: Input.Changed) -> None:
        # a box filled by `open_filtered` reports its value too: the table is filtered already
        if event.input.id == "filter" and self.table is not None and event.value != self.table.filter_text:
            self.table.filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter" and self.table is not None:
            self.table.focus()

    def action_clear_filter(self) -> None:
        found = self.query("#filter")
        if not found:
            return
        box = found.first(Input)
        if self.table is not None and (box.value or not box.has_class("-hidden")):
            box.value = ""
            box.add_class("-hidden")
            self.table.filter("")
            self.table.focus()

    def focus_key(self, key: str) -> bool:
        """Highlight the first row whose call site or name equals `key` (drill-in from a finding)."""
        t = self.table
        if t is None or not key:
            return False
        for col in ("call_site", "name"):
            if col in t.data:
                hits = [i for i, r in enumerate(t.order) if str(t.data[col][r]) == key]
                if hits:
                    t.move_to(hits[0])
                    return True
        return False

    # ---- timeline jump ------------------------------------------------------------------------
    def jump_target(self) -> tuple[int | None, int | None]:
        """(time ns, track) of the highlighted row; (None, None) when nothing is highlighted."""
        t = self.table
        if t is None or t.row < 0 or "ts_ns" not in t.data:
            return None, None
        track = int(t.value("track")) if "track" in t.data else None
        return int(t.value("ts_ns")), track

    def jump_row(self) -> int | None:
        """The slice row of the highlighted table row (column ``row``), when the table has one."""
        t = self.table
        if t is None or t.row < 0 or "row" not in t.data:
            return None
        row = int(t.value("row"))
        return row if row >= 0 else None

    def action_jump(self) -> None:
        ts, track = self.jump_target()
        if ts is None:
            self.notify("Nothing here to show on the timeline.", severity="warning", markup=False)
            return
        self.np_app.jump(ts, track, self.jump_row())


def detail(*parts: tuple[str, object]) -> list[tuple[str, str]]:
    """(label, value) pairs for a detail pane, dropping empty values."""
    return [(k, str(v)) for k, v in parts if v not in (None, "")]


class Detail(VerticalScroll, can_focus=False):
    """A detail pane: labels in bold, trace strings literal. Taller than its room, it shows a scrollbar
    and scrolls with shift+↓/↑ or the wheel (a Static alone would be clipped: its height is the room)."""

    _static: Static | None = None
    _shown: Text | None = None

    def compose(self) -> ComposeResult:
        # what `show` was given before the pane composed (a view mounted in the background fills its pane from
        # its own mount, which can come first) is its first text
        self._static = Static(self._shown or "", id="detail-text")
        yield self._static

    def show(self, rows: list[tuple[str, str]]) -> None:
        t = Text()
        for i, (k, v) in enumerate(rows):
            if i:
                t.append("\n")
            t.append(f"{k}: ", style="bold")
            t.append(printable(v, newlines=True))  # stacks and plans span lines
        self._shown = t
        if self._static is not None:
            self._static.update(t)
        if self.is_mounted:
            self.scroll_home(animate=False, immediate=True)

    def text(self) -> str:
        """The shown text (for tests)."""
        return str(self._static.render()) if self._static is not None else str(self._shown or "")
