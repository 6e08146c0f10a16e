"""`profile(steps=...)` and `run --steps`: which steps the capture records in full.

torch.profiler's own answer is a schedule (``wait``/``warmup``/``active``): its tracer is off outside the active
steps, so nothing is kept for them and the capture cannot grow without bound (stacks on under torch.compile
included). `steps` says the same thing in step numbers, the way a user counts them (the numbers of
``ProfilerStep#N`` and of the trace's ``steps``):

* ``steps=N``: the first N steps, 0 to N-1. The warm-up and first compiles are in them, so the findings see them;
* ``steps=(A, B)`` (or ``range(A, B)``, or ``"A:B"`` from the command line): steps A to B-1; ``(A, None)``: from
  step A to the end. Steps before A are not recorded (the step before A warms the tracer up, as torch's
  ``warmup`` does); `summary` says so, and that compiles in them are still reported (Dynamo's own records,
  `backends.probes.compile`, do not need the tracer).

A step is what ``prof.step()`` ends (under `run`, an ``optimizer.step()`` call). The trace's ``steps`` metadata
keeps the recorded steps only; ``capture_reduced["steps_recorded"]`` says which were kept and how many were not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

StepsArg = int | tuple[int, int | None] | range | str | None
"""What `profile(steps=...)` accepts (`window`)."""
KEY = "steps_recorded"
"""Key under ``Meta.CAPTURE_REDUCED``: which steps the capture recorded (`reduced_info`)."""


def window(steps: StepsArg) -> tuple[int, int | None] | None:
    """(first, end) step numbers, end excluded (None: to the end), from what `steps` accepts; None for None and
    for every step (0, None).

    Raises ValueError for anything else, or a window that records no step."""
    if steps is None:
        return None
    if isinstance(steps, bool):
        raise ValueError(f"steps {steps!r}: give N (the first N steps), (A, B) or range(A, B)")
    b: int | None
    if isinstance(steps, int):
        a, b = 0, steps
    elif isinstance(steps, range) and steps.step == 1:
        a, b = steps.start, steps.stop
    elif isinstance(steps, str):
        a, b = _parse(steps)
    elif isinstance(steps, tuple) and len(steps) == 2 and isinstance(steps[0], int) and \
            (steps[1] is None or isinstance(steps[1], int)):
        a, b = steps
    else:
        raise ValueError(f"steps {steps!r}: give N (the first N steps), (A, B) or range(A, B)")
    if a < 0 or (b is not None and b <= a):
        raise ValueError(f"steps {steps!r}: no step to record (steps {a} to {b if b is not None else 'end'})")
    return None if (a, b) == (0, None) else (a, b)  # every step: no window


def _parse(text: str) -> tuple[int, int | None]:
    """"N" (the first N steps) or "A:B" ("A:" to the end)."""
    try:
        if ":" in text:
            a, b = text.split(":", 1)
            return int(a or 0), int(b) if b.strip() else None
        return 0, int(text)
    except ValueError:
        raise ValueError(f"steps {text!r}: give N (the first N steps) or A:B (steps A to B-1)") from None


def schedule(win: tuple[int, int | None]) -> Callable[[int], Any]:
    """A torch.profiler schedule recording steps first..end-1: the step before them warms up, the last of them
    saves (its cycle is converted then, and the tracer stays off after it)."""
    from torch.profiler import ProfilerAction

    first, end = win

    def steps_schedule(step: int) -> Any:
        if step < first:
            return ProfilerAction.WARMUP if step == first - 1 else ProfilerAction.NONE
        if end is None or step < end - 1:
            return ProfilerAction.RECORD
        return ProfilerAction.RECORD_AND_SAVE if step == end - 1 else ProfilerAction.NONE

    return steps_schedule


def keep_recorded(steps: list[list[int]], win: tuple[int, int | None]) -> tuple[list[list[int]], dict[str, Any]]:
    """The `steps` metadata rows ([step, start_ns, end_ns]) inside the window, and what the trace says about the
    others (``capture_reduced["steps_recorded"]``)."""
    first, end = win
    kept = [s for s in steps if s[0] >= first and (end is None or s[0] < end)]
    before = sum(1 for s in steps if s[0] < first)
    after = len(steps) - len(kept) - before
    info: dict[str, Any] = {"first": first, "end": end, "recorded": len(kept),
                            "recorded_range": [int(kept[0][0]), int(kept[-1][0])] if kept else [],
                            "steps_total": len(steps), "not_recorded_before": before, "not_recorded_after": after}
    return kept, info
