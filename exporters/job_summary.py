"""The job summary (many ranks) as text, Markdown or JSON.

    from neuron_prof.exporters.job_summary import job_json, job_markdown, job_text
    print(job_text(js.to_dict(), source="run/"))

Works on the `to_dict()` document (schema "neuron-prof.job-summary"), so a saved `--json` renders the same.
"""

from __future__ import annotations

import io
from typing import Any

import orjson

from neuron_prof.analysis import Kind
from neuron_prof.analysis.fmt import fmt_ns, printable, short_site
from neuron_prof.exporters.summary import _SEV_STYLE, md_cell, text_console
from neuron_prof.job import COLUMNS, failed_lines, head_line, rank_cells


def job_json(doc: dict[str, Any]) -> bytes:
    """The `summary --json` document of a job, indented UTF-8 JSON."""
    return orjson.dumps(
        doc,
        option=orjson.OPT_INDENT_2
        | orjson.OPT_SERIALIZE_NUMPY
        | orjson.OPT_NON_STR_KEYS
        | orjson.OPT_APPEND_NEWLINE,
    )


def job_text(doc: dict[str, Any], *, source: str = "", width: int | None = None, color: bool = False) -> str:
    """Ranks table, failed sources (one line each), cross-rank findings and the command to open the ranks."""
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    con = text_console(buf, width, color)
    con.print(Text(printable(head_line(doc, source)), style="bold"))
    tab = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for col, just in COLUMNS:
        tab.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
    for r in doc["ranks"]:
        if r.get("status") == "ok":
            tab.add_row(*rank_cells(r))
    con.print()
    con.print(tab)
    for line in failed_lines(doc):
        con.print(Text(printable(line), style="red"))
    findings = [f for f in doc["findings"] if f["kind"] != Kind.RANKS_TO_OPEN]
    con.print()
    if findings:
        ft = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        for col, just in (
            ("#", "right"),
            ("severity", "left"),
            ("kind", "left"),
            ("cost", "right"),
            ("rank", "right"),
            ("finding", "left"),
        ):
            ft.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
        for i, f in enumerate(findings, 1):
            ft.add_row(
                str(i),
                Text(f["severity"], style=_SEV_STYLE.get(f["severity"], "")),
                f["kind"],
                fmt_ns(f["cost_ns"]) if f["cost_ns"] else "-",
                "-" if f["rank"] is None else str(f["rank"]),
                Text(printable(f["title"] + (f" at {short_site(f['call_site'])}" if f["call_site"] else ""))),
            )
        con.print(ft)
    else:
        con.print(Text("No cross-rank findings."))
    opener = next((f for f in doc["findings"] if f["kind"] == Kind.RANKS_TO_OPEN), None)
    if opener is not None:
        ev = opener["evidence"]
        con.print()
        con.print(
            Text(
                "Ranks worth opening: " + ", ".join(f"{r} ({ev['why'][str(r)]})" for r in ev["ranks"]),
                style="bold",
            )
        )
        con.print(Text(printable(ev["command"])), soft_wrap=True)
    return buf.getvalue()


def job_markdown(doc: dict[str, Any], *, source: str = "") -> str:
    """The same as Markdown (CI job summaries, pull requests)."""
    out = [
        f"## {md_cell(head_line(doc, source))}",
        "",
        "| " + " | ".join(c for c, _ in COLUMNS) + " |",
        "|" + "|".join("---:" for _ in COLUMNS) + "|",
    ]
    out += [
        "| " + " | ".join(md_cell(c) for c in rank_cells(r)) + " |"
        for r in doc["ranks"]
        if r.get("status") == "ok"
    ]
    fails = failed_lines(doc)
    if fails:
        out += ["", *(f"- {md_cell(line)}" for line in fails)]
    findings = [f for f in doc["findings"] if f["kind"] != Kind.RANKS_TO_OPEN]
    out += ["", "### Cross-rank findings", ""]
    if findings:
        out += ["| # | severity | kind | cost | rank | finding |", "|---:|---|---|---:|---:|---|"]
        out += [
            f"| {i} | {f['severity']} | {f['kind']} | {fmt_ns(f['cost_ns']) if f['cost_ns'] else '-'} | "
            f"{'-' if f['rank'] is None else f['rank']} | {md_cell(f['title'])} |"
            for i, f in enumerate(findings, 1)
        ]
    else:
        out.append("No cross-rank findings.")
    opener = next((f for f in doc["findings"] if f["kind"] == Kind.RANKS_TO_OPEN), None)
    if opener is not None:
        out += [
            "",
            f"Ranks worth opening: {', '.join(map(str, opener['evidence']['ranks']))}",
            "",
            "```",
            opener["evidence"]["command"].replace("`", "'"),
            "```",
        ]
    return "\n".join(out) + "\n"
