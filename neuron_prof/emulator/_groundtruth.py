"""The emulator's own log of what really happened: executions, compiles, fallbacks, syncs, copies.

For tests only. The profiler never reads it (it learns everything through the torch_neuronx-shaped API
and torch.profiler), so comparing a capture with this log is a real check of the profiler.
Records are plain tuples appended under a lock; `records()` turns them into dicts on demand.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

KINDS = ("exec", "compile", "fallback", "sync", "copy", "graph", "graph_compile", "collective", "f64")

_FIELDS = (
    "kind",
    "name",
    "host_start_ns",
    "host_end_ns",
    "device",
    "device_start_ns",
    "device_end_ns",
    "detail",
)


class GroundTruth:
    """Append-only, thread-safe log of emulator events (Unix ns)."""

    def __init__(self, enabled: bool = True, max_events: int = 200_000) -> None:
        self.enabled = enabled
        # Bounded: the log is on by default and a long run must not grow without limit (newest kept).
        self._rows: deque[tuple[Any, ...]] = deque(maxlen=max_events)
        self._lock = threading.Lock()
        self.pull: Callable[[], None] | None = None
        """Launch mode: brings in the records of the ops the extension launched (`_timing.Activity.drain`)."""

    def add(
        self,
        kind: str,
        name: str,
        host_start_ns: int,
        host_end_ns: int,
        device: int = 0,
        device_start_ns: int = 0,
        device_end_ns: int = 0,
        detail: Any = None,
    ) -> None:
        """Record one event; `detail` is kind-specific (a compile's cache key, a sync's waited ns...)."""
        if self.enabled:
            row = (kind, name, host_start_ns, host_end_ns, device, device_start_ns, device_end_ns, detail)
            with self._lock:
                self._rows.append(row)

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Every record (or those of one kind) as dicts with the keys of _FIELDS."""
        if self.pull is not None:
            self.pull()
        with self._lock:
            rows = list(self._rows)
        return [dict(zip(_FIELDS, r, strict=True)) for r in rows if kind is None or r[0] == kind]

    def resize(self, max_events: int) -> None:
        with self._lock:
            self._rows = deque(self._rows, maxlen=max_events)

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()
