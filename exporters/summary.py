"""Summary renderings of a Report (totals + findings): text (rich), JSON and Markdown.

    from neuron_prof.analysis import report
    from neuron_prof.exporters.summary import summary_text, summary_json, summary_markdown
    print(summary_text(report(trace), source="trace.json"))

Strings from traces are shown as literal text (rich `Text`, never markup).
"""

from __future__ import annotations

import io
from typing import Any

import orjson

from neuron_prof.analysis import Finding, Report, partial_line
from neuron_prof.analysis.fmt import clip, fit_site, fmt_ns, fmt_share, printable, short_site, strip_site
from neuron_prof.analysis.reduced import reduced_line
from neuron_prof.exporters.efficiency_text import efficiency_lines

SITE_W = 26
"""Widest `where` column of the findings table: longer call sites are shortened in their middle."""

_SEV_STYLE = {"critical": "bold red", "warning": "yellow", "info": "dim"}


def summary_json(rep: Report) -> bytes:
    """The stable `summary --json` document (docs/summary.md), indented UTF-8 JSON."""
    return orjson.dumps(
        rep.to_dict(),
        option=orjson.OPT_INDENT_2
        | orjson.OPT_SERIALIZE_NUMPY
        | orjson.OPT_NON_STR_KEYS
        | orjson.OPT_APPEND_NEWLINE,
    )


def _steps_lines(st: dict[str, Any]) -> list[str]:
    """"Steps 14: 2 warm-up (1.20 s each on average), 12 steady (120 ms median)": each figure beside the steps it
    is of, with the recompiling and evaluation steps between when there are any (`analysis.steps.phases`); when
    every step after the warm-up compiled, says so instead of naming a steady step."""
    ph = st.get("phases") or {}
    s = f"Steps {st['count']}: {st['warmup']} warm-up"
    if st.get("warmup_step_ns") is not None:
        s += f" ({fmt_ns(st['warmup_step_ns'])} each on average)"
    if ph.get("recompiling"):
        each = st.get("recompiling_step_ns")
        s += f", {ph['recompiling']} recompiling" + (f" ({fmt_ns(each)} each)" if each is not None else "")
    if ph.get("evaluation"):
        s += f", {ph['evaluation']} evaluation"
    s += f", {st.get('steady_count', st['count'] - st['warmup'])} steady"
    if st.get("all_compile"):
        s += " (every later step compiled: no steady step; shape churn?)"
    elif st.get("steady_step_ns") is not None:
        s += f" ({fmt_ns(st['steady_step_ns'])} median)"
    return [s]


