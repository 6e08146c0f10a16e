"""The demo's closing words: what ran, the analysis summary (totals, findings, top ops), how to open the traces."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

from neuron_prof.formats import PFTRACE, named_format

if TYPE_CHECKING:
    from neuron_prof.demo._train import DemoResult


def print_summary(result: DemoResult, out: TextIO | None = None, color: bool | None = None) -> None:
    """Print the run's header, `neuron-prof summary`'s text for the trace, and the next commands."""
    from neuron_prof.analysis import fmt_ns, report
    from neuron_prof.exporters.summary import summary_text

    out = out or sys.stdout
    if color is None:
        color = out.isatty()
    w = out.write
    trace = result.trace
    rep = report(trace) if trace is not None else None
    # one "profiled time" everywhere: the trace's wall time, as the summary below says it; the run's own
    # length also holds starting the profiler and writing the trace
    took = f"{result.wall_s:.2f} s in all"
    if rep is not None:
        took = f"{fmt_ns(rep.totals['wall_ns'])} profiled ({took}, with starting the profiler and writing the trace)"
    w(f"neuron-prof demo: TinyGPT (2 layers, d_model 64, byte vocabulary), {result.steps} steps on "
      f"{result.device}, {took}")
    if result.losses:
        w(f"; loss {result.losses[0]:.3f} -> {result.losses[-1]:.3f}")
    w("\n\n")
    if rep is None:
        w("No trace was captured (see the warning above).\n")
        return
    source = str(result.paths[0]) if result.paths else ""
    w(summary_text(rep, source=source, color=color, top=10))
    if result.paths:
        first = result.paths[0]
        pf = next((p for p in result.paths if named_format(p) is PFTRACE), first)
        w("\nTraces: " + ", ".join(str(p) for p in result.paths) + "\n")
        w(f"Open them:  neuron-prof tui {first}      (terminal UI)\n")
        w(f"            https://ui.perfetto.dev  ->  Open trace file  ->  {pf}\n")
        w(f"            neuron-prof summary {first}\n")
