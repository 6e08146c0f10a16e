"""`neuron-prof diff` as terminal text and Markdown (the JSON is `neuron_prof.analysis.compare.diff` itself).

    from neuron_prof.analysis import diff
    print(diff_text(diff(base, new), "before.json", "after.json"))

Every time is shown in its unit (fmt_ns); lists of what appeared or disappeared stop at `LIST_MAX` items
and say how many more there are; a call site is named once per line.
"""

from __future__ import annotations

from typing import Any

from neuron_prof.analysis.fmt import clip, fmt_ns, printable
from neuron_prof.exporters.summary import md_cell

LIST_MAX = 20
"""Appeared / disappeared items listed per kind; the rest are counted ("and 19 more")."""

_TOTALS = (
    ("wall_ns", "wall"),
    ("device_busy_ns", "device busy"),
    ("compile_ns", "compile"),
    ("fallback_ns", "CPU fallback"),
    ("sync_ns", "sync wait"),
    ("collective_ns", "collectives"),
)
# the JSON's unit names what its numbers count; a reader of ms and µs wants to know what they are of
_OPS_HEADING = {"ns per step": "self time per step", "ns per profile": "self time in the profile"}


def _signed_ns(ns: float) -> str:
    return ("+" if ns > 0 else "") + fmt_ns(ns) if ns else "±0"


def _rel(ch: dict[str, Any]) -> str:
    r = ch.get("ratio")
    return f", {(r - 1):+.1%}" if isinstance(r, (int, float)) and ch.get("base") else ""


def _item(what: str, item: dict[str, Any]) -> str:
    """One appeared/disappeared entry: the op (and signature or frame) and its call site, each once."""
    site = item.get("call_site")
    name = item.get("op") if what in ("fallback", "sync point") else item.get("key")
    name = str(name or item.get("key", "")).split(" @ ", 1)[0]
    n = item.get("count")
    cost = item.get("cost_ns", item.get("ns"))
    extra = f" ({n}x, {fmt_ns(cost)})" if n and cost else ""
    return f"{what} {{verb}}: {name}" + (f" at {site}" if site else "") + extra


def _changes(d: dict[str, Any]) -> list[str]:
    out = []
    for what, key in (("fallback", "fallbacks"), ("compile", "compiles"), ("sync point", "syncs")):
        for verb in ("appeared", "disappeared"):
            items = d.get(key, {}).get(verb, [])
            out += [_item(what, it).format(verb=verb) for it in items[:LIST_MAX]]
            if len(items) > LIST_MAX:
                out.append(f"{what} {verb}: ... and {len(items) - LIST_MAX} more (--json lists them all)")
    return out


def diff_sections(d: dict[str, Any]) -> dict[str, Any]:
    """The diff's lines and tables, shared by the text and the Markdown."""
    step = d["step"]
    if step.get("base") is not None and step.get("new") is not None:
        step_line = (
            f"Steady step {fmt_ns(step['base'])} -> {fmt_ns(step['new'])} "
            f"({_signed_ns(step['delta'])}{_rel(step)})"
        )
    else:
        step_line = "Steady step: not comparable (a trace has no steps)"
    h = d.get("headline")
    head_line = (
        f"Largest change: {h['what']} {_signed_ns(h['delta'])} ({fmt_ns(h['base'])} -> {fmt_ns(h['new'])})"
        if h else "Largest change: none (the same times in both)"
    )
    totals = []
    for key, label in _TOTALS:
        ch = d["totals"][key]
        if ch.get("base") or ch.get("new"):
            totals.append(
                (label, fmt_ns(ch["base"] or 0), fmt_ns(ch["new"] or 0), _signed_ns(ch.get("delta", 0)) + _rel(ch))
            )
    ops = [
        (
            clip(o["name"] + (" (device)" if o.get("where") == "device" else "")),
            fmt_ns(o["base_ns"]),
            fmt_ns(o["new_ns"]),
            _signed_ns(o["delta_ns"]),
        )
        for o in d["ops"]
        if o["delta_ns"]
    ]
    kinds = [
        (
            k,
            f"{v['base_findings']} / {fmt_ns(v['base_cost_ns'])}",
            f"{v['new_findings']} / {fmt_ns(v['new_cost_ns'])}",
            _signed_ns(v["delta_cost_ns"]),
        )
        for k, v in d["finding_kinds"].items()
    ]
    late = d.get("compiles_after_first_step") or {}
    if late.get("base") is not None and late.get("new") is not None and (late["base"] or late["new"]):
        step_line += f"; compiles after the first step {late['base']} -> {late['new']}" + (
            " (none in the training steps)" if late["new"] == 0 else "")
    unit = _OPS_HEADING.get(d["ops_unit"], d["ops_unit"])
    return {"headline": head_line, "step": step_line, "totals": totals, "ops": ops, "ops_title": f"Ops, largest changes ({unit})",
            "kinds": kinds, "changes": _changes(d)}


def diff_text(d: dict[str, Any], base: str = "BASE", new: str = "NEW") -> str:
    """A diff (analysis.compare.diff) as plain terminal text."""
    s = diff_sections(d)
    lines = [f"neuron-prof diff: {base} -> {new}", s["headline"], s["step"], ""]

    def table(title: str, head: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
        if not rows:
            return
        w = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
        lines.append(title)
        for r in [head, *rows]:
            lines.append(
                "  " + "  ".join(str(c).ljust(w[i]) if i == 0 else str(c).rjust(w[i]) for i, c in enumerate(r))
            )
        lines.append("")

    table("Totals", ("", "base", "new", "change"), s["totals"])
    table(s["ops_title"], ("op", "base", "new", "change"), s["ops"])
    table("Findings per kind (findings / cost)", ("kind", "base", "new", "cost change"), s["kinds"])
    if s["changes"]:
        lines += ["Appeared / disappeared", *[f"  {printable(c)}" for c in s["changes"]], ""]
    return "\n".join(lines).rstrip() + "\n"


def diff_markdown(d: dict[str, Any], base: str = "BASE", new: str = "NEW") -> str:
    """A diff as Markdown."""
    s = diff_sections(d)
    out = [f"## neuron-prof diff: {md_cell(base)} -> {md_cell(new)}", "", f"**{md_cell(s['headline'])}**", "",
           md_cell(s["step"]), ""]

    def table(title: str, head: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
        if not rows:
            return
        out.extend(
            [
                f"### {title}",
                "",
                "| " + " | ".join(head) + " |",
                "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|",
            ]
        )
        out.extend("| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows)
        out.append("")

    table("Totals", ("", "base", "new", "change"), s["totals"])
    table(s["ops_title"], ("op", "base", "new", "change"), s["ops"])
    table("Findings per kind (findings / cost)", ("kind", "base", "new", "cost change"), s["kinds"])
    if s["changes"]:
        out += ["### Appeared / disappeared", "", *[f"- {md_cell(c)}" for c in s["changes"]], ""]
    return "\n".join(out)
