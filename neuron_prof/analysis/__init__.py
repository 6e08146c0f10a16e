"""Analysis: pure functions from a Trace to Findings. Never imports torch, Textual or plotly.

    from neuron_prof.analysis import analyze
    findings = analyze(trace)          # list[Finding], most costly first
"""

from neuron_prof.analysis._finding import KINDS, SEVERITIES, Finding

__all__ = ["KINDS", "SEVERITIES", "Finding"]
