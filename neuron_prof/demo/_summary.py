"""The demo's closing summary: wall time, steps, busiest ops by self time, and how to open the traces."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from neuron_prof.model import KinetoCat, TrackKind

if TYPE_CHECKING:
    from rich.console import Console

    from neuron_prof.demo._train import DemoResult
    from neuron_prof.model import Trace


def op_self_times(trace: Trace) -> list[tuple[str, int, int, int]]:
    """(op name, calls, total ns, self ns) of host `cpu_op` slices, most self time first.

    Self time is a slice's duration minus its direct cpu_op children's, nesting found per thread track.
    """
    sl = trace.slices
    cat_id = trace.strings.get(KinetoCat.CPU_OP)
    if cat_id is None or not len(sl):
        return []
    rows = np.flatnonzero((sl.cat == cat_id) & np.isin(sl.track, trace.track_ids(TrackKind.THREAD)))
    order = rows[np.lexsort((-sl.dur_ns[rows], sl.ts_ns[rows], sl.track[rows]))]
    ts, dur, track = sl.ts_ns[order].tolist(), sl.dur_ns[order].tolist(), sl.track[order].tolist()
    child = np.zeros(len(order), dtype=np.int64)
    stack: list[int] = []  # indices into `order` of the open slices on the current track
    cur = None
    for i in range(len(order)):
        if track[i] != cur:
            stack.clear()
            cur = track[i]
        while stack and ts[stack[-1]] + dur[stack[-1]] <= ts[i]:
            stack.pop()
        if stack:
            child[stack[-1]] += dur[i]
        stack.append(i)
    self_ns = np.maximum(sl.dur_ns[order] - child, 0)
    names = sl.name[order]
    uniq, inv = np.unique(names, return_inverse=True)
    calls = np.bincount(inv, minlength=len(uniq))
    total = np.bincount(inv, weights=sl.dur_ns[order], minlength=len(uniq))
    selfs = np.bincount(inv, weights=self_ns, minlength=len(uniq))
    top = np.argsort(-selfs)
    return [(trace.strings[int(uniq[k])], int(calls[k]), int(total[k]), int(selfs[k])) for k in top]


def print_summary(result: DemoResult, console: Console, top: int = 10) -> None:
    """Print the run's numbers and the next commands to the console."""
    from rich.table import Table

    trace = result.trace
    console.print(f"[bold]neuron-prof demo[/]: TinyGPT, {result.steps} steps on [bold]{result.device}[/], "
                  f"{result.wall_s:.2f} s wall (profiled)")
    if result.losses:
        console.print(f"loss {result.losses[0]:.3f} -> {result.losses[-1]:.3f}")
    if trace is None:
        console.print("[red]no trace was captured[/] (see the warning above)")
        return
    steps = trace.metadata.get("steps") or []
    if steps:
        ms = sorted((e - s) / 1e6 for _, s, e in steps)
        console.print(f"{len(trace.slices):,} slices, {trace.n_events:,} events; step time median "
                      f"{ms[len(ms) // 2]:.1f} ms, max {ms[-1]:.1f} ms")
    table = Table(title=f"Top {top} ops by self time (host)", title_justify="left")
    for col, justify in (("op", "left"), ("calls", "right"), ("self ms", "right"), ("total ms", "right"),
                         ("self %", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    rows = op_self_times(trace)
    all_self = sum(r[3] for r in rows) or 1
    from rich.text import Text

    for name, calls, tot, slf in rows[:top]:
        table.add_row(Text(name), f"{calls:,}", f"{slf / 1e6:.2f}", f"{tot / 1e6:.2f}", f"{100 * slf / all_self:.1f}")
    console.print(table)
    if result.paths:
        console.print("Traces: " + ", ".join(str(p) for p in result.paths))
        first = result.paths[0]
        console.print(f"Open: [bold]neuron-prof tui {first}[/]  ·  drop "
                      f"{next((p for p in result.paths if p.suffix == '.pftrace'), first)} on https://ui.perfetto.dev"
                      f"  ·  [bold]neuron-prof summary {first}[/]", highlight=False)
