"""The TUI's views, declared once: each view's screen says what the view is, this registry lists them.

A view's screen (`screens/<view>.py`, a `ViewScreen` subclass) declares the view in class attributes: VIEW
(its key), TITLE (its tab), HELP (its words in the help), TABLES (what it shows, built in the background:
`_data.RankTable` / `_data.CrossTable`, with the functions that build them beside the screen) and LOADING
(what is being computed while they are not there). `VIEWS` below gives each its hotkey and whether it is on
the view bar, in tab order. Everything else is read from here: the app's modes, keys, tab order and
background tables (`tui.app`), the view bar on every screen, the pending message and the help.

Adding a view: write its screen file, then add one line to `VIEWS` (and a snapshot test when it has one).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from neuron_prof.tui._data import CrossTable, ViewTable
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.screens.collectives import CollectivesScreen
from neuron_prof.tui.screens.compile import CompileScreen
from neuron_prof.tui.screens.device import DeviceScreen
from neuron_prof.tui.screens.fallback import FallbackScreen
from neuron_prof.tui.screens.lines import LinesScreen
from neuron_prof.tui.screens.memory import MemoryScreen
from neuron_prof.tui.screens.ops import OpsScreen
from neuron_prof.tui.screens.overview import OverviewScreen
from neuron_prof.tui.screens.ranks import RanksScreen
from neuron_prof.tui.screens.timeline import TimelineScreen


@dataclass(frozen=True)
class View:
    """One view: its screen (which declares the rest) under `hotkey`."""

    hotkey: str
    """The key that shows it ("2"; "d")."""
    screen: type[ViewScreen]
    tab: bool = True
    """On the view bar and in the tab order; off it, the view is reached by its key only."""

    @property
    def key(self) -> str:
        return self.screen.VIEW

    @property
    def title(self) -> str:
        return self.screen.TITLE

    @property
    def label(self) -> str:
        """Its tab: "2 Compile stalls"."""
        return f"{self.hotkey} {self.title}"

    @property
    def help(self) -> str:
        return self.screen.HELP

    @property
    def tables(self) -> tuple[ViewTable, ...]:
        return self.screen.TABLES

    @property
    def loading(self) -> str:
        return self.screen.LOADING


class Views:
    """The views in tab order, each key, hotkey and table name once (checked: a clash raises ValueError)."""

    def __init__(self, *views: View) -> None:
        self._views = views
        self._by_key = {v.key: v for v in views}
        problems = [f"{v.screen.__name__} lacks {attr}" for v in views
                    for attr in ("VIEW", "TITLE", "HELP") if not getattr(v.screen, attr)]
        problems += _repeats("view key", [v.key for v in views])
        problems += _repeats("hotkey", [v.hotkey for v in views])
        problems += _repeats("table name", [t.name for t in {id(t): t for v in views for t in v.tables}.values()])
        if problems:
            raise ValueError("; ".join(problems))

    def __iter__(self) -> Iterator[View]:
        return iter(self._views)

    def __len__(self) -> int:
        return len(self._views)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def get(self, key: str) -> View | None:
        return self._by_key.get(key)

    def adding(self, view: View) -> Views:
        """These views and `view` after them."""
        return Views(*self._views, view)

    @property
    def tab_keys(self) -> tuple[str, ...]:
        """The keys of the views on the view bar, in tab order."""
        return tuple(v.key for v in self._views if v.tab)

    @property
    def tabs(self) -> tuple[tuple[str, str], ...]:
        """(key, label) of the views on the view bar, in tab order: what the view bar shows."""
        return tuple((v.key, v.label) for v in self._views if v.tab)

    @property
    def tables(self) -> tuple[ViewTable, ...]:
        """Every view's tables once, in the order they are built after the first screen: those marked
        `first`, then the shown rank's in the order of their views, then the cross-rank ones."""
        every = list({id(t): t for v in self._views for t in v.tables}.values())
        return tuple(sorted(every, key=lambda t: (not t.first, isinstance(t, CrossTable))))


def _repeats(what: str, names: list[str]) -> list[str]:
    return [f"{what} {n!r} declared twice" for n in dict.fromkeys(n for n in names if names.count(n) > 1)]


VIEWS = Views(
    View("1", OverviewScreen),
    View("2", CompileScreen),
    View("3", FallbackScreen),
    View("4", OpsScreen),
    View("5", TimelineScreen),
    View("6", MemoryScreen),
    View("7", CollectivesScreen),
    View("8", RanksScreen),
    View("9", LinesScreen),
    View("d", DeviceScreen, tab=False),
)
"""The views of `neuron-prof tui`, in tab order."""
