"""NeuronProfApp: the thin App. It shows the views of the registry, loads traces in a worker and routes jumps.

    app = NeuronProfApp(["trace.json"])          # paths or ready Traces
    app.run()

Loading and the first pass (the overview's totals and findings) run in a daemon thread (awaited by a
worker) that posts `Progress`, `Loaded` or `Failed`; the UI stays on a progress bar meanwhile and `q`
quits at once, even mid-parse.

Once the overview is painted, a worker builds every other view's tables (`TuiData.warm`, in a thread,
posting `TableReady` after each) and then mounts every other view's screen in the background
(`_premount`), one per refresh, so the first switch to a view shows a screen that is already composed,
styled and laid out. A switch to a view whose tables are not built yet shows `PendingScreen` ("loading…")
with that view's tab; its tables are built next and the view replaces it when they are.

The views, their keys and their tables come from the view registry (`neuron_prof.tui.views.VIEWS`, or the
`views` given): nothing here names a view but the overview, which is shown first.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import App, ScreenStackError
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.message_pump import MessagePump
from textual.worker import Worker, get_current_worker

from neuron_prof.errors import NeuronProfError
from neuron_prof.formats import companion_pftrace
from neuron_prof.tui._data import Source, TuiData, ViewTable, prepare
from neuron_prof.tui._threads import in_daemon_thread
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.screens.help import HelpScreen
from neuron_prof.tui.screens.loading import LoadingScreen
from neuron_prof.tui.screens.pending import PendingScreen
from neuron_prof.tui.views import VIEWS, Views


async def _in_queue(node: MessagePump, fn: Callable[[], Awaitable[None]]) -> None:
    """Run `fn` in `node`'s message queue (after what is already there) and wait for it to end."""
    done = asyncio.Event()

    async def run() -> None:
        try:
            await fn()
        finally:
            done.set()

    if node.call_later(run):
        await done.wait()


