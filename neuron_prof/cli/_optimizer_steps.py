"""`neuron-prof run`: each ``optimizer.step()`` of the script ends a step, once that step has returned.

torch calls optimizer step hooks inside the step's own ``record_function("Optimizer.step#SGD.step")``. A step
marked there ends a profiler cycle (a device-profile window's edge) while that span is still open: Kineto's
cycle is stopped and its event storage handed out, then the span's end writes into it. That corrupted the
heap and crashed the job with a segfault when the session stopped (measured: 4 of 23 runs of
``run --emulate-neuron --device-profile-steps 1:3`` before, in ``disableProfiler`` ->
``TorchOpStorage::materialize``). So the step is marked after ``step()`` returns, outside torch's span: every
optimizer class's ``step`` gets one more wrapper around torch's profiling wrapper (``Optimizer.profile_hook_step``,
which torch applies once per class when the first optimizer of that class is made), for classes made during
the session and for those torch had already wrapped before it. An optimizer stepping another one inside its
own step (wrappers, Lookahead) ends one step, when the outer one returns.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

from neuron_prof.patches import Saved, patch, restore_patches

_MARKS: list[Callable[[], None]] = []
"""The running session's step marker (empty outside a session: the wrappers left on classes do nothing)."""
_DEPTH = threading.local()
_WRAPPED = "_neuron_prof_marks_steps"


def _after_return(step: Any) -> Any:
    """`step` (torch's profiling wrapper of a class's step), marking a step after it returns."""
    if getattr(step, _WRAPPED, False):
        return step

    @functools.wraps(step)
    def step_then_mark(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_DEPTH, "n", 0)
        _DEPTH.n = depth + 1
        try:
            out = step(*args, **kwargs)
        finally:
            _DEPTH.n = depth
        if depth == 0:
            for mark in list(_MARKS):  # noqa: PERF101 - a copy: a session may end on another thread meanwhile
                mark()
        return out

    setattr(step_then_mark, _WRAPPED, True)
    return step_then_mark


def _subclasses(cls: type) -> list[type]:
    out: list[type] = []
    todo: list[type] = [cls]
    sub: type
    while todo:
        for sub in todo.pop().__subclasses__():
            out.append(sub)
            todo.append(sub)
    return out


@contextlib.contextmanager
def optimizer_steps(mark: Callable[[], None]) -> Iterator[None]:
    """While inside, `mark()` runs after each outermost ``optimizer.step()`` returns."""
    from torch.optim import Optimizer

    torch_wrap = getattr(Optimizer, "profile_hook_step", None)
    if not callable(torch_wrap):  # a torch without it: its hooks, inside the span, are all there is
        from torch.optim.optimizer import register_optimizer_step_post_hook

        handle = register_optimizer_step_post_hook(lambda *_: mark())
        try:
            yield
        finally:
            handle.remove()
        return
    saved: Saved = []

    def profile_hook_step(func: Any) -> Any:
        return _after_return(torch_wrap(func))

    patch(Optimizer, "profile_hook_step", staticmethod(profile_hook_step), saved)
    for cls in _subclasses(Optimizer):  # classes torch wrapped before the session (an optimizer made earlier)
        step = vars(cls).get("step")
        if step is not None and getattr(step, "hooked", False) and not getattr(step, _WRAPPED, False):
            patch(cls, "step", _after_return(step), saved)
    _MARKS.append(mark)
    try:
        yield
    finally:
        _MARKS.remove(mark)
        restore_patches(saved)
