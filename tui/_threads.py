"""Run blocking work in a daemon thread and await it from the event loop.

Textual's thread workers run on non-daemon threads: pressing `q` while a 300 MB trace was still
parsing left the process alive until the parse ended (20 s measured). A daemon thread dies with
the process, so quitting is immediate; nothing it does needs finishing (the loader's cache write
is atomic).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def in_daemon_thread(fn: Callable[..., T], *args: Any, name: str = "neuron-prof-worker") -> asyncio.Future[T]:
    """Start `fn(*args)` in a daemon thread; the returned future (of the running loop) gets its result."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def settle(setter: Callable[[Any], None], value: Any) -> None:
        if not fut.done():
            setter(value)

    def run() -> None:
        try:
            result = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
            outcome: tuple[Callable[[Any], None], Any] = (fut.set_exception, e)
        else:
            outcome = (fut.set_result, result)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:
            pass  # the app has already exited and closed its loop

    threading.Thread(target=run, name=name, daemon=True).start()
    return fut