class NeuronProfApp(App[int]):
    """The terminal UI over one or more traces (one per rank)."""

    # absolute: Textual resolves a relative CSS_PATH against the module of a subclass
    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "neuron-prof"
    # the palette's commands (screenshots to disk, themes) are not ours to offer, least of all through --serve
    ENABLE_COMMAND_PALETTE = False
    # the views' modes ("pending" among them) and hotkeys are added per app, from its registry
    MODES: ClassVar[dict[str, Any]] = {"loading": LoadingScreen}
    DEFAULT_MODE = "loading"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("tab", "cycle(1)", "Next view", show=False, priority=True),
        Binding("shift+tab", "cycle(-1)", "Previous view", show=False, priority=True),
        Binding("o", "perfetto", "Perfetto"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    class Progress(Message):
        def __init__(self, fraction: float, what: str) -> None:
            super().__init__()
            self.fraction = fraction
            self.what = what

    class Loaded(Message):
        def __init__(self, data: TuiData) -> None:
            super().__init__()
            self.data = data

    class Failed(Message):
        def __init__(self, error: BaseException) -> None:
            super().__init__()
            self.error = error

    class TableReady(Message):
        """A view's table was built in the background (`TuiData.warm`)."""

        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def __init__(self, sources: Sequence[Source], *, start_view: str = "overview", views: Views = VIEWS) -> None:
        super().__init__()
        self.views = views
        """The views this app shows (the registry, `neuron_prof.tui.views`)."""
        self.tabs = views.tabs
        """(view, label) of the views on the view bar (`ViewHost.tabs`)."""
        for v in views:
            self.add_mode(v.key, v.screen)
            self.bind(v.hotkey, f"view('{v.key}')", description=v.label if v.tab else v.title, show=False)
        self.add_mode("pending", lambda: PendingScreen(views))
        self.sources = list(sources)
        self.start_view = start_view
        self.data: TuiData = TuiData(ranks=[])
        self.data_version = 0
        """Bumped when another rank is chosen: screens built for an older version recompose."""
        self.pending_jump: tuple[int, int | None, int | None] | None = None
        """(time, track, slice row) the timeline centres on when it is next shown."""
        self.error: str | None = None
        self.shown_at: float | None = None
        """perf_counter() when the first view was painted with the loaded data (bench_tui reads it)."""
        self.loader: Worker[None] | None = None
        """The load worker (finished workers leave app.workers; tests and benches wait on this)."""
        self.warmed_at: float | None = None
        """perf_counter() when the shown rank's tables were all built (bench_tui reads it)."""
        self.premounter: Worker[None] | None = None
        """The worker mounting the views' screens in the background (started once the views are warm)."""
        self.premounted_at: float | None = None
        """perf_counter() when every view's screen was mounted and up to date (bench_tui reads it)."""
        self.waiting: tuple[str, str | None] | None = None
        """(view, focus key) the user asked for whose tables are not built yet (PendingScreen shows it)."""
        self.ready_at: dict[str, float] = {}
        """perf_counter() when each view became ready after the first screen (bench_tui reads it)."""
        self.before_table: Callable[[str], None] | None = None
        """Hook: called in the background thread before each table is built, with its name (`RankTable.name`,
        `CrossTable.name`). Tests set it to hold a table back (a slow stage) without sleeping."""
        self._heap_frozen = False
        self._loading: asyncio.Future[TuiData] | None = None
        """The load started as the app starts (`on_load`), awaited by the `loader` worker."""

    # ---- loading -----------------------------------------------------------------------------
    def on_load(self) -> None:
        # started before the stylesheet, the driver and the first compose: the trace loads while the app starts
        self._loading = in_daemon_thread(
            prepare,
            self.sources,
            lambda f, s: self.post_message(self.Progress(f, s)),
            lambda: self.loader is not None and self.loader.is_cancelled,
            name="neuron-prof-load",
        )

    def on_mount(self) -> None:
        self.title = "neuron-prof " + " ".join(
            os.path.basename(os.fspath(s)) for s in self.sources if not hasattr(s, "slices")
        )
        self.loader = self._load()

    @work(exit_on_error=False, name="load")
    async def _load(self) -> None:
        assert self._loading is not None  # on_load came first
        try:
            data = await self._loading
        except Exception as e:  # noqa: BLE001 - every failure ends the app with its message
            self.post_message(self.Failed(e))
            return
        self.post_message(self.Loaded(data))

    def _top(self) -> Any:
        """The screen shown; None once the app has closed its screens (a message from the background that
        arrives while the app quits, e.g. a table built as `q` was pressed)."""
        try:
            return self.screen
        except ScreenStackError:
            return None

    def on_neuron_prof_app_progress(self, message: Progress) -> None:
        if isinstance(top := self._top(), LoadingScreen):
            top.set_progress(message.fraction, message.what)

    def _first_screen_shown(self) -> None:
        self.shown_at = time.perf_counter()
        self.ready_at = {v: self.shown_at for v in self.views.tab_keys if self.is_ready(v)}
        self._warm()

    @work(exit_on_error=False, name="warm", exclusive=True)
    async def _warm(self) -> None:
        """Build every view's tables while the user reads the overview (those of a view the user is waiting for
        first), so switching views is instant; each built table is announced by `TableReady`."""
        worker = get_current_worker()
        await in_daemon_thread(
            self.data.warm,
            self.views.tables,
            lambda: worker.is_cancelled,
            lambda: self._tables(self.waiting[0]) if self.waiting else (),
            lambda name: self.post_message(self.TableReady(name)),
            lambda name: self.before_table(name) if self.before_table is not None else None,
            name="neuron-prof-warm",
        )
        if not worker.is_cancelled:
            self.warmed_at = time.perf_counter()
            # after the tables: composing a view reads them, and on the UI thread they would block it
            self.premounter = self._premount()

    @work(exit_on_error=False, name="premount", group="premount", exclusive=True)
    async def _premount(self) -> None:
        """Mount every view's screen that is not shown, and rebuild those built for another rank.

        Textual mounts a mode's screen on the first `switch_mode` to it: compose, a CSS pass over every
        mounted screen (twice: once for the new screen, again when it becomes the current one), layout
        and the first render; 27-94 ms of the event loop's CPU at 1.1M events (bench_tui). Done here, a
        first switch is a layout and a render (7-27 ms). One screen per refresh: a key pressed
        meanwhile waits for one screen's mount at most (15-17 ms at 1.1M events).
        Textual has no public call that mounts a mode's screen without showing it: `_init_mode` is what
        `switch_mode` calls for a mode's first screen (Textual 8.2); without it a switch mounts as before.
        """
        worker = get_current_worker()
        self.premounted_at = None
        for view in self.views.tab_keys:
            await self.wait_for_refresh()  # the shown screen has handled its keys and repainted
            if worker.is_cancelled or not self.is_running:
                return
            if view == self.current_mode:
                continue
            try:
                stack = self.get_screen_stack(view)
            except KeyError:  # not shown yet
                stack = []
            if stack:
                # mounted already: rebuilt in its own message queue if another rank was chosen since
                screen = stack[0]
                if isinstance(screen, ViewScreen):
                    await _in_queue(screen, screen.catch_up)
                continue
            init_mode = getattr(self, "_init_mode", None)
            if init_mode is None:
                return
            css_version = self._css_update_count
            await init_mode(view)
            screen = self.get_screen_stack(view)[0]
            # styled by this stylesheet when it mounted: the switch need not restyle every screen again
            if self._css_update_count == css_version:
                screen._css_update_count = css_version
        self.premounted_at = time.perf_counter()
        self._freeze_heap()

    def _freeze_heap(self) -> None:
        """Keep what is loaded and mounted out of the cyclic GC's full collections.

        With a 1M-event trace shown, a full collection walks 60-76k tracked objects (Textual's widgets,
        styles and caches, the trace's tables) and takes 12-49 ms; one ran every ~2 s while bench_tui
        pressed keys, and in most runs one fell into the first switch to the compile view: 59-115 ms
        of CPU instead of ~20. `gc.freeze()` moves every object alive now to the permanent generation,
        which collections skip (reference counting still frees them); `on_unmount` unfreezes them, so
        what the app leaves behind is collected as usual. Run again after a rank change (the new
        rank's screens). The collection first, so no garbage is kept: 12-35 ms once, in the background.
        """
        gc.collect()
        gc.freeze()
        self._heap_frozen = True

    def on_unmount(self) -> None:
        if self._heap_frozen:
            self._heap_frozen = False
            gc.unfreeze()

    def on_neuron_prof_app_loaded(self, message: Loaded) -> None:
        self.data = message.data
        if self.data.ranks:
            self.call_after_refresh(self._first_screen_shown)
        if not self.data.ranks:
            self.exit(return_code=2, message=Text("neuron-prof: error: no trace loaded"))
            return
        self.show_view(self.start_view)

    def on_neuron_prof_app_table_ready(self, message: TableReady) -> None:
        if self.shown_at is not None:
            for view in self.views.tab_keys:
                if view not in self.ready_at and self.is_ready(view):
                    self.ready_at[view] = time.perf_counter()
        # over the loading message only: with the help open on it, the message catches up when shown again
        if isinstance(self._top(), PendingScreen):
            self.catch_up_waiting()

    def catch_up_waiting(self) -> None:
        """Show the view the user is waiting for if its tables are there now (or say why they cannot be)."""
        if self.waiting is not None:
            view, focus_key = self.waiting
            if self.is_ready(view) or self.data.failure(self._tables(view)) is not None:
                self.show_view(view, focus_key)

    def on_neuron_prof_app_failed(self, message: Failed) -> None:
        e = message.error
        self.error = str(e) if isinstance(e, NeuronProfError) else f"{type(e).__name__}: {e}"
        # no exit message: Textual would print it wrapped at the terminal width; the CLI prints `error` as one line
        self.exit(return_code=e.exit_code if isinstance(e, NeuronProfError) else 1)

    @property
    def ready(self) -> bool:
        return bool(self.data.ranks)

    def _tables(self, view: str) -> tuple[ViewTable, ...]:
        v = self.views.get(view)
        return v.tables if v is not None else ()

    def is_ready(self, view: str) -> bool:
        """Whether `view`'s tables are built for the shown rank."""
        return self.data.is_ready(self._tables(view))

    # ---- navigation ----------------------------------------------------------------------------
    def show_view(self, view: str, focus_key: str | None = None) -> None:
        """Switch to `view`; filtered to the rows matching `focus_key` (a call site or name) there.

        A view whose tables are not built yet shows PendingScreen until they are (then this runs again).
        """
        if not self.ready or view not in self.views:
            return
        failure = self.data.failure(self._tables(view))
        if failure is not None or not self.is_ready(view):
            self.waiting = None if failure is not None else (view, focus_key)
            self.switch_mode("pending")
            screen = self.get_screen_stack("pending")[0]  # under the help, if it was opened there
            if isinstance(screen, PendingScreen):
                screen.wait_for(view, failure)
            return
        self.waiting = None
        self.switch_mode(view)
        if focus_key:
            screen = self.screen
            self.call_after_refresh(lambda: getattr(screen, "open_filtered", lambda k: None)(focus_key))

    def action_view(self, view: str) -> None:
        self.show_view(view)

    def action_cycle(self, step: int) -> None:
        if not self.ready:
            return
        cur = self.screen.view if isinstance(self.screen, PendingScreen) else self.current_mode
        tabs = self.views.tab_keys
        i = tabs.index(cur) if cur in tabs else 0
        self.show_view(tabs[(i + step) % len(tabs)])

    def jump(self, ts_ns: int, track: int | None = None, row: int | None = None) -> None:
        """Show the timeline centred on `ts_ns` with `track`'s lane selected (slice `row`'s lane, when given,
        even below the depths the timeline shows)."""
        self.pending_jump = (ts_ns, track, row)
        if self.current_mode == "timeline":
            screen = self.screen
            getattr(screen, "_apply_pending_jump", lambda: None)()
        else:
            self.show_view("timeline")

    def select_rank(self, index: int) -> None:
        """Make loaded trace `index` the one the views show.

        The shown view is rebuilt now; the others when shown (`ViewScreen.on_screen_resume`) or, once
        the new rank's tables are warm, in the background (`_premount`).
        """
        if index != self.data.current and 0 <= index < len(self.data.ranks):
            self.data.current = index
            self.data_version += 1
            self._warm()
            screen = self.screen
            if isinstance(screen, ViewScreen):
                # in the screen's own queue, like its resume and the background rebuild: one at a time
                screen.call_later(screen.catch_up)

    # ---- help and hand-off ---------------------------------------------------------------------
    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.views))

    def perfetto_hint(self) -> str:
        """How to open the shown trace in the Perfetto UI."""
        if not self.ready:
            return "Loading: the Perfetto hint comes once the trace is open."
        src = self.data.rank.source
        # the native trace opens faster and shows the probe tracks best: name it when it lies beside
        pf = companion_pftrace(src)
        file = str(pf) if pf is not None and pf.is_file() else src
        return (
            f"{file}: run `neuron-prof open {file}` (serves it to https://ui.perfetto.dev from this machine), "
            f"or copy {os.path.basename(file)} and drag it onto https://ui.perfetto.dev."
        )

    def action_perfetto(self) -> None:
        self.notify(self.perfetto_hint(), title="Open in the Perfetto UI", timeout=15, markup=False)
