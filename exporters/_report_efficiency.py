"""The report's "Efficiency" section: a roofline of the ops and user lines (achieved TFLOP/s against
arithmetic intensity, under the device's compute and memory roofs) and a table of the lines' work and share of
peak. Built from aggregates only: the totals' ``efficiency`` object and the ``lines`` rows
(`analysis.efficiency.rates`)."""

from __future__ import annotations

import math
from typing import Any

from neuron_prof.analysis.fmt import fmt_flops
from neuron_prof.exporters._report_figures import CONFIG, _layout, _t
from neuron_prof.exporters._report_html import empty, note, plot_div, table
from neuron_prof.exporters.efficiency_text import efficiency_lines

Figure = dict[str, Any]
MAX_LINES = 30


def _points(rows: list[dict[str, Any]], label: str) -> tuple[list[float], list[float], list[str]]:
    xs, ys, text = [], [], []
    for r in rows:
        if r.get("tflops") and r.get("intensity"):
            xs.append(float(r["intensity"]))
            ys.append(float(r["tflops"]))
            text.append(_t(f"{r.get(label) or '(no user line)'}: {fmt_flops(r['flops'])}, "
                           f"{100 * r['mfu']:.2f}% MFU" if "mfu" in r else
                           f"{r.get(label) or '(no user line)'}: {fmt_flops(r['flops'])}", 120))
    return xs, ys, text


def roofline(eff: dict[str, Any], lines: list[dict[str, Any]]) -> Figure | None:
    """Ops and lines by arithmetic intensity (FLOP/B) and achieved TFLOP/s on log axes, with the device's
    roofs (memory bandwidth x intensity, capped at each precision's peak) when its peak is known; None when
    nothing has both FLOPs and device time."""
    ox, oy, ot = _points(eff.get("ops") or [], "name")
    lx, ly, lt = _points(lines, "call_site")
    if not ox and not lx:
        return None
    data: list[Figure] = [
        {"type": "scatter", "mode": "markers", "name": "ops", "x": ox, "y": oy, "text": ot,
         "hovertemplate": "%{text}<br>%{x:.3g} FLOP/B, %{y:.3g} TFLOP/s<extra></extra>",
         "marker": {"size": 9, "symbol": "circle", "color": "#1f77b4"}},
        {"type": "scatter", "mode": "markers", "name": "your lines", "x": lx, "y": ly, "text": lt,
         "hovertemplate": "%{text}<br>%{x:.3g} FLOP/B, %{y:.3g} TFLOP/s<extra></extra>",
         "marker": {"size": 11, "symbol": "diamond", "color": "#ff7f0e"}},
    ]
    peak = eff.get("peak")
    xs = ox + lx
    lo, hi = min(xs) / 4, max(xs) * 4
    if peak:
        bw = float(peak["memory_gb_per_s"]) / 1e3  # TB/s: TFLOP/s per FLOP/B
        for _prec, tf in sorted(peak["tflops"].items(), key=lambda kv: -kv[1]):
            ridge = tf / bw
            lo, hi = min(lo, ridge / 8), max(hi, ridge * 8)
        grid = [lo * (hi / lo) ** (i / 60) for i in range(61)]
        for prec, tf in sorted(peak["tflops"].items(), key=lambda kv: -kv[1]):
            data.append({"type": "scatter", "mode": "lines", "name": f"{prec} roof ({tf:g} TFLOP/s)",
                         "x": grid, "y": [min(tf, bw * x) for x in grid], "hoverinfo": "skip",
                         "line": {"width": 1.5, "dash": "dot" if prec not in ("bf16", "fp32") else "solid"}})
    lay = _layout(420, "arithmetic intensity (FLOP per byte moved)", "achieved TFLOP/s")
    lay["xaxis"].update(type="log", range=[math.log10(lo), math.log10(hi)])
    lay["yaxis"]["type"] = "log"
    return {"data": data, "layout": lay, "config": CONFIG}


def efficiency_section(totals: dict[str, Any] | None, lines: list[dict[str, Any]], figures: dict[str, Any]) -> str:
    """The section (figure id ``fig-roofline``)."""
    eff = (totals or {}).get("efficiency") or {}
    if not eff.get("counted_calls"):
        msg = empty("No op with recorded shapes (capture with record_shapes=True to count FLOPs and bytes).")
        return (note(" ".join(efficiency_lines(eff))) if eff.get("explorer") else "") + msg
    parts = [note(" ".join(efficiency_lines(eff)))]
    fig = roofline(eff, lines)
    if fig is None:
        parts.append(empty("No device time for the counted ops (a CPU-only run): FLOPs and bytes only."))
    else:
        figures["fig-roofline"] = fig
        src = (eff.get("peak") or {}).get("source")
        parts.append(note("Each op and line at its arithmetic intensity and achieved rate over its device time; "
                          "under the sloped roof it is bound by memory, under the flat one by compute. "
                          + (f"Peaks: {src}." if src else "The device's peak is not in the table: no roofs."))
                     + plot_div("fig-roofline"))
    rows = [(ln.get("call_site") or ln.get("function") or "(no user line)", fmt_flops(ln.get("flops", 0)),
             f"{ln['intensity']:.3g}" if "intensity" in ln else "-",
             f"{ln['tflops']:.3g}" if "tflops" in ln else "-",
             f"{100 * ln['mfu']:.2f}%" if "mfu" in ln else "-", f"{100 * ln['mbu']:.2f}%" if "mbu" in ln else "-")
            for ln in lines[:MAX_LINES] if ln.get("flops") or ln.get("bytes")]
    if rows:
        parts.append(table(("line", "work", "FLOP/B", "TFLOP/s", "MFU", "MBU"), rows, num=(1, 2, 3, 4, 5)))
    return "".join(parts)
