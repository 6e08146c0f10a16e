"""Step phases: which steps are warm-up, recompiling, evaluation or steady training (issue 32 item 4).

One model for every per-step figure, so that "steady step" means the same steps everywhere (`totals`' steps and
``steady_per_step``, the step breakdown, `summary`):

- **warm-up**: the leading steps (`Steps.warmup`: the first step, and each next while it is much slower);
- **recompiling**: a later step in which host time went to compiling (`compile_rows`: a compile that was not a
  cache hit, or torch.compile's own phase spans);
- **evaluation**: a step that evaluation passes (`steps.evaluation`: the model run without autograd between
  training steps) fill for more than half of its time, or that the caller names so (``evaluation``);
- **training**: every other step. These are the **steady** steps.

When every step after the warm-up compiled (shape churn), no step is steady: `StepPhases.all_compile` says so
and the figures "per steady step" are absent rather than taken over compiling steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from neuron_prof.analysis.compile.events import eval_passes
from neuron_prof.analysis.context import ABSENT, Context
from neuron_prof.analysis.intervals import covered_before, merge
from neuron_prof.analysis.steps.evaluation import eval_overlap_ns
from neuron_prof.model import Arg, TrackKind
from neuron_prof.model.order import sorted_unique
from neuron_prof.model.schema import is_compile_span

WARMUP, RECOMPILING, EVALUATION, TRAINING = "warm-up", "recompiling", "evaluation", "training"
PHASES = (WARMUP, RECOMPILING, EVALUATION, TRAINING)
_HIT = ("hit", "disk", "memory")
"""Cache states of a compile-track slice that loaded a compiled artifact rather than compiling."""


@dataclass(frozen=True, eq=False)
class StepPhases:
    """One phase per step of `Context.steps` (same order)."""

    phase: tuple[str, ...]
    compiled_ns: np.ndarray
    """Host time in compile work inside each step."""

    @property
    def steady(self) -> np.ndarray:
        """Indices of the steady (training) steps."""
        return np.asarray([i for i, p in enumerate(self.phase) if p == TRAINING], dtype=np.int64)

    def count(self, phase: str) -> int:
        return sum(1 for p in self.phase if p == phase)

    @property
    def all_compile(self) -> bool:
        """Steps after the warm-up exist and every one of them compiled (none is steady)."""
        later = [p for p in self.phase if p != WARMUP]
        return bool(later) and all(p == RECOMPILING for p in later)

    def summary(self, dur_ns: np.ndarray) -> dict[str, Any]:
        """JSON-ready: the steps of each phase, the steady steps' median and mean, the recompiling steps' mean."""
        steady = dur_ns[self.steady]
        rec = dur_ns[[i for i, p in enumerate(self.phase) if p == RECOMPILING]]
        return {
            "phases": {p: self.count(p) for p in PHASES},
            "steady_count": int(len(steady)),
            "steady_step_ns": int(np.median(steady)) if len(steady) else None,
            "steady_step_ns_mean": int(steady.mean()) if len(steady) else None,
            "recompiling_step_ns": int(rec.mean()) if len(rec) else None,
            "all_compile": self.all_compile,
        }


def cache_states(ctx: Context, rows: np.ndarray) -> list[str]:
    """Per compile-track row: its cache state as the trace writes it (``Arg.CACHE``), "miss" when not recorded;
    the key read as a column (`Context.pick_columns`)."""
    (col,) = ctx.pick_columns(ctx.trace.slices.args[rows], (Arg.CACHE,))
    return [str("miss" if v is ABSENT else v or "miss") for v in col]


def compile_rows(ctx: Context) -> np.ndarray:
    """Rows of host time spent compiling: compile-track slices that were not cache hits (Dynamo frames, a
    backward compiled on first use, NEFF compiles) and torch.compile's own phase spans on the host threads
    (`model.schema.is_compile_span`: Inductor's and Triton's work that no compile record spans)."""

    def build() -> np.ndarray:
        comp = ctx.rows(TrackKind.COMPILE)
        keep = [int(r) for r, c in zip(comp.tolist(), cache_states(ctx, comp), strict=True) if c.lower() not in _HIT]
        host = ctx.rows(TrackKind.THREAD)
        names = ctx.trace.slices.name[host]
        ids = [i for i, s in enumerate(ctx.trace.strings) if is_compile_span(s)]
        spans = host[np.isin(names, np.asarray(ids, dtype=names.dtype))] if ids else host[:0]
        return sorted_unique(np.concatenate([np.asarray(keep, dtype=np.int64), spans.astype(np.int64)]))

    return ctx.memo("compile_rows", build)  # type: ignore[no-any-return]


def step_phases(ctx: Context, evaluation: np.ndarray | None = None) -> StepPhases:
    """The phase of each step. `evaluation`: a bool per step, the steps that ran an evaluation pass."""
    if evaluation is not None:
        return _phases(ctx, evaluation)
    return ctx.memo("step_phases", lambda: _phases(ctx, None))  # type: ignore[no-any-return]


def _phases(ctx: Context, evaluation: np.ndarray | None) -> StepPhases:
    st = ctx.steps
    n = len(st)
    rows = compile_rows(ctx)
    sl = ctx.trace.slices
    if len(rows) and n:
        s, e = merge(sl.ts_ns[rows], sl.dur_ns[rows])
        hi, lo = st.end_ns.astype(np.int64), st.start_ns.astype(np.int64)
        compiled = covered_before(s, e, hi) - covered_before(s, e, lo)
    else:
        compiled = np.zeros(n, dtype=np.int64)
    if evaluation is None and n:
        dur = np.maximum(st.end_ns.astype(np.int64) - st.start_ns.astype(np.int64), 1)
        evaluation = 2 * eval_overlap_ns(eval_passes(ctx), st.start_ns.astype(np.int64),
                                         st.end_ns.astype(np.int64)) > dur
    phase = []
    for i in range(n):
        if i < st.warmup:
            phase.append(WARMUP)
        elif compiled[i] > 0:
            phase.append(RECOMPILING)
        elif evaluation is not None and i < len(evaluation) and evaluation[i]:
            phase.append(EVALUATION)
        else:
            phase.append(TRAINING)
    return StepPhases(tuple(phase), np.asarray(compiled, dtype=np.int64))
