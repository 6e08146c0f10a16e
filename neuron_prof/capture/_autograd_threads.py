"""Start autograd's device threads, and wait until each has its Python thread state, before torch.profiler starts.

A backward on a device runs on the autograd engine's thread for that device, which the engine starts at the first
backward; torch.profiler's Python tracer registers the threads alive when it starts, so a custom
``torch.autograd.Function.backward`` the user wrote would run without Python frames and its ops would name no line
of it. One backward on the CPU starts every device's thread (``Engine::start_device_threads``), but the engine
waits only for each thread to count itself: ``PythonEngine::thread_init`` (torch/csrc/autograd/python_engine.cpp)
counts the thread *before* it takes the GIL to make its Python thread state, and ``Engine::thread_init``
(engine.cpp) names it ``pt_autograd_<device>`` after that. So the backward can return before the thread has a
thread state (torch.profiler's own first ``import torch._inductor`` usually hid the gap; with Inductor imported
already, under load, custom backwards lost their lines). Each new thread is awaited until its name says it has
one (Linux: ``/proc/self/task/*/comm``), at most `WAIT_S`, the GIL given up meanwhile.
"""

from __future__ import annotations

import os
import time

TASKS = "/proc/self/task"
PREFIX = "pt_autograd_"
WAIT_S = 2.0
"""At most this long for the device threads to take the GIL once (on a loaded host: a few scheduler slices)."""


def thread_names() -> dict[int, str] | None:
    """Native thread id -> name of this process's threads; None where /proc has no task list."""
    try:
        tids = os.listdir(TASKS)
    except OSError:
        return None
    out: dict[int, str] = {}
    for t in tids:
        try:
            with open(f"{TASKS}/{t}/comm") as f:
                out[int(t)] = f.read().strip()
        except (OSError, ValueError):  # ended meanwhile
            continue
    return out


def wait_named(tids: set[int], prefix: str = PREFIX, timeout_s: float = WAIT_S) -> set[int]:
    """Wait until each thread in `tids` is named `prefix`... or has ended, at most `timeout_s`, sleeping (the GIL
    given up) between looks; returns the threads still unnamed."""
    left = set(tids)
    deadline = time.monotonic() + timeout_s
    while left:
        names = thread_names()
        if names is None:
            return left
        left = {t for t in left if t in names and not names[t].startswith(prefix)}
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.0005)
    return left


def trace_autograd_threads() -> None:
    """One backward on the CPU (it starts every device's autograd thread), then each new thread awaited until it
    has its Python thread state. Only for a device backend: on the CPU backward runs on the caller's thread, and a
    program that forks children running backward (fork-based multiprocessing on the CPU) must not find the threads
    started."""
    import torch

    before = thread_names()
    with torch.enable_grad():
        torch.ones(1, requires_grad=True).sum().backward()
    after = thread_names()
    if before is not None and after is not None:
        wait_named(set(after) - set(before))
