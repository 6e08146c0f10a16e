"""A signal arriving inside a block the save must not interrupt (torch.profiler's step()) waits for its end.

The flake this guards: SIGTERM landing inside torch.profiler's step() made the save's stop() fail ("Expected
record to be set") and the trace came out empty. These run in-process on SIGUSR1, the guard's own mechanism
with a signal pytest does not use.
"""

from __future__ import annotations

import signal
import threading

import pytest

from neuron_prof.capture._signals import SignalGuard


@pytest.fixture()
def usr1_log():
    log: list[str] = []
    previous = signal.signal(signal.SIGUSR1, lambda s, f: log.append("user handler"))
    yield log
    signal.signal(signal.SIGUSR1, previous)


def test_signal_inside_deferred_block_is_handled_when_it_ends(usr1_log: list[str]) -> None:
    guard = SignalGuard(lambda name: usr1_log.append(f"save on {name}"), signals=(signal.SIGUSR1,))
    guard.install()
    try:
        with guard.deferred():
            signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
            for _ in range(1000):  # Python runs its pending handlers between bytecodes: here, if not deferred
                pass
            inside = list(usr1_log)
        after = list(usr1_log)
    finally:
        guard.restore()
    assert inside == []
    # then exactly what an undeferred signal does: the save, the previous handler (re-delivered)
    assert after == ["save on SIGUSR1", "user handler"]


def test_signal_outside_deferred_block_is_handled_at_once(usr1_log: list[str]) -> None:
    guard = SignalGuard(lambda name: usr1_log.append(f"save on {name}"), signals=(signal.SIGUSR1,))
    guard.install()
    try:
        with guard.deferred():
            pass
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
        for _ in range(1000):
            pass
        seen = list(usr1_log)
    finally:
        guard.restore()
    assert seen == ["save on SIGUSR1", "user handler"]


def test_deferred_while_saving_leaves_the_signal_to_the_save(usr1_log: list[str]) -> None:
    guard = SignalGuard(lambda name: usr1_log.append(f"save on {name}"), signals=(signal.SIGUSR1,))
    guard.install()
    guard.hold()  # the save runs: a signal waits for release_held(), the deferred block does not take it
    with guard.deferred():
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
        for _ in range(1000):
            pass
    assert usr1_log == []
    assert guard.release_held() == signal.SIGUSR1