def totals_lines(t: dict[str, Any]) -> list[str]:
    """Plain-text lines describing the totals (shared by the text and Markdown views)."""
    lines = []
    ended = t.get("capture_exit")
    if ended and ended != "ok":
        # a crashed script's trace ends where the script did: its numbers cover the run until then
        lines.append(f"The profiled code did not finish: {ended} (the trace covers the run until then)")
    lines.append(f"Wall time {fmt_ns(t['wall_ns'])}")
    reduced = reduced_line(t.get("capture_reduced"))
    if reduced:
        lines.append(reduced)
    st = t.get("steps") or {}
    if st.get("count"):
        lines += _steps_lines(st)
    if t.get("device_busy_share") is not None:
        lines.append(f"Device busy {fmt_ns(t['device_busy_ns'])} ({fmt_share(t['device_busy_share'])} of wall)")
    parts = []
    for key, label in (
        ("compile", "compile"),
        ("fallback", "CPU fallback"),
        ("sync", "sync wait"),
        ("collective", "collectives"),
    ):
        if t.get(f"{key}_count"):
            parts.append(f"{label} {fmt_ns(t[f'{key}_ns'])} ({t[f'{key}_count']})")
    if parts:
        lines.append("; ".join(parts))
    ps = t.get("steady_per_step")
    if ps:
        bits = [
            f"{label} {fmt_ns(ps[key])}"
            for key, label in (
                ("device_busy_ns", "device busy"),
                ("compile_ns", "compile"),
                ("fallback_ns", "CPU fallback"),
                ("sync_ns", "sync wait"),
                ("collective_ns", "collectives"),
            )
            if ps.get(key)
        ]
        if bits:  # a heading with nothing after it says nothing
            lines.append(f"Per steady step ({fmt_ns(ps['step_ns'])}): " + ", ".join(bits))
        parts = [f"{c} {fmt_ns(v)}" for c, v in (ps.get("parts") or {}).items() if v]
        if parts:  # exclusive parts (`steps.breakdown`), over the same steady steps: they add up to the step
            lines.append(f"Steady step ({fmt_ns(ps['step_ns'])}, mean of {ps['steps']} steady steps) in parts: "
                         + ", ".join(parts))
    rq = t.get("host_runqueue") or {}
    if rq.get("material"):
        lines.append(f"Host waited {fmt_ns(rq['wait_ns'])} for a CPU ({fmt_share(rq['share'])} of wall): other processes "
                     f"on this machine, {rq['load_text']}; not charged to the program")
    lines += explorer_lines(t.get("neuron_explorer"))
    lines += efficiency_lines(t.get("efficiency"))
    sev = t.get("findings_by_severity") or {}
    if sev:
        lines.append(
            "Findings: " + ", ".join(f"{sev.get(s, 0)} {s}" for s in ("critical", "warning", "info"))
            + (" (in what the partial trace holds)" if t.get("partial") else "")
        )
    return lines


_METRICS = (("mfu_estimated_percent", "MFU"), ("hfu_estimated_percent", "HFU"), ("mbu_estimated_percent", "MBU"),
            ("dma_active_time_percent", "DMA active"), ("cc_op_active_time_percent", "collectives active"))


def explorer_lines(ex: dict[str, Any] | None) -> list[str]:
    """The device profile's own lines: schema version read, clock anchors, Summary metrics, hardware errors."""
    if not ex:
        return []
    sch = ex.get("schema") or {}
    lines = [f"Neuron Explorer schema {sch.get('version', '?')} (declared by {sch.get('declared_by', '?')})"]
    clock = ex.get("device_clock") or {}
    if clock.get("anchored_by") == "executions":
        lines[-1] += f"; device clock placed through {clock.get('executions_paired', 0)} executions"
    elif clock.get("anchored_by"):
        lines[-1] += f"; device clock placed by {clock['anchored_by']}"
    sm = ex.get("summary") or {}
    bits = [f"{label} {sm[k]:.1f}%" for k, label in _METRICS if isinstance(sm.get(k), (int, float))]
    engines = sorted((k.split("_")[0], v) for k, v in sm.items() if k.endswith("engine_active_time_percent")
                     and isinstance(v, (int, float)))
    if engines:
        bits.append("engines active " + ", ".join(f"{e} {v:.1f}%" for e, v in engines))
    if bits:
        lines.append("Device profile: " + "; ".join(bits))
    if ex.get("errors"):
        lines.append(f"Hardware errors: {ex['errors']} (see findings)")
    if ex.get("views_left_out"):
        lines.append("Not shown (fields missing in this profile): " + ", ".join(ex["views_left_out"]))
    lines += [f"No {part}: {why}" for part, why in (ex.get("lacks") or {}).items()]
    return lines


