"""Overview: wall time, device busy share, probe totals, step-time sparkline, the step-time trend over the
recorded runs of the same script (run history) and the findings by cost."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.widgets import Static

from neuron_prof.analysis import Family, Finding, fit_site, fmt_evidence, info_of, of_family, strip_site
from neuron_prof.analysis.fmt import fmt_count, fmt_ns, fmt_share, printable
from neuron_prof.history import trend_series
from neuron_prof.tui._absent import has_concept
from neuron_prof.tui._data import RankData, finding_target
from neuron_prof.tui._steps import STEP_PART_STYLE, bar_runs
from neuron_prof.tui.screens.base import Detail, ViewScreen, detail
from neuron_prof.tui.screens.steps import StepsScreen
from neuron_prof.tui.widgets.plot import sparkline
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
HEADLINES = (
    ("top compile stall ", of_family(Family.COMPILE), "red"),
    ("top CPU fallback  ", of_family(Family.FALLBACK), "#e6a04e"),
)
# where `enter` on a finding leads
FAMILY_VIEW = {
    Family.COMPILE: "compile",
    Family.FALLBACK: "fallback",
    Family.COLLECTIVES: "collectives",
    Family.RANKS: "ranks",
    Family.MEMORY: "memory",
    Family.DEVICE_PROFILE: "device",
}


STEPS_HINT = "  b: steps"
"""After the step sparkline, where it fits: the key to every step's parts (`StepsScreen`)."""
MIX_MIN_HEIGHT = 30
"""Screens at least this tall show the step's stacked parts (at 80x24 the findings keep that row)."""


def _flow(t: Text, items: list[tuple[str, str, str]], room: int) -> None:
    """Append "label value" items three spaces apart, starting a new line where the next would pass `room`."""
    used = 0
    for label, value, style in items:
        size = len(label) + 1 + len(value)
        if used and used + 3 + size > room:
            t.append("\n")
            used = 0
        elif used:
            t.append("   ")
            used += 3
        t.append(f"{label} ", style="dim")
        t.append(value, style=style)
        used += size


def _headline(f: Finding, room: int) -> tuple[str, str]:
    """A finding in one line of `room` columns, never cut mid-word: its title and site when they fit, else the
    title's first clause (the statement before "; " or " ("), else its count, cost and share (the table's detail
    pane has the whole title), the site shortened in the middle."""
    title = printable(strip_site(f.title, f.call_site))
    site = f" at {fit_site(f.call_site, 32)}" if f.call_site else ""
    for text in (title, title.split("; ")[0], title.split(" (")[0]):
        if len(text) + len(site) <= room:
            return text, site
    text = f"{f.count}x, {fmt_ns(f.cost_ns)} ({fmt_share(f.share)})"
    site = f" at {fit_site(f.call_site, max(12, room - len(text) - 4))}" if f.call_site else ""
    return text, site


