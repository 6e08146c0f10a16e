"""The HTML report: one self-contained, offline, printable page of findings and plots for a trace.

    from neuron_prof.exporters.html_report import write_html_report
    write_html_report(trace, "report.html", findings=analyze(trace))

Sections (each always present; an empty one says why): overview, findings, the lines view (where the time
goes by line of the user's code), efficiency (a roofline of ops and lines, MFU per line), the per-step breakdown (stacked bars),
the critical path of the first steps (its host, device queue and collective segments), compile-time waterfall,
CPU-fallback hot spots, device utilisation, memory over time, collective bandwidth, device profile (Neuron
Explorer's metrics and where device time went). plotly.js is
embedded once, inline; nothing is fetched when the page opens.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from neuron_prof.analysis import Kind
from neuron_prof.analysis.fmt import cut, fit_site, fmt_share, short_site, strip_site
from neuron_prof.errors import ExportError
from neuron_prof.exporters import _report_data as data
from neuron_prof.exporters import _report_figures as figs
from neuron_prof.exporters._report_critical_path import critical_path_section
from neuron_prof.exporters._report_device import device_profile_section
from neuron_prof.exporters._report_efficiency import efficiency_section
from neuron_prof.exporters._report_html import Raw, empty, esc, note, page, plot_div, table
from neuron_prof.exporters._report_trend import trend_section
from neuron_prof.model import Meta, Trace, TrackKind
from neuron_prof.version import __version__

_SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


def _as_dicts(findings: Sequence[Any] | None, trace: Trace) -> list[dict[str, Any]]:
    """Findings as dicts (Finding objects or dicts accepted), most costly first."""
    src = trace.findings if findings is None else findings
    out = [f.to_dict() if hasattr(f, "to_dict") else dict(f) for f in src]
    out.sort(key=lambda f: (-(f.get("cost_ns") or 0), _SEVERITY_ORDER.get(str(f.get("severity")), 3)))
    return out


def _span_ms(trace: Trace) -> float:
    a, b = data.window_ns(trace)
    return (b - a) / 1e6


def _cut(text: object, limit: int = 140) -> Raw:
    """Long names (C++ kernel templates) cut to `limit` characters; the whole name is the tooltip."""
    full = str(text)
    if len(full) <= limit:
        return Raw(esc(full))
    return Raw(f'<span title="{esc(full)}">{esc(cut(full, limit))}</span>')


def _ms(ns: Any) -> str:
    return f"{(ns or 0) / 1e6:,.3f}"


SITE_CHARS = 34
"""A call site or module path in a table: shortened in the middle to this many characters, on one line."""


def site_cell(*paths: object) -> Raw:
    """Call site and module, one per line, never broken mid-word: each shortened in the middle (the one
    site formatter, `analysis.fit_site`) and kept on one line, the full path on hover."""
    spans = [
        f'<span class="site" title="{esc(p)}">{esc(fit_site(short_site(str(p)), SITE_CHARS))}</span>'
        for p in paths
        if p
    ]
    return Raw("<br>".join(spans))


def _findings_section(findings: list[dict[str, Any]], figures: dict[str, Any]) -> str:
    if not findings:
        return empty("No findings: the analysis found nothing in this trace that costs time.")
    fig = figs.findings_cost(findings)
    parts = []
    if fig is not None:
        figures["fig-findings"] = fig
        parts.append(plot_div("fig-findings"))
    rows = []
    for i, f in enumerate(findings, 1):
        sev = str(f.get("severity", ""))
        badge = Raw(f'<span class="sev sev-{sev if sev in _SEVERITY_ORDER else "other"}">{esc(sev)}</span>')
        where = site_cell(f.get("call_site"), f.get("module"))
        ev = f.get("evidence") or {}
        advice = esc(f.get("advice", ""))
        if ev:
            import orjson

            pretty = orjson.dumps(
                ev, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str
            ).decode()
            advice += f"<details><summary>evidence</summary><pre>{esc(pretty[:20000])}</pre></details>"
        rows.append(
            (
                i,
                badge,
                f.get("kind", ""),
                strip_site(str(f.get("title", "")), f.get("call_site")),  # the site is in `where`
                _ms(f.get("cost_ns")),
                fmt_share(float(f.get("share") or 0)),
                f.get("count", ""),
                where,
                Raw(advice),
            )
        )
    parts.append(
        table(
            ["#", "severity", "kind", "finding", "cost (ms)", "share", "count", "where", "advice"],
            rows,
            num=(0, 4, 5, 6),
            cls="findings",
        )
    )
    return "".join(parts)


def _compile_section(trace: Trace, figures: dict[str, Any]) -> str:
    w = data.compile_waterfall(trace)
    if not w.total:
        return empty(
            "No compile events in this trace (no compile track: captured without the compile probe, "
            "or a trace from another tool)."
        )
    figures["fig-compile"] = figs.compile_waterfall(w)
    cap = f" Showing the {len(w.name):,} longest." if len(w.name) < w.total else ""
    n_ops = len(set(w.name))
    fold = " (the others folded into the last row)" if n_ops > len(w.rows) or len(w.rows) > 20 else ""
    return note(
        f"{w.total:,} compiles of {n_ops:,} ops or graphs, {w.total_ms:,.3f} ms in total. One row per op, "
        f"most compile time first{fold}; each bar runs from a compile's start to its end, time 0 is the "
        f"start of the profiled region. Hover a bar for its signature and call site.{cap}"
    ) + plot_div("fig-compile")


def _fallback_section(trace: Trace, findings: list[dict[str, Any]], figures: dict[str, Any]) -> str:
    hot = [f for f in findings if f.get("kind") == Kind.CPU_FALLBACK]
    n_slices = len(trace.slices_on(TrackKind.FALLBACK))
    if not hot:
        if n_slices:
            return empty(
                f"{n_slices:,} CPU fallback calls are recorded, but no cpu_fallback findings were made "
                "for them (the trace was not analysed?)."
            )
        return empty("No CPU fallbacks in this trace.")
    figures["fig-fallback"] = figs.hot_spots(hot)
    rows = [
        (
            i,
            site_cell(f.get("call_site")) if f.get("call_site") else "(unknown)",
            site_cell(f.get("module")),
            f.get("title", ""),
            f.get("count", ""),
            _ms(f.get("cost_ns")),
            f.get("advice", ""),
        )
        for i, f in enumerate(hot, 1)
    ]
    return (
        note(
            f"{len(hot)} hot spot(s) over {n_slices:,} fallback calls: the call sites whose fallbacks "
            "cost the most."
        )
        + plot_div("fig-fallback")
        + table(["#", "call site", "module", "finding", "calls", "time (ms)", "advice"], rows, num=(0, 4, 5))
    )


_LINE_COLS = (("host", "host_ns"), ("in bwd", "host_backward_ns"), ("device", "device_ns"),
              ("compile", "compile_ns"), ("fallback", "fallback_ns"), ("sync", "sync_ns"),
              ("coll.", "collective_ns"))


def _lines_section(lines: list[dict[str, Any]]) -> str:
    """The lines view: where the time goes, per line of the user's code (`summary --json` `lines`); time
    columns empty on every line are left out."""
    if not lines:
        return empty("No line of your code ran a recorded op (no host ops, or a trace without call stacks).")
    cols = [(h, k) for h, k in _LINE_COLS if k == "host_ns" or any(ln.get(k) for ln in lines)]
    mem = any(ln.get("alloc_bytes") for ln in lines)
    rows = []
    for i, ln in enumerate(lines, 1):
        where = ln.get("call_site") or ln.get("function") or "(no user line: library or runtime work)"
        sigs = ln.get("signatures") or []
        row: list[Any] = [
            i,
            Raw(f'<span title="{esc(chr(10).join(sigs))}">{esc(where)}</span>') if sigs else where,
            Raw(f"<code>{esc(ln.get('source') or '')}</code>"),
        ]
        row += [_ms(ln.get(k)) if ln.get(k) else "-" for _, k in cols]
        if mem:
            row.append(f"{(ln.get('alloc_bytes') or 0) / 2**20:,.2f}")
        row.append(", ".join(ln.get("backward_of") or []))
        rows.append(row)
    head = ["#", "line", "source", *(h for h, _ in cols), *(["MiB"] if mem else []), "backward of"]
    return note(
        "Every cost charged to the line of your code it came from: library frames at the line of yours that "
        "called them, backward ops at the forward line whose op created them (\"in bwd\": that part of the "
        "host time; \"backward of\": the autograd nodes). Times in ms; compile, fallback and sync time run "
        "inside the host time; MiB: memory allocated. Hover a line for its compiled signatures."
    ) + table(head, rows, num=tuple(range(3, 3 + len(cols) + mem)) + (0,), cls="lines")


def _steps_section(steps: list[dict[str, Any]], figures: dict[str, Any]) -> str:
    """Per-step breakdown as stacked bars (`summary --json` `step_breakdown`)."""
    from neuron_prof.analysis import STEP_PARTS

    fig = figs.step_breakdown(steps, STEP_PARTS)
    if fig is None:
        return empty("No steps in this trace (no ProfilerStep, prof.step() or repeated optimizer step).")
    figures["fig-steps"] = fig
    return note(
        "Each step split into exclusive parts that add up to its duration: each moment goes to the first of "
        "compile, CPU fallback, sync wait, collectives, host ops, device (busy while the host ran no op), "
        "idle. Warm-up steps are marked w."
    ) + plot_div("fig-steps")


def _utilisation_section(trace: Trace, figures: dict[str, Any]) -> str:
    u = data.device_utilisation(trace)
    if not u.busy:
        return empty("No device activity in this trace (no device tracks: a CPU-only run).")
    figures["fig-util"] = figs.utilisation(u)
    rows = [
        (name, str(u.queues.get(name, "")), fmt_share(m))
        for name, m in sorted(u.mean_busy.items(), key=lambda kv: -kv[1])
    ]
    return (
        note(
            f"Share of each {u.bin_ms:,.3f} ms bin in which a device ran anything on any of its queues "
            "(streams)."
        )
        + plot_div("fig-util")
        + table(["device", "queues", "busy over the profiled time"], rows[:64], num=(1, 2))
    )


def _memory_section(trace: Trace, figures: dict[str, Any]) -> str:
    series, total = data.memory_series(trace)
    if not series:
        return empty(
            "No memory counters in this trace (record with profile_memory=True or the memory probe)."
        )
    figures["fig-memory"] = figs.memory(series, _span_ms(trace))
    cap = f" Showing the {len(series)} with the highest peaks of {total}." if len(series) < total else ""
    rows = [(s.name, f"{s.peak / 2**20:,.2f}", f"{s.n_samples:,}") for s in series]
    return (
        note(f"Memory counters over time.{cap}")
        + plot_div("fig-memory")
        + table(["counter", "peak (MiB)", "samples"], rows, num=(1, 2))
    )


def _collective_section(trace: Trace, figures: dict[str, Any]) -> str:
    c = data.collectives(trace)
    if not c.op:
        return empty("No collectives in this trace.")
    figures["fig-coll"] = figs.collective_bandwidth(c, _span_ms(trace))
    rows = [
        (
            d["op"],
            f"{d['count']:,}",
            f"{d['total_ms']:,.3f}",
            f"{d['bytes'] / 2**20:,.2f}" if d["bytes"] else "",
            "" if d["median_gbps"] != d["median_gbps"] else f"{d['median_gbps']:,.3f}",
        )
        for d in c.per_op
    ]
    cap = f" (every {len(c.op) // figs.MAX_POINTS + 1}th drawn)" if len(c.op) > figs.MAX_POINTS else ""
    return (
        note(
            f"{len(c.op):,} collectives{cap}, found as {c.source} events. Bandwidth is "
            "message bytes / duration (algorithm bandwidth)."
        )
        + plot_div("fig-coll")
        + table(["op", "count", "time (ms)", "MiB moved", "median GB/s"], rows, num=(1, 2, 3, 4))
    )


def _kv(rows: Sequence[tuple[str, str]]) -> str:
    return table(["", ""], rows, cls="kv").replace("<thead><tr><th></th><th></th></tr></thead>", "")


def _glance(totals: dict[str, Any]) -> str:
    """Totals from neuron_prof.analysis (the numbers `neuron-prof summary` prints)."""

    def ms_count(key: str, count: str) -> str:
        return f"{_ms(totals.get(key))} ms in {totals.get(count, 0):,}"

    share = totals.get("device_busy_share")
    rows = [
        ("device busy", "no device activity" if share is None else f"{fmt_share(share)} of the wall time"),
        (
            "compile",
            ms_count("compile_ns", "compile_count")
            + f" compiles ({totals.get('compile_miss_count', 0):,} cache misses)",
        ),
        ("CPU fallbacks", ms_count("fallback_ns", "fallback_count") + " calls"),
        ("host waits on the device", ms_count("sync_ns", "sync_count") + " sync points"),
        ("collectives", ms_count("collective_ns", "collective_count") + " calls"),
    ]
    parts = ["<h3>At a glance</h3>", _kv(rows)]
    for key, label in (("top_ops", "Top host ops by self time"), ("top_device_ops", "Top device ops")):
        ops = totals.get(key) or []
        if not ops:
            continue
        if key == "top_ops":
            parts.append(
                f"<h3>{esc(label)}</h3>"
                + table(
                    ["op", "calls", "self (ms)", "total (ms)"],
                    [
                        (
                            _cut(o.get("name", "")),
                            f"{o.get('count', 0):,}",
                            _ms(o.get("self_ns")),
                            _ms(o.get("total_ns")),
                        )
                        for o in ops[:10]
                    ],
                    num=(1, 2, 3),
                )
            )
        else:
            parts.append(
                f"<h3>{esc(label)}</h3>"
                + table(
                    ["op", "calls", "time (ms)"],
                    [
                        (_cut(o.get("name", "")), f"{o.get('count', 0):,}", _ms(o.get("total_ns")))
                        for o in ops[:10]
                    ],
                    num=(1, 2),
                )
            )
    return "".join(parts)


def _overview_section(trace: Trace, totals: dict[str, Any] | None) -> str:
    parts = [_kv(data.overview(trace))]
    if totals:
        parts.append(_glance(totals))
    warns = [str(w) for w in trace.metadata.get(Meta.WARNINGS) or []]
    probe_errors = trace.metadata.get(Meta.PROBE_ERRORS) or []
    if warns:
        parts.append(
            '<h3>Load warnings</h3><ul class="warn">'
            + "".join(f"<li>{esc(w)}</li>" for w in warns[:50])
            + "</ul>"
        )
    if probe_errors:
        items = [
            f"{e.get('probe', '?')}: {e.get('error', '')}" if isinstance(e, dict) else str(e)
            for e in probe_errors
        ]
        parts.append(
            '<h3>Probe errors</h3><ul class="warn">'
            + "".join(f"<li>{esc(i)}</li>" for i in items[:50])
            + "</ul>"
        )
    return "".join(parts)


def render_html_report(
    trace: Trace,
    findings: Sequence[Any] | None = None,
    totals: dict[str, Any] | None = None,
    title: str | None = None,
    lines: list[dict[str, Any]] | None = None,
    steps: list[dict[str, Any]] | None = None,
    trend: Sequence[dict[str, Any]] | None = None,
) -> str:
    """The report as one HTML string.

    Args:
        trace: the trace.
        findings: Finding objects or dicts (default: trace.findings).
        totals: neuron_prof.analysis totals (`report(trace).totals`); the "at a glance" table when given.
        title: page title (default: from the trace's file name).
        lines: the lines view (`report(trace).lines`; computed when not given).
        steps: the per-step breakdown (`report(trace).steps`; computed when not given).
        trend: the run history's rows of this script, oldest first (`history.trend`): a step-time trend.
    """
    import plotly.offline

    from neuron_prof.analysis import Context, lines_json, step_breakdown

    if lines is None or steps is None:
        ctx = Context(trace)
        if lines is None:
            from neuron_prof.analysis.efficiency.rates import add_line_efficiency

            lines = add_line_efficiency(lines_json(trace, ctx), ctx)
        steps = step_breakdown(trace, ctx) if steps is None else steps

    fl = _as_dicts(findings, trace)
    figures: dict[str, Any] = {}
    parts: list[tuple[str, str, Callable[[], str]]] = [
        ("overview", "Overview", lambda: _overview_section(trace, totals)),
        ("findings", f"Findings ({len(fl)})", lambda: _findings_section(fl, figures)),
        ("lines", "By line", lambda: _lines_section(lines)),
        ("efficiency", "Efficiency (roofline)", lambda: efficiency_section(totals, lines, figures)),
        ("steps", "Per step", lambda: _steps_section(steps, figures)),
        ("critical-path", "Critical path", lambda: critical_path_section(totals)),
        ("compile", "Compile-time waterfall", lambda: _compile_section(trace, figures)),
        ("fallback", "CPU-fallback hot spots", lambda: _fallback_section(trace, fl, figures)),
        ("utilisation", "Device utilisation", lambda: _utilisation_section(trace, figures)),
        ("memory", "Memory over time", lambda: _memory_section(trace, figures)),
        ("collectives", "Collective bandwidth", lambda: _collective_section(trace, figures)),
        ("device-profile", "Device profile", lambda: device_profile_section(totals)),
    ]
    sections = []
    for key, head, build in parts:  # a section at a time, the trace's pages handed back after each (big traces)
        sections.append((key, head, build()))
        trace.drop_pages()
    if trend and (html := trend_section(trend, figures)):
        sections.insert(4, ("trend", "Step-time trend", html))
    source = str(trace.metadata.get(Meta.SOURCE) or "")
    name = title or f"neuron-prof report: {os.path.basename(source) or 'trace'}"
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return page(
        name,
        f"{source}  ·  generated {now}",
        sections,
        figures,
        plotly.offline.get_plotlyjs(),
        f"neuron-prof {__version__} · plotly.js embedded: this page works offline.",
    )


def write_html_report(
    trace: Trace,
    path: str | os.PathLike[str],
    findings: Sequence[Any] | None = None,
    totals: dict[str, Any] | None = None,
    title: str | None = None,
    lines: list[dict[str, Any]] | None = None,
    steps: list[dict[str, Any]] | None = None,
    trend: Sequence[dict[str, Any]] | None = None,
) -> Path:
    """Write the report to `path` via a temporary file (a failure leaves no half page); returns the path."""
    p = Path(path)
    text = render_html_report(trace, findings, totals, title, lines, steps, trend)
    tmp = p.with_name(f".{p.name}.tmp")
    try:
        if p.exists() and not p.is_file():
            # /dev/stdout, a FIFO, /dev/null: write into it; a rename would replace the device itself
            p.write_text(text, encoding="utf-8")
            return p
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
    except OSError as e:
        with contextlib.suppress(OSError):  # e.g. the folder is a file: there is no temporary to remove
            tmp.unlink(missing_ok=True)
        raise ExportError(f"{p}: cannot write the report: {e.strerror or e}") from None
    return p
