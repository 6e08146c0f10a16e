"""Capture: `profile()` runs torch.profiler and the backend's probes around a block, then writes the trace.

    import neuron_prof

    with neuron_prof.profile("trace.json") as prof:     # writes trace.json and trace.pftrace
        for batch in data:
            train_step(batch)
            prof.step()

    @neuron_prof.profile("train.json")                  # decorator form; neuron_prof.capture.current_session()
    def train(): ...                                    # gives the session for step()

In a torch.distributed job of more than one rank, each rank writes `trace.rank{R}.json` and `.pftrace`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, overload

from neuron_prof.capture._report import CaptureWarning
from neuron_prof.capture._session import Session, current_session
from neuron_prof.formats import DEFAULT_OUTPUT

__all__ = ["CaptureWarning", "Session", "current_session", "profile"]

_F = Callable[..., Any]


@overload
def profile(output: _F, **kwargs: Any) -> _F: ...
@overload
def profile(output: str | os.PathLike[str] | None = DEFAULT_OUTPUT, **kwargs: Any) -> Session: ...
def profile(output: Any = DEFAULT_OUTPUT, **kwargs: Any) -> Any:
    """Profile a block (`with`), a function (decorator) or a region (`start()`/`stop()`).

    Args:
        output: the trace file (.json, .json.gz or .pftrace); a .pftrace is also written beside a JSON
            output unless pftrace=False. None keeps the Trace in memory only (`session.trace`).
        **kwargs: see `Session`: backend, schedule / wait, warmup, active, repeat, record_shapes,
            with_stack, with_modules, profile_memory, operator_lines, pftrace, quiet, hint, profiler_kwargs,
            full_python_trace, max_events, steps, and probe
            options.

    Returns:
        A Session: use it as a context manager (it yields itself) or as a decorator. Used bare as
        `@neuron_prof.profile`, it decorates the function with the default output.
    """
    if callable(output) and not isinstance(output, (str, os.PathLike)):
        return Session(**kwargs)(output)
    return Session(output, **kwargs)