def summary_text(rank: RankData, width: int = 100, height: int = 48) -> Text:
    """The totals block (the analysis' totals): every time with its share of the wall time, and on a tall
    enough screen the mean step as stacked parts (`step_mix`)."""
    tot = rank.totals
    wall = max(int(tot.get("wall_ns") or 0), 1)
    # whole items per line, wrapped where the next would not fit: at 80 columns "sync 445 µs (...)"
    # starts a line, never "sync 445 µ…"; the source shares the wall time's line when it fits
    t = Text(no_wrap=True, overflow="ellipsis")
    room = max(20, width - 2)
    busy = tot.get("device_busy_share")
    first: list[tuple[str, str, str]] = [
        ("source", fit_site(printable(rank.source), room - len("source ")), ""),
        ("wall", fmt_ns(int(tot.get("wall_ns") or 0)), "bold"),
        ("events", fmt_count(rank.trace.n_events), ""),
        ("device busy", "n/a (no device track)" if busy is None else fmt_share(float(busy)), "bold"),
    ]
    _flow(t, first, room)
    probes: list[tuple[str, str, str]] = []
    for kind, label, style in (
        ("compile", "compile", "red"),
        ("fallback", "CPU fallback", "#e6a04e"),
        ("sync", "sync", "yellow"),
        ("collective", "collectives", "cyan"),
    ):
        ns, n = int(tot.get(f"{kind}_ns") or 0), int(tot.get(f"{kind}_count") or 0)
        # a zero is a measurement only where the backend has the concept (no compile on a GPU)
        if not n and not has_concept(rank.trace, kind):
            continue
        probes.append((label, f"{fmt_ns(ns)} ({fmt_share(ns / wall)}, {fmt_count(n)}x)", style if n else ""))
    if probes:
        t.append("\n")
        _flow(t, probes, room)
    steps = rank.steps
    t.append("\n")
    t.append("steps ", style="dim")
    if len(steps):
        info = tot.get("steps") or {}
        steady = info.get("steady_step_ns") if isinstance(info, dict) else None
        line = f"{len(steps)}  median {fmt_ns(float(np.median(steps)))}  max {fmt_ns(float(steps.max()))}"
        if steady:
            line += f"  steady {fmt_ns(steady)}"
        spark = sparkline(steps, max(10, min(len(steps), width - 60)))
        t.append(line + "  ")
        t.append(spark, style="green")
        if rank.step_parts and len("steps ") + len(line) + 2 + len(spark) + len(STEPS_HINT) <= room:
            t.append(STEPS_HINT, style="dim")
    else:
        t.append("none marked (no ProfilerStep# or step metadata)")
    mix = step_mix(rank.step_parts, max(10, min(40, width - 60))) if height >= MIX_MIN_HEIGHT else None
    if mix is not None:
        t.append("\n")
        t.append_text(mix)
    trend = history_line(rank.history, room)
    if trend is not None:
        t.append("\n")
        t.append_text(trend)
    # the two problems this tool exists for get a line each, whatever else costs more
    for label, kinds, style in HEADLINES:
        top = next((f for f in rank.findings if f.kind in kinds), None)
        if top is not None:
            t.append("\n")
            t.append(f"{label} ", style=f"bold {style}")
            text, site = _headline(top, room - len(label) - 1)
            t.append(text)
            if site:
                t.append(site, style="dim")
    ex = tot.get("neuron_explorer")
    if isinstance(ex, dict):  # a Neuron Explorer profile: which schema it was read with (key d: the device view)
        sch = ex.get("schema") or {}
        t.append("\n")
        t.append("neuron explorer ", style="dim")
        t.append(f"schema {printable(sch.get('version', '?'))} ({sch.get('declared_by', '?')})")
        sm = ex.get("summary") or {}
        for k, label in (("mfu_estimated_percent", "MFU"), ("mbu_estimated_percent", "MBU")):
            if isinstance(sm.get(k), (int, float)):
                t.append(f"   {label} ", style="dim")
                t.append(f"{sm[k]:.1f}%", style="bold")
        t.append("   d: device view", style="dim")
    for w in rank.warnings:
        t.append("\n")
        t.append("note ", style="dim yellow")
        t.append(printable(w, newlines=True))
    return t


