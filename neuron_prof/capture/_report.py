"""Telling the user what went wrong in the profiler: once, after the block, pointing at their code."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings

from neuron_prof.capture._outputs import WriteReport


class CaptureWarning(UserWarning):
    """Something in the profiler failed; the user's program was not affected. Issued once per session."""


def dedup_errors(errors: list[dict[str, str]]) -> list[dict[str, str]]:
    """Errors in order, each (probe, phase, error) once (a probe failing every step is one problem)."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for e in errors:
        key = tuple(str(e.get(k, "")) for k in ("probe", "phase", "error"))
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def user_stacklevel() -> int:
    """Stack level (for warnings.warn called by our caller) of the first frame outside neuron-prof's
    capture and contextlib: the user's `with` or decorated call."""
    here = os.path.dirname(__file__)
    f = sys._getframe(1)
    level = 1
    while f is not None and (f.f_code.co_filename.startswith(here) or f.f_code.co_filename == contextlib.__file__):
        f = f.f_back  # type: ignore[assignment]
        level += 1
    return level


def report_problems(errors: list[dict[str, str]], report: WriteReport | None) -> None:
    """One CaptureWarning listing every probe failure and every file that could not be written."""
    problems = [f"{e['probe']} ({e['phase']}): {e['error']}" for e in dedup_errors(errors)]
    if report is not None:
        problems += [f"could not write {p}: {why}" for p, why in report.failed]
        if report.fallback is not None:
            problems.append(f"the trace was saved to {report.fallback} instead")
    if problems:
        msg = "neuron-prof: the profiler had problems (your program was not affected):\n  " + "\n  ".join(problems)
        with contextlib.suppress(Exception):
            warnings.warn(msg, CaptureWarning, stacklevel=user_stacklevel())