def explorer_tables(ex: dict[str, Any] | None, top: int) -> list[Any]:
    """OpcodeSummary and device time per framework op / source line, as rich tables."""
    from rich.table import Table
    from rich.text import Text

    out = []
    specs = (("opcodes", ("engine", "opcode", "instructions", "time", "active %"),
              lambda r: (r.get("engine", ""), r.get("opcode", ""), str(r.get("instruction_count", "")),
                         fmt_ns(int(r.get("instruction_time_ns") or 0)),
                         f"{r['active_time_percent']:.1f}" if isinstance(r.get("active_time_percent"), float) else "")),
             ("framework_ops", ("framework op (device)", "time", "instructions"),
              lambda r: (r["framework_name"], fmt_ns(r["device_ns"]), str(r["instructions"]))),
             ("device_lines", ("your line (device executions)", "time", "executions"),
              lambda r: (r["site"], fmt_ns(r["device_ns"]), str(r["executions"]))),
             ("source_lines", ("source line (device)", "time"), lambda r: (r["site"], fmt_ns(r["device_ns"]))),
             ("host_ops", ("host op (device instructions)", "time", "executions"),
              lambda r: (r["op"], fmt_ns(r["device_ns"]), str(r["executions"]))))
    for key, cols, row in specs:
        rows = (ex or {}).get(key) or []
        if not rows or not top:
            continue
        tab = Table(box=None, show_edge=False, header_style="bold")
        for i, c in enumerate(cols):
            tab.add_column(c, justify="left" if i < (2 if key == "opcodes" else 1) else "right", overflow="fold")
        for r in rows[:top]:
            cells = row(r)
            tab.add_row(Text(clip(cells[0])), *[Text(clip(str(c))) for c in cells[1:]])
        out.append(tab)
    return out


def summary_text(
    rep: Report,
    *,
    source: str = "",
    width: int | None = None,
    color: bool = False,
    advice: bool = True,
    top: int = 10,
) -> str:
    """Totals, the ranked findings and the top ops as terminal text."""
    from rich.text import Text

    buf = io.StringIO()
    con = text_console(buf, width, color)
    partial = rep.totals.get("partial")
    if partial:  # first, before any number: every number below is of what the damaged file still holds
        con.print(Text(printable(partial_line(partial)), style="bold red"))
    # the header is never wrapped: the path stays whole on its line, to copy (the terminal wraps it, if at all)
    con.print(Text(f"neuron-prof summary{': ' + source if source else ''}", style="bold"), soft_wrap=True)
    for line in totals_lines(rep.totals):
        con.print(Text(line))
    if rep.findings:
        con.print()
        con.print(findings_table(rep.findings, width or 120))
        note = (rep.totals.get("shares") or {}).get("note")
        if note:  # shares past 100%: say what overlaps
            con.print(Text(note, style="dim"))
        con.print()
        con.print(Text("Details", style="bold"))
        for i, f in enumerate(rep.findings, 1):
            con.print(finding_detail(i, f, advice=advice))
    else:
        con.print(Text("No findings."))
    if rep.lines and top:
        con.print()
        con.print(Text(LINES_TITLE, style="bold"))
        con.print(lines_table(rep.lines[:top], width or 120))
    for key, label, self_col in (("top_ops", "host op", True), ("top_device_ops", "device op", False)):
        ops = rep.totals.get(key) or []
        if ops and top:
            con.print()
            con.print(ops_table(ops[:top], label, self_col))
    for tab in explorer_tables(rep.totals.get("neuron_explorer"), top):
        con.print()
        con.print(tab)
    return buf.getvalue()


def text_console(buf: io.StringIO, width: int | None = None, color: bool = False) -> Any:
    """A rich Console writing plain text (or ANSI colour) into `buf`, `width` columns (120 by default), with
    no markup, highlighting or emoji read from the text and no terminal settings taken from the environment."""
    from rich.console import Console

    return Console(file=buf, width=width or 120, color_system="standard" if color else None, force_terminal=color,
                   highlight=False, markup=False, emoji=False, _environ={})


