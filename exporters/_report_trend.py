"""The HTML report's step-time trend: the steady step of each recorded run of the same script (run history)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from neuron_prof.exporters import _report_figures as figs
from neuron_prof.exporters._report_html import note, plot_div


def trend_section(runs: Sequence[dict[str, Any]], figures: dict[str, Any]) -> str:
    """The section's HTML (its figure goes into `figures`); empty when no run has a steady step."""
    fig = figs.step_trend(runs)
    if fig is None:
        return ""
    figures["fig-trend"] = fig
    return note(
        f"The median steady step of the last {len(runs)} recorded run{'s' if len(runs) != 1 else ''} of this "
        "script (`neuron-prof history`), oldest first, and how many findings each had (dotted, right axis); "
        "hover a run for its git branch and commit."
    ) + plot_div("fig-trend")
