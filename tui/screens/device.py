"""Device: what a Neuron Explorer device profile says about the run (key `d`).

The schema version the profile was read with, how its clock was placed, the ``Summary`` metrics (MFU, HFU, MBU,
engine and DMA active shares), then one table: ``OpcodeSummary`` rows and the device time per framework op,
per source line and per host op (`summary --json` totals ``neuron_explorer``, computed once by the analysis).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from neuron_prof.analysis.fmt import fmt_count, fmt_ns, printable
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable

_METRICS = (("mfu_estimated_percent", "MFU"), ("hfu_estimated_percent", "HFU"), ("mbu_estimated_percent", "MBU"),
            ("dma_active_time_percent", "DMA active"))


def device_header(ex: dict[str, Any] | None) -> Text:
    """Schema version, clock, metrics; or why there is nothing to show."""
    t = Text(no_wrap=True, overflow="ellipsis")
    if not ex:
        t.append("No Neuron Explorer device profile in this trace: on Trainium, capture with "
                 "device_profile=True and load the run directory (docs/trainium.md).",
                 style="dim")
        return t
    sch = ex.get("schema") or {}
    t.append("Neuron Explorer schema ", style="dim")
    t.append(printable(sch.get("version", "?")), style="bold")
    t.append(f" (declared by {sch.get('declared_by', '?')})", style="dim")
    clock = ex.get("device_clock") or {}
    if clock:
        t.append("   device clock placed by ", style="dim")
        how = clock.get("anchored_by", "?")
        t.append(f"{clock.get('executions_paired', 0)} executions" if how == "executions" else str(how))
    sm = ex.get("summary") or {}
    bits = [(label, sm[k]) for k, label in _METRICS if isinstance(sm.get(k), (int, float))]
    bits += sorted((k.split("_")[0], v) for k, v in sm.items()
                   if k.endswith("engine_active_time_percent") and isinstance(v, (int, float)))
    if bits:
        t.append("\n")
        for label, v in bits:
            t.append(f"{label} ", style="dim")
            t.append(f"{v:.1f}%   ", style="bold")
    if ex.get("errors"):
        t.append("\n")
        t.append(f"{ex['errors']} hardware error(s): see the findings", style="bold red")
    if ex.get("views_left_out"):
        t.append("\n")
        t.append("not in this profile: " + ", ".join(ex["views_left_out"]), style="dim yellow")
    return t


def device_rows(ex: dict[str, Any] | None) -> dict[str, np.ndarray]:
    """OpcodeSummary, framework ops, your lines (executions they launched), the compiler's source lines and
    host ops as one table (what, name, time, count)."""
    what: list[str] = []
    name: list[str] = []
    ns: list[int] = []
    count: list[int] = []
    ex = ex or {}
    for r in ex.get("opcodes") or []:
        what.append(f"opcode {r.get('engine', '')}")
        name.append(str(r.get("opcode", "")))
        ns.append(int(r.get("instruction_time_ns") or 0))
        count.append(int(r.get("instruction_count") or 0))
    for key, label, nkey, ckey in (("framework_ops", "framework op", "framework_name", "instructions"),
                                   ("device_lines", "your line", "site", "executions"),
                                   ("source_lines", "source line", "site", None),
                                   ("host_ops", "host op", "op", "executions")):
        for r in ex.get(key) or []:
            what.append(label)
            name.append(str(r.get(nkey, "")))
            ns.append(int(r.get("device_ns") or 0))
            count.append(int(r.get(ckey) or 0) if ckey else 0)

    def obj(v: list[str]) -> np.ndarray:
        a = np.empty(len(v), dtype=object)
        a[:] = v
        return a

    return {"what": obj(what), "name": obj(name), "time_ns": np.asarray(ns, dtype=np.int64),
            "count": np.asarray(count, dtype=np.int64)}


class DeviceScreen(ViewScreen):
    """The device profile's metrics and where its device time went."""

    VIEW = "device"
    TITLE = "Device"
    HELP = ("device view: a Neuron Explorer device profile's schema version, MFU/HFU/MBU, engine shares, "
            "opcodes and device time per framework op, source line and host op")
    JUMPS = False

    def compose_body(self) -> Iterable[Widget]:
        ex = self.rank.totals.get("neuron_explorer")
        yield Static(device_header(ex), id="device-header")
        cols = [
            Column("what", "what", 16),
            Column("name", "opcode / op / line", 0, clip_left=True),
            Column("time_ns", "device time", 12, fmt_ns, right=True),
            Column("count", "count", 8, lambda v: fmt_count(v) if v else "", right=True, drop=1),
        ]
        self.table = VirtualTable(cols, device_rows(ex), filter_key="name", id="device")
        self.table.empty_text = "No device time to show (no Instruction or OpcodeSummary table in this profile)."
        yield self.table

    def jump_target(self) -> tuple[int | None, int | None]:
        return None, None