def findings_table(findings: list[Finding], width: int = 120) -> Any:
    """One line per finding in `width` columns (a rich Table): the title cut to what is left of the line,
    its call site shown once, in `where`, shortened in its middle (never losing :LINE)."""
    from rich.table import Table
    from rich.text import Text

    sites = [printable(short_site(f.call_site)) or "-" for f in findings]
    rows = [
        [
            str(i),
            f.severity,
            f.kind,
            fmt_ns(f.cost_ns) if f.cost_ns else "-",
            fmt_share(f.share) if f.cost_ns else "-",
            str(f.count),
            fit_site(sites[i - 1], SITE_W),
        ]
        for i, f in enumerate(findings, 1)
    ]
    head = ("#", "severity", "kind", "cost", "share", "count", "where")
    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(head)]
    # rich pads each column with a space on both inner sides: 2 cells between columns
    rest = max(20, width - sum(widths) - 2 * len(head))
    tab = Table(title=None, box=None, pad_edge=False, show_edge=False, header_style="bold")
    for h, w in zip(head, widths):
        tab.add_column(h, justify="right" if h in ("#", "cost", "share", "count") else "left", width=w,
                       no_wrap=True)
    tab.add_column("finding", width=rest, no_wrap=True, overflow="ellipsis")
    for r, f in zip(rows, findings):
        cells: list[Any] = [Text(c) for c in r]
        cells[1] = Text(f.severity, style=_SEV_STYLE.get(f.severity, ""))
        tab.add_row(*cells, Text(printable(strip_site(f.title, f.call_site))))
    return tab


def finding_detail(i: int, f: Finding, *, advice: bool = True) -> Any:
    """A finding in full below the table: its title and call site, then what to do (warnings and worse);
    wrapped lines stay indented under the number."""
    from rich.table import Table
    from rich.text import Text

    t = Text()
    t.append(f"[{f.kind}] ", style=_SEV_STYLE.get(f.severity, ""))
    t.append(printable(strip_site(f.title, f.call_site)))
    if f.call_site:
        t.append(f"\nat {printable(short_site(f.call_site))}", style="dim")
    if advice and f.severity != "info" and f.advice:
        t.append("\nWhat to do: ", style="bold")
        t.append(printable(f.advice))
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", width=3)
    grid.add_column()
    grid.add_row(Text(f"{i}.", style="bold"), t)
    return grid


LINE_COLS = (("host", "host_ns"), ("in bwd", "host_backward_ns"), ("device", "device_ns"),
             ("compile", "compile_ns"), ("fallback", "fallback_ns"), ("sync", "sync_ns"),
             ("coll.", "collective_ns"))
"""The time columns of the lines table: label, key of a `lines` entry (docs/summary.md: `lines`)."""


def line_label(line: dict[str, Any]) -> str:
    """How a `lines` entry is named: its call site, its function, or that no user line ran it."""
    return str(line.get("call_site") or line.get("function") or "(no user line)")


LINES_TITLE = "Where the time goes, by line of your code (backward charged to its forward line)"
"""The heading of the lines table in the text and Markdown summaries."""


def line_rows(lines: list[dict[str, Any]]) -> tuple[tuple[str, ...], list[tuple[list[str], str]]]:
    """The lines table as text, for the text and Markdown summaries alike: its header (the line, then the time
    columns not empty on every line) and per line its cells and its source text; "in bwd" is the part of the
    line's host time spent in the backward of its ops, the source ends with the autograd nodes it ran."""
    cols = [(label, k) for label, k in LINE_COLS if k == "host_ns" or any(ln.get(k) for ln in lines)]
    rows = []
    for ln in lines:
        cells = [fit_site(printable(short_site(line_label(ln))), SITE_W)]
        cells += [fmt_ns(ln.get(k, 0)) if ln.get(k) else "-" for _, k in cols]
        src = str(ln.get("source") or "")
        if ln.get("backward_of"):
            src = (src + "  " if src else "") + "+ backward: " + ", ".join(ln["backward_of"][:3])
        rows.append((cells, printable(src)))
    return ("line", *(label for label, _ in cols)), rows


def lines_table(lines: list[dict[str, Any]], width: int = 120) -> Any:
    """The costliest user lines (`summary --json` `lines`) with their time columns and source text
    (`line_rows`), the source cut to the width left."""
    from rich.table import Table
    from rich.text import Text

    head, rows = line_rows(lines)
    widths = [max(len(h), *(len(c[k]) for c, _ in rows)) for k, h in enumerate(head)]
    rest = max(16, width - sum(widths) - 2 * len(head))
    tab = Table(box=None, show_edge=False, header_style="bold", title=None, pad_edge=False)
    for k, (h, w) in enumerate(zip(head, widths)):
        tab.add_column(h, justify="left" if not k else "right", width=w, no_wrap=True)
    tab.add_column("source", width=rest, no_wrap=True, overflow="ellipsis")
    for cells, src in rows:
        tab.add_row(*(Text(c) for c in cells), Text(src))
    return tab


