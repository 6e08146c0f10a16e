"""The baseline gate of `check --baseline`: what a new trace does that its baseline did not, one line each.

New compiles, CPU fallbacks and sync points come from `compare` (the matching `diff` shows); a fallback or sync
whose line only moved (same op, same file, the baseline's line gone) is not new. The memory peak of each series
may grow by `memory_growth` at most. The steady step time may regress by the noise-aware bound of
`step_regression`: the median difference against the larger of `STEP_REL` of the baseline's median and
`STEP_MADS` times the two runs' pooled median absolute deviation.

    lines, notes = baseline_violations(base, new, warmup_steps=None)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuron_prof.analysis.compare import appeared, compile_keys, fallback_keys, sync_keys
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.fmt import fmt_bytes, fmt_ns
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.pipeline import Report, report
from neuron_prof.model import Trace

STEP_REL = 0.05
"""The step-time bound is never below this share of the baseline's median steady step."""
STEP_MADS = 3.0
"""... nor below this many pooled median absolute deviations of the two runs' steady steps."""
MIN_STEPS = 3
"""Fewer steady steps than this in either run: too few to judge the step time (a note, not a failure)."""
MEMORY_GROWTH = 0.10
"""Default bound on each memory series' peak: at most this share above the baseline's."""
MEMORY_GROWTH_FLOOR = 1 << 20
"""... and a peak that grew by less than this many bytes never fails: the same script's peak moves by a few KiB
between runs (an allocation sampled early or late), which no bound in shares should call a regression."""


@dataclass(frozen=True)
class StepRegression:
    """The steady-step comparison: medians, their difference and the bound it was held to."""

    base_ns: float
    new_ns: float
    delta_ns: float
    bound_ns: float
    mad_ns: float
    """The pooled median absolute deviation: the median of |step - its run's median| over both runs."""

    @property
    def regressed(self) -> bool:
        return self.delta_ns > self.bound_ns


def step_regression(base: Sequence[float] | np.ndarray, new: Sequence[float] | np.ndarray, *, rel: float = STEP_REL,
                    mads: float = STEP_MADS) -> StepRegression | None:
    """Compare two runs' steady step times (ns); None when either has fewer than MIN_STEPS steps."""
    b, n = np.asarray(base, dtype=np.float64), np.asarray(new, dtype=np.float64)
    if len(b) < MIN_STEPS or len(n) < MIN_STEPS:
        return None
    mb, mn = float(np.median(b)), float(np.median(n))
    mad = float(np.median(np.concatenate([np.abs(b - mb), np.abs(n - mn)])))
    return StepRegression(mb, mn, mn - mb, max(rel * mb, mads * mad), mad)


def steady_steps_ns(ctx: Context) -> np.ndarray:
    """The durations (ns) of the steady steps (after warm-up)."""
    st = ctx.steps
    return np.asarray(st.dur_ns[st.steady], dtype=np.int64)


def _file(site: str | None) -> str:
    return (site or "").rsplit(":", 1)[0]


def new_items(base: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """What appeared in `new`, less what only moved: an appeared item paired with a disappeared one of the same
    op in the same file (lines above it were added or removed)."""
    ch = appeared(base, new)
    gone: dict[tuple[str, str], int] = {}
    for it in ch["disappeared"]:
        k = (str(it.get("op", "")), _file(it.get("call_site")))
        gone[k] = gone.get(k, 0) + 1
    out = []
    for it in ch["appeared"]:
        k = (str(it.get("op", "")), _file(it.get("call_site")))
        if gone.get(k):
            gone[k] -= 1
            continue
        out.append(it)
    return out


def _memory_peaks(rep: Report) -> dict[str, tuple[int, str]]:
    return {str(f.evidence.get("series", "")): (int(f.evidence.get("peak_bytes") or 0), f.call_site)
            for f in rep.findings if f.kind == Kind.MEMORY_PEAK}


def baseline_violations(
    base: Trace, new: Trace, *, warmup_steps: int | None = None, memory_growth: float = MEMORY_GROWTH,
    new_context: Context | None = None, new_report: Report | None = None,
) -> tuple[list[str], list[str]]:
    """(violations, notes) of `new` against `base`: one line each, naming the line of code where known."""
    cb = Context(base, warmup_steps)
    cn = new_context or Context(new, warmup_steps)
    rb, rn = report(base, context=cb), new_report or report(new, context=cn)
    out: list[str] = []
    for it in new_items(fallback_keys(rb), fallback_keys(rn)):
        out.append(f"new CPU fallback {it['op']} at {it['call_site'] or '?'} ({it['count']}x, "
                   f"{fmt_ns(it['cost_ns'])}); the baseline had none there")
    for it in new_items(sync_keys(rb), sync_keys(rn)):
        out.append(f"new sync point {it['op']} at {it['call_site'] or '?'} ({it['count']}x, "
                   f"{fmt_ns(it['cost_ns'])}); the baseline had none there")
    for it in appeared(compile_keys(base, cb), compile_keys(new, cn))["appeared"]:
        out.append(f"new compile {it['key']} at {it['call_site'] or '?'} ({it['count']}x, {fmt_ns(it['ns'])}); "
                   "the baseline did not compile it")
    peaks_b = _memory_peaks(rb)
    for series, (peak, site) in _memory_peaks(rn).items():
        was = peaks_b.get(series)
        if was and was[0] > 0 and peak > was[0] * (1 + memory_growth) and peak - was[0] >= MEMORY_GROWTH_FLOOR:
            out.append(f"memory peak of {series} grew {fmt_bytes(was[0])} -> {fmt_bytes(peak)} "
                       f"({peak / was[0] - 1:+.0%}, above --max-memory-growth {memory_growth:g})"
                       + (f" at {site}" if site else ""))
    notes: list[str] = []
    reg = step_regression(steady_steps_ns(cb), steady_steps_ns(cn))
    if reg is None:
        notes.append(f"step time not compared: fewer than {MIN_STEPS} steady steps in a trace")
    elif reg.regressed:
        out.append(f"steady step regressed {fmt_ns(int(reg.base_ns))} -> {fmt_ns(int(reg.new_ns))} "
                   f"(+{fmt_ns(int(reg.delta_ns))}, above the bound {fmt_ns(int(reg.bound_ns))}: the larger of "
                   f"{STEP_REL:.0%} and {STEP_MADS:g} x the median absolute deviation {fmt_ns(int(reg.mad_ns))})")
    else:
        notes.append(f"steady step {fmt_ns(int(reg.base_ns))} -> {fmt_ns(int(reg.new_ns))}, within the bound "
                     f"{fmt_ns(int(reg.bound_ns))}")
    return out, notes
