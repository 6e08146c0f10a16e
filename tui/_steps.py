"""A step's exclusive parts as terminal bars: the analysis' per-step breakdown (`summary --json`
step_breakdown) shaped for the overview's mean-step bar and the per-step bars. Pure functions, no Textual."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from rich.text import Text

from neuron_prof.analysis.efficiency.critical_path import PART_WORDS, path_parts
from neuron_prof.analysis.fmt import fmt_ns, printable

STEP_PART_STYLE = {"compile": "red", "fallback": "#e6a04e", "sync": "yellow", "collective": "cyan",
                   "host": "blue", "device": "green", "idle": "grey50"}
"""Colours of a step's exclusive parts (`summary --json` step_breakdown[].parts), in the analysis' order."""
BLOCK = "█"


def part_cells(parts: Mapping[str, float], cells: int) -> dict[str, int]:
    """`cells` cells shared among the parts in proportion (largest remainder: exactly `cells` in all, every
    part over half a cell shows)."""
    total = sum(float(parts.get(k, 0)) for k in STEP_PART_STYLE)
    if total <= 0 or cells <= 0:
        return {k: 0 for k in STEP_PART_STYLE}
    exact = {k: float(parts.get(k, 0)) / total * cells for k in STEP_PART_STYLE}
    out = {k: int(v) for k, v in exact.items()}
    for k in sorted(exact, key=lambda k: out[k] - exact[k])[: cells - sum(out.values())]:
        out[k] += 1
    return out


def bar_runs(parts: Mapping[str, float], cells: int) -> list[tuple[str, str]]:
    """A stacked bar of `cells` cells: one run of blocks per part, in its colour."""
    return [(BLOCK * n, STEP_PART_STYLE[k]) for k, n in part_cells(parts, cells).items() if n]


def step_label(step: Mapping[str, Any]) -> str:
    """A step as the report's per-step plot names it: its number, "w" before a warm-up step's."""
    return f"{'w' if step.get('warmup') else ''}{step['step']}"


def steps_table(steps: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """One row per step: label, start and duration, its parts (for the bar) and its biggest parts as text."""

    def obj(vals: list[Any]) -> np.ndarray:
        a = np.empty(len(vals), dtype=object)
        a[:] = vals
        return a

    def top(parts: Mapping[str, int]) -> str:
        big = sorted((k for k in STEP_PART_STYLE if parts.get(k)), key=lambda k: -int(parts[k]))[:2]
        return ", ".join(f"{k} {fmt_ns(int(parts[k]))}" for k in big)

    return {
        "label": obj([step_label(s) for s in steps]),
        "step": np.array([int(s["step"]) for s in steps], dtype=np.int64),
        "ts_ns": np.array([int(s["start_ns"]) for s in steps], dtype=np.int64),
        "dur_ns": np.array([int(s["dur_ns"]) for s in steps], dtype=np.int64),
        "parts": obj([dict(s["parts"]) for s in steps]),
        "top": obj([top(s["parts"]) for s in steps]),
    }


def step_bar(parts: Mapping[str, float], width: int, longest_ns: int = 0) -> list[tuple[str, str]]:
    """A step's bar in `width` cells: to one scale where the longest step (`longest_ns`) fills the width, or,
    with `longest_ns` 0, its parts as shares of the whole width."""
    dur = sum(float(parts.get(k, 0)) for k in STEP_PART_STYLE)
    n = int(round(dur / longest_ns * width)) if longest_ns > 0 else width
    return bar_runs(parts, max(n, 1 if dur > 0 else 0))


def path_text(paths: Sequence[Mapping[str, Any]], step: int) -> Text:
    """Two lines on step `step`'s critical path: its length and host / device queue / collective shares, then
    its heaviest slices with their share and line; or which steps have one worked out."""
    t = Text(no_wrap=True, overflow="ellipsis")
    p = next((p for p in paths if p["step"] == step and p["length_ns"]), None)
    if p is None:
        done = [int(q["step"]) for q in paths if q["length_ns"]]
        t.append("critical path: " + (f"worked out for steps {done[0]}-{done[-1]} (the first after warm-up)"
                                      if done else "none (no host op or device work in the steps)"), style="dim")
        return t
    t.append("critical path ", style="bold")
    t.append(f"{fmt_ns(p['length_ns'])} of {fmt_ns(p['end_ns'] - p['start_ns'])}: ")
    t.append(path_parts(p))
    t.append("\n")
    for k, s in enumerate(p.get("top") or []):
        t.append("  " if k else " heaviest: ", style="dim")
        t.append(printable(str(s["name"])), style="bold")
        t.append(f" {PART_WORDS.get(s['kind'], s['kind'])} {100 * s['share']:.0f}%")
        if s.get("call_site"):
            t.append(f" at {printable(str(s['call_site']))}", style="dim")
    return t