def ops_table(ops: list[dict[str, Any]], label: str, self_col: bool) -> Any:
    """Top host ops (self, total, count) or top device kernels (time, count)."""
    from rich.table import Table
    from rich.text import Text

    tab = Table(box=None, show_edge=False, header_style="bold", title=None)
    cols = (label, "self", "total", "count") if self_col else (label, "time", "count")
    for i, col in enumerate(cols):
        tab.add_column(col, justify="left" if not i else "right", overflow="fold")  # type: ignore[arg-type]
    for o in ops:
        times = [fmt_ns(o.get("self_ns", o["total_ns"]))] if self_col else []
        tab.add_row(Text(clip(o["name"])), *times, fmt_ns(o["total_ns"]), str(o["count"]))
    return tab


def md_cell(s: object) -> str:
    """A Markdown table cell: pipes, backticks and newlines neutralised, HTML-ish brackets escaped."""
    return (
        printable(str(s).replace("\n", " "))
        .replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("`", "\\`")
    )


def summary_markdown(rep: Report, *, source: str = "", top: int = 10) -> str:
    """Totals, findings (with advice), the costliest lines and top ops as GitHub-flavoured Markdown (for CI
    job summaries)."""
    partial = rep.totals.get("partial")
    out = [f"> **{md_cell(partial_line(partial))}**", ""] if partial else []
    out += [f"## neuron-prof summary{': ' + md_cell(source) if source else ''}", ""]
    out += [f"- {md_cell(line)}" for line in totals_lines(rep.totals)]
    out.append("")
    if rep.findings:
        out += [
            "| # | severity | kind | cost | share | count | where | finding |",
            "|---:|---|---|---:|---:|---:|---|---|",
        ]
        for i, f in enumerate(rep.findings, 1):
            out.append(
                f"| {i} | {f.severity} | {f.kind} | {fmt_ns(f.cost_ns) if f.cost_ns else '-'} | "
                f"{fmt_share(f.share) if f.cost_ns else '-'} | {f.count} | "
                f"{md_cell(short_site(f.call_site) or '-')} | "
                f"{md_cell(strip_site(f.title, f.call_site))} |"
            )
        note = (rep.totals.get("shares") or {}).get("note")
        if note:
            out += ["", md_cell(note)]
        worth = [(i, f) for i, f in enumerate(rep.findings, 1) if f.severity != "info"]
        if worth:
            out += ["", "### What to do", ""]
            out += [f"{i}. **{f.kind}**: {md_cell(f.advice)}" for i, f in worth]
    else:
        out.append("No findings.")
    if rep.lines and top:
        head, rows = line_rows(rep.lines[:top])
        out += ["", f"### {LINES_TITLE}", "", "| " + " | ".join((*head, "source")) + " |",
                "|---|" + "---:|" * (len(head) - 1) + "---|"]
        out += ["| " + " | ".join(md_cell(c) for c in (*cells, src)) + " |" for cells, src in rows]
    ops = rep.totals.get("top_ops") or []
    if ops and top:
        out += [
            "",
            "### Top host ops by self time",
            "",
            "| op | self | total | count |",
            "|---|---:|---:|---:|",
        ]
        out += [
            f"| {md_cell(clip(o['name']))} | {fmt_ns(o.get('self_ns', o['total_ns']))} | "
            f"{fmt_ns(o['total_ns'])} | {o['count']} |"
            for o in ops[:top]
        ]
    return "\n".join(out) + "\n"


def findings_from_json(doc: dict[str, Any]) -> list[Finding]:
    """Findings back from a `summary --json` document."""
    return [Finding.from_dict(d) for d in doc.get("findings", [])]
