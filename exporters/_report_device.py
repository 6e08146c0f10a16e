"""The report's "Device profile" section: what a Neuron Explorer device profile says about the run.

From the analysis totals' ``neuron_explorer`` object (`analysis.device.profile.explorer_totals`): the schema
version read, how the device clock was placed, the ``Summary`` metrics, ``OpcodeSummary`` and device time per
framework op, source line and host op. A trace without one says so.
"""

from __future__ import annotations

from typing import Any

from neuron_prof.analysis import fmt_ns
from neuron_prof.exporters._report_html import empty, esc, table


def device_profile_section(totals: dict[str, Any] | None) -> str:
    ex = (totals or {}).get("neuron_explorer")
    if not ex:
        return empty("No Neuron Explorer device profile in this trace (on Trainium: capture with the device "
                      "profile and load the run directory).")
    sch = ex.get("schema") or {}
    clock = ex.get("device_clock") or {}
    rows = [("Neuron Explorer schema", f"{sch.get('version', '?')} (declared by {sch.get('declared_by', '?')})")]
    if clock:
        how = clock.get("anchored_by", "?")
        rows.append(("device clock placed by",
                     f"{clock.get('executions_paired', 0)} executions" if how == "executions" else str(how)))
    sm = ex.get("summary") or {}
    for k, v in sorted(sm.items()):
        if k.endswith("_percent") and isinstance(v, (int, float)):
            rows.append((k.removesuffix("_percent").replace("_", " "), f"{v:.1f}%"))
    if ex.get("errors"):
        rows.append(("hardware errors", str(ex["errors"])))
    if ex.get("views_left_out"):
        rows.append(("not in this profile", ", ".join(ex["views_left_out"])))
    rows += [(f"no {part}", why) for part, why in (ex.get("lacks") or {}).items()]
    parts = [table(("", ""), rows)]
    if ex.get("opcodes"):
        parts.append(table(("engine", "opcode", "instructions", "time", "active %"),
                           [(r.get("engine", ""), r.get("opcode", ""), r.get("instruction_count", ""),
                             fmt_ns(int(r.get("instruction_time_ns") or 0)),
                             f"{r['active_time_percent']:.1f}" if isinstance(r.get("active_time_percent"), float)
                             else "") for r in ex["opcodes"]], num=(2, 3, 4)))
    for key, head, name, count in (("framework_ops", "framework op", "framework_name", "instructions"),
                                   ("device_lines", "your line (executions it launched)", "site", "executions"),
                                   ("source_lines", "source line", "site", None),
                                   ("host_ops", "host op", "op", "executions")):
        if ex.get(key):
            heads = (head, "device time") + ((count,) if count else ())
            parts.append(table(heads, [(r[name], fmt_ns(r["device_ns"])) + ((r[count],) if count else ())
                                       for r in ex[key]], num=(1, 2)))
    return "".join(parts) + f'<p class="note">{esc("Device time: the instructions the device profile recorded.")}</p>'
