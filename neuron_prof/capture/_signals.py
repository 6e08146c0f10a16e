"""SIGTERM inside a profiled block: write what was captured, then let the signal do what it did before.

Schedulers (Slurm, Kubernetes, torchrun) stop jobs with SIGTERM. Python's default is to die at once,
which would lose the trace of the very run that was killed. The guard runs the session's finish,
puts the previous handler back and raises the signal again, so the process ends (or the user's own
handler runs) exactly as it would have without the profiler.

A Python handler runs only when the main thread next runs Python. A rank blocked in C++ (a collective
whose peer died, a long kernel) would never run it, and SIGTERM, which stops it unprofiled, would be
ignored. A watchdog thread hears the signal through the signal wakeup fd (written by the interpreter's
C-level handler, whatever the main thread is doing); when the handler has not started within a grace
period (`NEURON_PROF_SIGTERM_GRACE`, 5 s), it prints where every thread is and applies the signal's
default action: the process ends by SIGTERM, as it would have without the profiler (its trace is lost;
a schedule's checkpoints remain). The watchdog needs the GIL, not the main thread: it cannot help a main
thread that holds the GIL forever.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

GRACE_ENV = "NEURON_PROF_SIGTERM_GRACE"
GRACE_S = 5.0
"""Seconds the Python handler has to start before the watchdog applies the signal's default action."""


def grace_s() -> float:
    """The grace period: NEURON_PROF_SIGTERM_GRACE seconds when set to a number, else GRACE_S."""
    try:
        return max(0.0, float(os.environ.get(GRACE_ENV, GRACE_S)))
    except ValueError:
        return GRACE_S


class SignalGuard:
    """Installs a SIGTERM handler for the life of one session (main thread only; elsewhere a no-op)."""

    def __init__(self, on_signal: Callable[[str], None], signals: tuple[int, ...] = (signal.SIGTERM,)) -> None:
        self._on_signal = on_signal
        self._signals = signals
        self._previous: dict[int, Any] = {}
        self._busy = False
        self._held = False
        self.deferring = False
        """Inside a block a save must not interrupt: a signal waits in `pending` for `deliver_pending()`. Set and
        cleared by `deferred()`, or by a caller's own code on a hot path (Session.step: no Python call)."""
        self.pending: int | None = None
        self._pid = os.getpid()
        self._watchdog: _Watchdog | None = None

    def install(self) -> None:
        """Take over the signals; silently skipped outside the main thread (signal.signal would raise)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for s in self._signals:
            try:
                self._previous[s] = signal.signal(s, self._handle)
            except (ValueError, OSError):  # e.g. an embedded interpreter without signal support
                continue
        if self._previous:
            self._watchdog = _Watchdog.start(self)

    def restore(self) -> None:
        """Put the previous handlers back (only those still ours: the user may have replaced them)."""
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None
        for s, prev in list(self._previous.items()):
            try:
                if signal.getsignal(s) == self._handle:
                    signal.signal(s, prev if prev is not None else signal.SIG_DFL)
            except (ValueError, OSError):
                pass
        self._previous.clear()

    def hold(self) -> None:
        """The trace is being saved: until `release_held()`, a signal waits for the save (torchrun stops the
        other ranks with SIGTERM as soon as one fails, often while they write their traces)."""
        self._held = True

    def release_held(self) -> int | None:
        """Put the previous handlers back; the signal that arrived while holding, for the caller to raise."""
        pending, self.pending, self._held = self.pending, None, False
        self.restore()
        return pending

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Run a block that a save must not interrupt (torch.profiler's step(): a stop inside it fails with
        "Expected record to be set" and the trace comes out empty); a signal arriving in it is handled when
        the block ends, as if it had arrived then."""
        if self._held or self.deferring:
            yield
            return
        self.deferring = True
        try:
            yield
        finally:
            self.deferring = False
            if self.pending is not None:
                self.deliver_pending()

    def deliver_pending(self) -> None:
        """Handle the signal that arrived while `deferring`, as if it arrived now (unless a save holds it, or a
        deferred block still runs)."""
        if self._held or self.deferring:
            return
        pending, self.pending = self.pending, None
        if pending is not None and self.owns(pending):
            self._handle(pending, None)

    def owns(self, signum: int) -> bool:
        """Whether this guard's handler is still the one Python runs for `signum`."""
        return signum in self._previous and signal.getsignal(signum) == self._handle

    def previous(self, signum: int) -> Any:
        return self._previous.get(signum)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._watchdog is not None:
            self._watchdog.started.set()  # the handler runs: the watchdog stands down
        if self._held or self.deferring:
            self.pending = signum
            return
        if self._busy:  # a second SIGTERM while writing: let the first finish
            return
        self._busy = True
        try:
            if os.getpid() == self._pid:  # not in a forked child (a DataLoader worker): not its trace
                self._on_signal(signal.Signals(signum).name)
        except BaseException:  # noqa: BLE001  (the signal must still be delivered)
            pass
        finally:
            self.restore()
            # Re-deliver: SIG_DFL terminates with the signal's status, a user handler runs now, SIG_IGN ignores.
            signal.raise_signal(signum)


