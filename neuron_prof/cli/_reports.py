"""The report `summary`, `check` and `report` use for one trace file: kept beside its column cache once computed.

A second `summary`, `check` or `report` of the same unchanged file reads the kept report (`neuron_prof.loaders.kept`)
instead of running the analyses again: the same document, byte for byte. Computing it also keeps the overview
(its totals and findings before the critical path marks them, and the per-step breakdown), the TUI's first
screen, so a TUI opened after `summary` starts from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neuron_prof.analysis import Report, report
from neuron_prof.loaders import kept
from neuron_prof.model import Trace


def trace_report(trace: Trace, path: Path, warmup_steps: int | None) -> Report:
    """`analysis.report(trace, warmup_steps=...)` of trace file `path`: the kept one when there is one."""
    name = kept.report_name(warmup_steps)
    doc = kept.read_json(path, name)
    if doc is not None:
        return Report.from_dict(doc)
    first: dict[str, Any] = {}

    def keep_overview(rep: Report) -> None:
        # a copy: report adds its efficiency totals to this dict afterwards
        first.update(rep.to_dict(), totals=dict(rep.totals))

    rep = report(trace, warmup_steps=warmup_steps, on_overview=keep_overview)
    if not rep.whole:  # an analysis raised (out of memory, say): computed again next time, not kept
        return rep
    if kept.write_json(path, name, rep.to_dict()) and warmup_steps is None:  # the TUI's warm-up: the default
        kept.write_json(path, kept.OVERVIEW, {**first, "step_breakdown": rep.steps})
    return rep
