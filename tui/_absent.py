"""Why a view is empty, and which probe totals a trace can have at all. Pure functions, no Textual.

A Kineto trace from a GPU (or one captured by the cpu/cuda backend) has no compile step and no CPU
fallback: showing "compile 0 ns (0.0%, 0x)" there reads as a measurement, so those totals are left out
and the empty views say why.
"""

from __future__ import annotations

from neuron_prof.formats import CHROME_JSON
from neuron_prof.model import Trace

# backends (the `backend` metadata) whose device never compiles per op nor falls back to the CPU
EAGER_BACKENDS = ("cpu", "cuda")


def backend_of(trace: Trace) -> str:
    """The capturing backend ("neuron", "cuda", "cpu"), or "" for a trace neuron-prof did not capture."""
    return str(trace.metadata.get("backend") or "")


def has_concept(trace: Trace, kind: str) -> bool:
    """Whether `kind` ("compile", "fallback", "collective", "sync") can occur in this trace's backend."""
    if trace.find_track(kind) is not None:
        return True
    backend = backend_of(trace)
    if kind in ("compile", "fallback"):
        return bool(backend) and backend not in EAGER_BACKENDS
    return kind != "collective" or (trace.metadata.get("world_size") or 0) > 1


def no_fallback_reason(trace: Trace) -> str:
    """Why the fallback view has no row."""
    backend = backend_of(trace)
    if not backend:
        return ("this trace was not captured by neuron-prof: torch.profiler records no CPU fallbacks "
                "(capture with `neuron-prof run` to see them)")
    if backend in EAGER_BACKENDS:
        return f"the {backend} backend has no CPU fallback: every op runs where its tensors are"
    return f"none: every op ran on the {backend} device while profiling"


def no_collective_reason(trace: Trace, n_ranks: int) -> str:
    """Why the collectives view has no row."""
    ws = trace.metadata.get("world_size")
    if n_ranks > 1 or (isinstance(ws, int) and ws > 1):
        return "no all_reduce, all_gather or other collective ran while profiling"
    return ("this trace is one process with no torch.distributed collective "
            f"(open the traces of every rank together to see them: `neuron-prof tui rank*{CHROME_JSON.suffixes[0]}`)")
