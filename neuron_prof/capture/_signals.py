"""SIGTERM inside a profiled block: write what was captured, then let the signal do what it did before.

Schedulers (Slurm, Kubernetes, torchrun) stop jobs with SIGTERM. Python's default is to die at once,
which would lose the trace of the very run that was killed. The guard runs the session's finish,
puts the previous handler back and raises the signal again, so the process ends (or the user's own
handler runs) exactly as it would have without the profiler.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any


class SignalGuard:
    """Installs a SIGTERM handler for the life of one session (main thread only; elsewhere a no-op)."""

    def __init__(self, on_signal: Callable[[str], None], signals: tuple[int, ...] = (signal.SIGTERM,)) -> None:
        self._on_signal = on_signal
        self._signals = signals
        self._previous: dict[int, Any] = {}
        self._busy = False

    def install(self) -> None:
        """Take over the signals; silently skipped outside the main thread (signal.signal would raise)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for s in self._signals:
            try:
                self._previous[s] = signal.signal(s, self._handle)
            except (ValueError, OSError):  # e.g. an embedded interpreter without signal support
                continue

    def restore(self) -> None:
        """Put the previous handlers back (only those still ours: the user may have replaced them)."""
        for s, prev in list(self._previous.items()):
            try:
                if signal.getsignal(s) == self._handle:
                    signal.signal(s, prev if prev is not None else signal.SIG_DFL)
            except (ValueError, OSError):
                pass
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._busy:  # a second SIGTERM while writing: let the first finish
            return
        self._busy = True
        try:
            self._on_signal(signal.Signals(signum).name)
        except BaseException:  # noqa: BLE001  (the signal must still be delivered)
            pass
        finally:
            self.restore()
            # Re-deliver: SIG_DFL terminates with the signal's status, a user handler runs now, SIG_IGN ignores.
            signal.raise_signal(signum)


@contextlib.contextmanager
def defer_sigint() -> Iterator[None]:
    """Hold a Ctrl-C until the block ends (then raise KeyboardInterrupt); a second one raises at once.

    Saving a large trace takes seconds; the first Ctrl-C of an impatient user would otherwise lose it.
    Main thread only, and only while Python's own SIGINT handler is installed.
    """
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    pending: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if pending:
            raise KeyboardInterrupt
        pending.append(signum)
        try:
            print("neuron-prof: saving the trace; press Ctrl-C again to abandon it", file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001
            pass

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pending:
        raise KeyboardInterrupt