_CURRENT: _Watchdog | None = None
"""The watchdog whose pipe is the process's signal wakeup fd (a forked child lets go of it)."""


class _Watchdog:
    """A daemon thread that applies a signal's default action when the guard's handler could not run."""

    def __init__(self, guard: SignalGuard, rfd: int, wfd: int) -> None:
        self.guard = guard
        self.started = threading.Event()
        self._rfd, self._wfd = rfd, wfd
        self._grace = grace_s()
        self._thread = threading.Thread(target=self._run, name="neuron-prof-sigterm", daemon=True)

    @classmethod
    def start(cls, guard: SignalGuard) -> _Watchdog | None:
        """Start one, unless the wakeup fd is someone else's (asyncio's): then there is no watchdog."""
        global _CURRENT
        try:
            rfd, wfd = os.pipe()
            os.set_blocking(wfd, False)
            old = signal.set_wakeup_fd(wfd, warn_on_full_buffer=False)
        except (ValueError, OSError):
            return None
        if old != -1:
            signal.set_wakeup_fd(old)
            os.close(rfd)
            os.close(wfd)
            return None
        dog = cls(guard, rfd, wfd)
        _CURRENT = dog
        dog._thread.start()
        return dog

    def stop(self) -> None:
        """Give the wakeup fd back and end the thread (closing the pipe wakes it)."""
        global _CURRENT
        if _CURRENT is self:
            _CURRENT = None
        with contextlib.suppress(ValueError, OSError):
            current = signal.set_wakeup_fd(-1)
            if current != self._wfd:  # someone else took it after us: theirs stays
                signal.set_wakeup_fd(current)
        with contextlib.suppress(OSError):
            os.close(self._wfd)

    def forget_in_child(self) -> None:
        """After fork: the child's signals are not the parent's (its thread is gone; the pipe is shared)."""
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(-1)
        for fd in (self._rfd, self._wfd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _run(self) -> None:
        try:
            while True:
                data = os.read(self._rfd, 64)
                if not data:
                    return  # stop(): the write end is closed
                for signum in set(data):
                    if self.guard.owns(signum) and not self.started.wait(self._grace):
                        self._default_action(signum)
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                os.close(self._rfd)

    def _default_action(self, signum: int) -> None:
        """The handler could not run: do what the signal did before the profiler (SIG_IGN: nothing)."""
        if not self.guard.owns(signum) or self.started.is_set() or \
                self.guard.previous(signum) is signal.SIG_IGN:
            return
        name = signal.Signals(signum).name
        with contextlib.suppress(Exception):
            print(f"neuron-prof: {name}: the main thread did not return to Python within {self._grace:g} s "
                  f"(blocked in C++?); ending the process as {name} does, without writing the trace. "
                  f"Where each thread was:", file=sys.stderr, flush=True)
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        _die_by(signum)


def _die_by(signum: int) -> None:
    """End the process with the signal's default action, from any thread (signal.signal is main-only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.signal.restype = ctypes.c_void_p
        libc.signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
        libc.signal(signum, 0)  # SIG_DFL
        signal.pthread_kill(threading.get_ident(), signum)  # to this thread: delivered before it returns
    finally:
        os._exit(128 + signum)  # only if the signal did not end the process (it is blocked)


def _after_fork_in_child() -> None:
    global _CURRENT
    if _CURRENT is not None:
        _CURRENT.forget_in_child()
        _CURRENT = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


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
