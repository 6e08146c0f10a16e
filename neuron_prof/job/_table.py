"""The job summary as table cells and lines: one rendering for the text, Markdown and TUI views."""

from __future__ import annotations

from typing import Any

from neuron_prof.analysis.fmt import fmt_bytes, fmt_ns, fmt_share

COLUMNS = (
    ("rank", "right"),
    ("step med", "right"),
    ("p90", "right"),
    ("compile/step", "right"),
    ("fallback/step", "right"),
    ("sync/step", "right"),
    ("coll/step", "right"),
    ("dev busy", "right"),
    ("peak mem", "right"),
    ("findings C/W/I", "right"),
)


def _ns(v: Any) -> str:
    return "0" if v == 0 else fmt_ns(v)


def rank_cells(r: dict[str, Any]) -> tuple[str, ...]:
    """One rank's row as table cells (COLUMNS)."""
    sev = r.get("findings_by_severity") or {}
    share = r.get("device_busy_share")
    peak = r.get("peak_memory_bytes")
    return (
        str(r["rank"]),
        _ns(r.get("step_median_ns")),
        _ns(r.get("step_p90_ns")),
        _ns(r.get("compile_ns_per_step")),
        _ns(r.get("fallback_ns_per_step")),
        _ns(r.get("sync_ns_per_step")),
        _ns(r.get("collective_ns_per_step")),
        fmt_share(share),
        "-" if not peak else fmt_bytes(peak),
        f"{sev.get('critical', 0)}/{sev.get('warning', 0)}/{sev.get('info', 0)}",
    )


def failed_lines(doc: dict[str, Any]) -> list[str]:
    """One line per source that could not be analysed (the loader's message names the file already)."""
    return [
        f"failed: {r['error'] if str(r['error']).startswith(r['source']) else r['source'] + ': ' + r['error']}"
        for r in doc["ranks"]
        if r.get("status") == "failed"
    ]


def head_line(doc: dict[str, Any], source: str = "") -> str:
    run = doc.get("run") or {}
    ok = sum(r.get("status") == "ok" for r in doc["ranks"])
    return (
        f"neuron-prof job summary{': ' + source if source else ''} — {ok} rank(s)"
        + (f", {run['failed']} failed" if run.get("failed") else "")
        + (f", on {run['on']}" if run.get("on") else "")
    )
