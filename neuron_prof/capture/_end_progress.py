"""What the end of a session is doing, said on stderr once it has taken over a second (issue 32 item 3).

After the last step, a session stops torch.profiler, reads its events, finds the exact call sites, adds the
probes' tracks, builds the trace, runs the analyses and writes each file. On a big capture that is seconds;
silence for that long reads as a hang. `EndProgress` is told each phase as it starts (`phase`); a timer
thread shows a rich progress bar on stderr naming the phase once `delay` seconds have passed, and the bar is
removed when the end is done (`close`). Nothing is shown when the end is quick, when the session is quiet, or
when stderr is not a terminal (a log file gets only the closing "N events -> ..." line).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

PHASES = ("stopping torch.profiler", "finding exact call sites", "exporting Kineto's events",
          "reading Kineto's events", "stopping the probes", "adding the probes' tracks", "building the trace",
          "finding problems", "writing")
"""Every phase an end may name, in order (the bar's total; "writing" is said once per file)."""
ENV = "NEURON_PROF_PROGRESS"
"""``0`` never shows the bar, ``1`` shows it even when stderr is not a terminal."""
DELAY_ENV = "NEURON_PROF_PROGRESS_DELAY"
"""Seconds an end runs before the bar shows (default 1)."""


def delay() -> float:
    """`DELAY_ENV`, else 1 s."""
    try:
        return max(float(os.environ.get(DELAY_ENV, "1")), 0.0)
    except ValueError:
        return 1.0


def wanted(quiet: bool) -> bool:
    """Whether a session's end may show the bar: not quiet, and stderr a terminal (or NEURON_PROF_PROGRESS=1)."""
    env = os.environ.get(ENV, "").strip()
    if quiet or env == "0":
        return False
    if env == "1":
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def prepare() -> None:
    """Import rich now (about 80 ms), at a session's start, where a bar may be wanted at its end: imported at the end,
    the bar's first draw waits for the import while the end's first phases run. Never raises."""
    try:
        import rich.console
        import rich.progress  # noqa: F401
    except Exception:  # noqa: BLE001
        pass


class EndProgress:
    """The bar of one session's end; a no-op when not `enabled`. Never raises into the session."""

    def __init__(self, enabled: bool, delay_s: float | None = None) -> None:
        self._enabled = enabled
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._progress: Any = None
        self._task: Any = None
        self._name = ""
        self._n = 0
        self._timer: threading.Thread | None = None
        if enabled:
            self._timer = threading.Thread(target=self._show_after, args=(delay() if delay_s is None else delay_s,),
                                           name="neuron-prof-end",
                                           daemon=True)
            self._timer.start()

    def phase(self, name: str) -> None:
        """A new phase starts now."""
        if not self._enabled:
            return
        with self._lock:
            self._name = name
            self._n += 1
            if self._progress is not None:
                self._update()

    def _show_after(self, delay_s: float) -> None:
        try:  # already imported by `prepare` at the session's start; if not, while the delay runs
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        except Exception:  # noqa: BLE001  (no rich: no bar, the save goes on)
            return
        if self._done.wait(delay_s):
            return
        try:
            with self._lock:
                if self._done.is_set():
                    return
                self._progress = Progress(TextColumn("neuron-prof: saving the trace:"),
                                          TextColumn("[bold]{task.description}"), BarColumn(),
                                          TimeElapsedColumn(), console=Console(stderr=True), transient=True)
                self._task = self._progress.add_task(self._name, total=len(PHASES) + 1)
                self._progress.start()
                self._update()
        except Exception:  # noqa: BLE001  (a bar that cannot show is no reason to disturb the save)
            self._progress = None

    def _update(self) -> None:
        # drawn at each phase, not only at the bar's refresh rate: a phase of a few ms is still named
        self._progress.update(self._task, description=self._name, completed=min(self._n, len(PHASES)),
                              refresh=True)

    def close(self) -> None:
        """The end is done: remove the bar (if shown) and stop the timer."""
        if not self._enabled:
            return
        self._done.set()
        with self._lock:
            if self._progress is not None:
                try:
                    self._progress.stop()
                except Exception:  # noqa: BLE001
                    pass
                self._progress = None
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.join(timeout=1.0)
