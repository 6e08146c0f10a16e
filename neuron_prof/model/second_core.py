"""The second core for work that runs without the GIL (numpy's searches, the C byte search): one helper thread,
shared by the model's searches, that takes one part while the caller does the other.

    head, tail = both(lambda: search(a[:h]), lambda: search(a[h:]))
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
U = TypeVar("U")

_PREFIX = "neuron-prof-helper"
_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _helper() -> ThreadPoolExecutor | None:
    """The helper thread's pool, made on first use; None inside the helper itself (what it handed to itself would
    wait behind the work waiting for it)."""
    global _pool
    if threading.current_thread().name.startswith(_PREFIX):
        return None
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=_PREFIX)
        return _pool


def _forget() -> None:
    """In a forked child: the parent's helper thread is not there, a new one is made when needed."""
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def both(first: Callable[[], T], second: Callable[[], U]) -> tuple[T, U]:
    """(`first()`, `second()`), the first run by the helper thread while the caller runs the second (one after
    the other when called from the helper). An exception in either is raised here, after both ended."""
    pool = _helper()
    if pool is None:
        return first(), second()
    fut = pool.submit(first)
    try:
        b = second()
    finally:
        a = fut.result()  # the helper's part ends before its inputs may go
    return a, b
