"""The one seam between capture and a device backend.

A Backend adapter is created per capture session. The session calls, in order:

    kw = backend.profiler_options()          # extra torch.profiler kwargs (activities, experimental_config)
    backend.start(ctx)                       # before torch.profiler starts: install hooks, reset counters
    ... user code runs; ctx.step() marks steps ...
    backend.stop(ctx)                        # after torch.profiler stops: read stats, remove hooks
    backend.contribute(builder, ctx)         # add tracks/events to the trace, joined with Kineto's events

Every call is wrapped by the session: an exception is recorded in the trace metadata (`probe_errors`)
and reported after the block, never raised into the user's program. Adapters use only signals their
real backend gives (see shared/design/torch-neuronx-facts.md for Neuron).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from neuron_prof.model import TraceBuilder


@dataclass
class CaptureContext:
    """What a session shares with its backend and probes."""

    options: dict[str, Any] = field(default_factory=dict)
    """The user's profile(...) options."""
    start_ns: int = 0
    """Unix ns when the profiled region began (time.time_ns())."""
    end_ns: int = 0
    steps: list[tuple[int, int, int]] = field(default_factory=list)
    """(step number, start ns, end ns) as marked by Session.step()."""
    host_pid: int = 0
    main_tid: int = 0
    rank: int | None = None
    world_size: int | None = None
    errors: list[dict[str, str]] = field(default_factory=list)
    device_ops: list[Any] = field(default_factory=list)
    """`neuron_prof.capture.DeviceOp` facts the profiler recorded (host reads of device data, float64/int64
    reaching a device), one per call the user's code made; filled at the end of each profiler cycle."""
    """Probe failures: {"probe": name, "phase": start/stop/contribute, "error": text}."""


@runtime_checkable
class Backend(Protocol):
    """A device adapter: cpu, cuda, neuron (real torch_neuronx or the emulator's look-alike module)."""

    name: str
    """"cpu", "cuda", "neuron"."""

    def profiler_options(self) -> dict[str, Any]:
        """Extra keyword arguments for torch.profiler.profile (activities, experimental_config...)."""
        ...

    def start(self, ctx: CaptureContext) -> None:
        """Install hooks and reset counters before the profiler starts."""
        ...

    def stop(self, ctx: CaptureContext) -> None:
        """Read what the backend reports and remove hooks, after the profiler stops."""
        ...

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext) -> None:
        """Add this backend's tracks and events to the trace (Kineto's events are already in `builder`)."""
        ...
