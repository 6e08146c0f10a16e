"""Waiting for autograd's device threads to have their Python thread state (`capture/_autograd_threads.py`).

The engine names a device thread `pt_autograd_<device>` only after the thread made its Python thread state
(torch's python_engine.cpp / engine.cpp), but the first backward returns as soon as the thread counted itself:
the capture waits for the name. Real threads here, which name themselves late (prctl, as c10::setThreadName).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading
import time

import pytest

from neuron_prof.capture._autograd_threads import thread_names, wait_named

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/task and prctl: Linux")

PR_SET_NAME = 15


def _late_thread(delay_s: float, name: bytes | None, done: threading.Event) -> threading.Thread:
    """A thread that names itself `name` after `delay_s` (None: never), then waits for `done`."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)

    def body() -> None:
        time.sleep(delay_s)
        if name is not None:
            libc.prctl(PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)
        done.wait(10)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t


def test_returns_once_the_late_thread_is_named() -> None:
    done = threading.Event()
    t = _late_thread(0.2, b"pt_autograd_7", done)
    try:
        t0 = time.monotonic()
        left = wait_named({t.native_id})
        waited = time.monotonic() - t0
        assert left == set()
        assert thread_names()[t.native_id] == "pt_autograd_7"  # named when the wait returned, not before
        assert 0.15 < waited < 1.5
    finally:
        done.set()
        t.join()


def test_a_thread_never_named_is_waited_for_at_most_the_timeout_and_returned() -> None:
    done = threading.Event()
    t = _late_thread(0.0, None, done)
    try:
        t0 = time.monotonic()
        assert wait_named({t.native_id}, timeout_s=0.1) == {t.native_id}
        assert time.monotonic() - t0 < 1.0
    finally:
        done.set()
        t.join()


def test_a_thread_that_ended_is_not_waited_for() -> None:
    done = threading.Event()
    done.set()
    t = _late_thread(0.0, None, done)
    t.join()
    t0 = time.monotonic()
    assert wait_named({t.native_id}, timeout_s=5.0) == set()
    assert time.monotonic() - t0 < 1.0
