"""The Probe contract: one signal source (compile, collectives, memory...) inside a backend adapter.

A probe is driven by its adapter in the same order as the Backend protocol:

    probe.start(ctx)                        # install hooks, remember counters
    probe.stop(ctx)                         # read the backend, remove hooks
    probe.contribute(builder, ctx, view)    # write events; `view` is the Kineto events already in builder

Each call is guarded by the adapter: an exception becomes an entry in ``ctx.errors`` and the other
probes carry on, so a broken probe never breaks the user's program.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes.view import HostView
    from neuron_prof.model import TraceBuilder


class Probe:
    """Base class: every phase does nothing unless overridden."""

    name: ClassVar[str] = "probe"

    def __init__(self) -> None:
        self.overhead_ns = 0
        """Time this probe spent in the user's program (hooks, wrappers), in ns."""
        self.hook_errors = 0
        """Failures inside hooks that run in the user's calls (swallowed there, reported by the adapter)."""

    def start(self, ctx: CaptureContext) -> None:
        """Install hooks and remember counters."""

    def stop(self, ctx: CaptureContext) -> None:
        """Read what the backend reports and remove hooks."""

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        """Add this probe's events to the trace."""


def now_ns() -> int:
    """Unix ns, the trace clock."""
    return time.time_ns()