def history_line(runs: list[dict[str, Any]], room: int) -> Text | None:
    """The step-time trend of this script's runs in the run history (`neuron-prof history`), oldest first: the
    median steady step of the oldest and the latest run with a sparkline of every run between, and the same for
    the findings count. None without history; the sparklines shrink (then go) before the numbers do."""
    if not runs:
        return None
    ser = trend_series(runs)
    n = len(runs)
    parts = [("steady", [fmt_ns(ns) for ns in ser["steady_ns"]], ser["steady_ns"], "green"),
             ("findings", [str(k) for k in ser["findings"]], ser["findings"], "yellow")]
    head = f"{n} run{'s' if n != 1 else ''}"
    fixed = len("history ") + len(head) + sum(2 + len(lab) + 1 + len(v[-1]) + (2 + len(v[0]) if n > 1 else 0)
                                              for lab, v, _, _ in parts)
    spark = min(n, (room - fixed) // len(parts)) if n > 1 else 0
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("history ", style="dim")
    t.append(head)
    for label, texts, values, style in parts:
        t.append(f"  {label} ", style="dim")
        if n > 1:
            t.append(texts[0] + " ")
            if spark >= 2:
                t.append(sparkline(np.asarray(values, dtype=np.float64), spark) + " ", style=style)
            else:
                t.append("-> ", style="dim")
        t.append(texts[-1], style="bold")
    return t


def step_mix(steps: Sequence[Mapping[str, Any]], bar: int) -> Text | None:
    """One stacked bar of the mean steady step (all steps when none is steady): each exclusive part of the
    step as a run of cells in its colour, then the parts with their times (`b` draws every step's). None
    without steps."""
    if not steps:
        return None
    pick = [s for s in steps if not s.get("warmup")] or steps
    mean = {k: sum(int(s["parts"][k]) for s in pick) / len(pick)
            for k in STEP_PART_STYLE}
    total = sum(mean.values())
    t = Text()
    t.append("steady step " if len(pick) < len(steps) else "step mix ", style="dim")
    if total <= 0:
        return None
    for text, style in bar_runs(mean, bar):
        t.append(text, style=style)
    for k, v in mean.items():
        if v >= 0.005 * total:
            t.append(f" {k} ", style=STEP_PART_STYLE[k])
            t.append(fmt_ns(v))
    return t


def findings_table(findings: list[Finding], rank: RankData) -> dict[str, np.ndarray]:
    """The findings as table columns (already ranked by cost)."""

    def obj(vals: list[object]) -> np.ndarray:
        a = np.empty(len(vals), dtype=object)
        a[:] = vals
        return a

    targets = [finding_target(f, rank) for f in findings]
    return {
        "severity": obj([f.severity for f in findings]),
        "kind": obj([f.kind for f in findings]),
        "title": obj([strip_site(f.title, f.call_site) for f in findings]),
        "cost_ns": np.array([int(f.cost_ns or 0) for f in findings], dtype=np.int64),
        "share": np.array([float(f.share or 0) for f in findings], dtype=np.float64),
        "count": np.array([int(f.count or 0) for f in findings], dtype=np.int64),
        "call_site": obj([f.call_site for f in findings]),
        "ts_ns": np.array([t[0] if t[0] is not None else -1 for t in targets], dtype=np.int64),
        "track": np.array([t[1] if t[1] is not None else -1 for t in targets], dtype=np.int64),
        "index": np.arange(len(findings), dtype=np.int64),
    }


class OverviewScreen(ViewScreen):
    """Totals and the ranked findings; enter opens the finding's view, t its place on the timeline, b the
    per-step bars."""

    VIEW = "overview"
    TITLE = "Overview"
    HELP = "overview"
    # off the key bar (at 80 columns it would push "? Help" off): the steps line and the help name it
    BINDINGS: ClassVar[list[BindingType]] = [Binding("b", "steps", "Step bars", show=False)]

    def compose_body(self) -> Iterable[Widget]:
        rank = self.rank
        yield Static(summary_text(rank, self.app.size.width, self.app.size.height), id="summary")
        # narrow screens drop kind, count and share (in that order) before the title gets narrower
        cols = [
            Column("severity", "sev", 8, style=lambda v: SEVERITY_STYLE.get(str(v), "")),
            Column("kind", "kind", 18, drop=3),
            Column("title", "finding", 0, min_width=28),
            Column("cost_ns", "cost", 8, fmt_ns, right=True),
            Column("share", "share", 6, fmt_share, right=True, drop=1),
            Column("count", "count", 6, fmt_count, right=True, drop=2),
            Column("call_site", "call site", 20, lambda v: v or "-", clip_left=True, grow=16),
        ]
        self.table = VirtualTable(
            cols, findings_table(rank.findings, rank), filter_key="title", id="findings"
        )
        yield self.table
        yield Detail(id="detail")

    def show_row(self, row: int) -> None:
        pane = self.query_one("#detail", Detail)
        if row < 0:
            pane.show(
                [
                    (
                        "findings",
                        "none: nothing costly was found"
                        if not self.rank.warnings
                        else "not computed (see the notes above)",
                    )
                ]
            )
            return
        f = self.rank.findings[row]
        ev = fmt_evidence(f.evidence)
        pane.show(
            detail(
                ("finding", f.title),
                ("advice", f.advice),
                ("call site", f.call_site),
                ("module", f.module),
                ("evidence", ev),
            )
        )

    def action_steps(self) -> None:
        """b: every profiled step as a stacked bar of its parts (`StepsScreen`)."""
        if self.rank.step_parts:
            self.app.push_screen(StepsScreen(self.rank))
        else:
            self.app.notify("No steps in this trace (no ProfilerStep# or step metadata): nothing to break down.",
                            markup=False)

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        f = self.rank.findings[event.row]
        info = info_of(f.kind)
        view = FAMILY_VIEW.get(info.family) if info is not None else None
        if view is not None:
            self.np_app.show_view(view, focus_key=f.call_site or f.title)
        else:
            self.action_jump()

    def jump_target(self) -> tuple[int | None, int | None]:
        t = self.table
        if t is None or t.row < 0:
            return None, None
        ts, track = int(t.value("ts_ns")), int(t.value("track"))
        return (ts if ts >= 0 else None), (track if track >= 0 else None)
