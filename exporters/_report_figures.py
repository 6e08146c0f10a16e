"""Plotly figures for the HTML report, as plain figure dicts (data, layout, config).

Plain dicts, not plotly.graph_objects: building and validating graph objects costs seconds on big traces,
and the page only needs the JSON. tests/test_report.py validates every dict with plotly.graph_objects.

Plotly renders a subset of HTML inside text, tick labels and hover labels, so every trace string is
HTML-escaped here (`_t`) before it enters a figure: a name like `<b>` shows as the literal text `<b>`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from neuron_prof.analysis.fmt import cut, fit_site
from neuron_prof.exporters._report_data import Collectives, Series, Utilisation, Waterfall, downsample_minmax
from neuron_prof.history import trend_series

Figure = dict[str, Any]
MAX_LINES = 16
MAX_POINTS = 5000
_SEVERITY_COLOURS = {"critical": "#c0392b", "warning": "#e67e22", "info": "#2e86c1"}
_PALETTE = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
]
CONFIG: Figure = {
    "displaylogo": False,
    "responsive": True,
    "scrollZoom": False,
    "modeBarButtonsToRemove": ["sendDataToCloud", "lasso2d", "select2d"],
}


def _t(s: object, limit: int = 0) -> str:
    """Trace text made safe for plotly's HTML-ish labels (cut to `limit` characters first)."""
    s = cut(str(s), limit) if limit else str(s)
    # quote=False: plotly decodes only a few named entities (&lt; &gt; &amp; ...) and would show "&quot;"
    # literally; quotes are harmless once "<" is escaped, since no tag (and so no attribute) can form.
    return html.escape(s, quote=False)


def _nums(a: np.ndarray, digits: int = 6) -> list[float | None]:
    """JSON-safe numbers (NaN/inf become gaps)."""
    out = np.round(np.asarray(a, dtype=np.float64), digits)
    return [None if not math.isfinite(x) else x for x in out.tolist()]


def _layout(
    height: int, xtitle: str, ytitle: str, xrange: tuple[float, float] | None = None, **extra: Any
) -> Figure:
    legend = extra.get("showlegend") is not False
    lay: Figure = {
        # a legend goes under the x axis: above the plot it ran under plotly's toolbar (top right)
        "height": height + (40 if legend else 0),
        "margin": {"l": 70, "r": 20, "t": 30, "b": 90 if legend else 50},
        "font": {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12},
        "paper_bgcolor": "white",
        "plot_bgcolor": "#fbfbfb",
        "hovermode": "closest",
        "xaxis": {"title": {"text": xtitle}, "zeroline": False, "gridcolor": "#e5e5e5"},
        "yaxis": {"title": {"text": ytitle}, "zeroline": False, "gridcolor": "#e5e5e5", "automargin": True},
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 0, "yref": "container", "yanchor": "bottom"},
    }
    if xrange is not None and xrange[1] > xrange[0]:
        pad = 0.01 * (xrange[1] - xrange[0])
        lay["xaxis"]["range"] = [xrange[0] - pad, xrange[1] + pad]
    lay.update(extra)
    return lay


def _fig(data: list[Figure], layout: Figure) -> Figure:
    return {"data": data, "layout": layout, "config": CONFIG}


def findings_cost(findings: Sequence[dict[str, Any]], top: int = 15) -> Figure | None:
    """Horizontal bars: the costliest findings, coloured by severity."""
    rows = [f for f in findings if (f.get("cost_ns") or 0) > 0][:top]
    if not rows:
        return None
    rows = rows[::-1]  # plotly draws the first category at the bottom
    # short labels that fit the axis whole (kind and line); the title is the hover text and the table's row
    labels = [
        f"{i}. {_t(f.get('kind', ''))}" + (f" · {_t(fit_site(str(f['call_site']).rsplit('/', 1)[-1], 28))}"
                                           if f.get("call_site") else "")
        for i, f in zip(range(len(rows), 0, -1), rows, strict=True)
    ]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "y": labels,
            "x": [f["cost_ns"] / 1e6 for f in rows],
            "marker": {"color": [_SEVERITY_COLOURS.get(str(f.get("severity")), "#7f8c8d") for f in rows]},
            "customdata": [[_t(f.get("title", ""), 200), _t(f.get("severity", ""))] for f in rows],
            "hovertemplate": "%{customdata[0]}<br>%{customdata[1]}: %{x:.3f} ms<extra></extra>",
        }
    ]
    return _fig(data, _layout(120 + 26 * len(rows), "time cost (ms)", "", showlegend=False))


def compile_waterfall(w: Waterfall) -> Figure | None:
    """Each compile as a bar from its start to its end, on its op's row (the costliest ops first, the rest
    folded into one row); the signature, call site and reason show on hover."""
    n = len(w.name)
    if not n:
        return None
    labels = [_t(r, 60) for r in w.rows]
    data = []
    for k, group in enumerate(sorted(set(w.group))):
        idx = [i for i in range(n) if w.group[i] == group]
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": _t(group),
                "y": [labels[int(w.row_of[i])] for i in idx],
                "x": _nums(w.dur_ms[idx]),
                "base": _nums(w.start_ms[idx]),
                "width": 0.7,
                "marker": {"color": _PALETTE[k % len(_PALETTE)], "line": {"width": 0}},
                "customdata": [
                    [_t(w.name[i], 80), _t(w.detail[i], 300).replace(" | ", "<br>"), round(float(w.dur_ms[i]), 3),
                     round(float(w.start_ms[i]), 3)]
                    for i in idx
                ],
                "hovertemplate": "%{customdata[0]}: %{customdata[2]} ms at %{customdata[3]} ms"
                "<br>%{customdata[1]}<extra>%{fullData.name}</extra>",
            }
        )
    # one row per op: ~20 rows, so the page stays short and the time axis in view
    lay = _layout(150 + 26 * len(labels), "time since start (ms)", "", barmode="overlay")
    lay["yaxis"].update(
        {"autorange": "reversed", "categoryorder": "array", "categoryarray": labels, "tickfont": {"size": 11}}
    )
    return _fig(data, lay)


def hot_spots(findings: Sequence[dict[str, Any]], top: int = 20) -> Figure | None:
    """Fallback time per call site (from the cpu_fallback findings)."""
    rows = sorted(findings, key=lambda f: -(f.get("cost_ns") or 0))[:top][::-1]
    if not rows:
        return None
    labels = [
        f"{i}. {_t(f.get('call_site') or f.get('title', ''), 60)}"
        for i, f in zip(range(len(rows), 0, -1), rows, strict=True)
    ]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "y": labels,
            "x": [(f.get("cost_ns") or 0) / 1e6 for f in rows],
            "marker": {"color": "#e67e22"},
            "customdata": [[_t(f.get("title", ""), 120), int(f.get("count") or 0)] for f in rows],
            "hovertemplate": "%{customdata[0]}<br>%{customdata[1]} calls, %{x:.3f} ms<extra></extra>",
        }
    ]
    return _fig(data, _layout(120 + 26 * len(rows), "time in CPU fallbacks (ms)", "", showlegend=False))


def utilisation(u: Utilisation) -> Figure | None:
    """Busy fraction of each device per time bin (mean and range when there are many devices)."""
    if not u.busy:
        return None
    x = _nums(u.t_ms)
    data: list[Figure] = []
    if len(u.busy) <= MAX_LINES:
        for k, (name, b) in enumerate(u.busy.items()):
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": _t(name, 40),
                    "x": x,
                    "y": _nums(b * 100, 3),
                    "line": {"width": 1.5, "color": _PALETTE[k % len(_PALETTE)], "shape": "hvh"},
                    "hovertemplate": f"{_t(name, 40)}<br>%{{x:.2f}} ms: %{{y:.1f}}% busy<extra></extra>",
                }
            )
    else:
        m = np.vstack(list(u.busy.values())) * 100
        data += [
            {
                "type": "scatter",
                "mode": "lines",
                "name": "max",
                "x": x,
                "y": _nums(m.max(0), 3),
                "line": {"width": 0.5, "color": "#9ecae1"},
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": "min",
                "x": x,
                "y": _nums(m.min(0), 3),
                "fill": "tonexty",
                "line": {"width": 0.5, "color": "#9ecae1"},
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"mean of {len(u.busy)} devices",
                "x": x,
                "y": _nums(m.mean(0), 3),
                "line": {"width": 2, "color": "#08519c"},
            },
        ]
    lay = _layout(360, "time since start (ms)", "busy (% of each bin)")
    lay["yaxis"]["range"] = [0, 105]
    return _fig(data, lay)


def _byte_unit(peak: float) -> tuple[str, float]:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if peak >= scale:
            return unit, float(scale)
    return "bytes", 1.0


def memory(series: Sequence[Series], span_ms: float | None = None) -> Figure | None:
    """Memory counters over time, as steps (a counter holds its value until the next sample)."""
    if not series:
        return None
    unit, scale = _byte_unit(max(s.peak for s in series))
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": _t(s.name, 50),
            "x": _nums(s.t_ms),
            "y": _nums(s.value / scale, 4),
            "line": {"shape": "hv", "width": 1.5, "color": _PALETTE[k % len(_PALETTE)]},
            "hovertemplate": f"{_t(s.name, 50)}<br>%{{x:.3f}} ms: %{{y:.2f}} {unit}<extra></extra>",
        }
        for k, s in enumerate(series)
    ]
    return _fig(data, _layout(380, "time since start (ms)", unit, xrange=(0.0, span_ms) if span_ms else None))


def collective_bandwidth(c: Collectives, span_ms: float | None = None) -> Figure | None:
    """One point per collective: bandwidth (or duration, when sizes are unknown) over time, per op.

    Resolution: at most MAX_POINTS points, shared evenly by the ops; an op with more collectives than its
    share is cut in time-ordered buckets and each bucket shows its lowest and highest collective (the slowest
    and fastest survive, `downsample_minmax`)."""
    n = len(c.op)
    if not n:
        return None
    have_bw = bool(np.isfinite(c.gbps).any())
    y_all = c.gbps if have_bw else c.dur_ms
    ops = np.array(c.op, dtype=object)
    names = sorted(set(c.op))
    share = max(2, MAX_POINTS // len(names))
    data = []
    for k, op in enumerate(names):
        idx = np.flatnonzero(ops == op)
        idx = idx[downsample_minmax(np.nan_to_num(y_all[idx], nan=-1.0), share)]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": _t(op, 40),
                "x": _nums(c.start_ms[idx]),
                "y": _nums(y_all[idx], 4),
                "marker": {"size": 6, "color": _PALETTE[k % len(_PALETTE)], "opacity": 0.8},
                "customdata": [
                    [int(c.rank[i]), _nums(c.nbytes[i : i + 1], 0)[0], round(float(c.dur_ms[i]), 4)]
                    for i in idx.tolist()
                ],
                "hovertemplate": (
                    f"{_t(op, 40)} on rank %{{customdata[0]}}<br>%{{customdata[1]}} bytes in "
                    "%{customdata[2]} ms<br>%{y:.3f}" + (" GB/s" if have_bw else " ms") + "<extra></extra>"
                ),
            }
        )
    ytitle = "algorithm bandwidth (GB/s)" if have_bw else "duration (ms): no message sizes in this trace"
    return _fig(
        data, _layout(380, "time since start (ms)", ytitle, xrange=(0.0, span_ms) if span_ms else None)
    )


STEP_COLOURS = {"compile": "#d62728", "fallback": "#ff7f0e", "sync": "#9467bd", "collective": "#17becf",
                "host": "#1f77b4", "device": "#2ca02c", "idle": "#c7c7c7"}
"""One colour per exclusive part of a step (`summary --json` `step_breakdown[].parts`)."""


def step_breakdown(steps: Sequence[dict[str, Any]], parts: Sequence[str]) -> Figure | None:
    """Stacked bars, one per step: its exclusive parts (compile, fallback, sync, collectives, host, device,
    idle) in ms, adding up to the step's duration."""
    if not steps:
        return None
    x = [f"{'w' if s.get('warmup') else ''}{s['step']}" for s in steps]
    data = [
        {
            "type": "bar",
            "name": p,
            "x": x,
            "y": [s["parts"].get(p, 0) / 1e6 for s in steps],
            "marker": {"color": STEP_COLOURS.get(p, "#7f7f7f")},
            "hovertemplate": f"step %{{x}}: {p} %{{y:.3f}} ms<extra></extra>",
        }
        for p in parts
        if any(s["parts"].get(p) for s in steps)
    ]
    lay = _layout(360, "step (w: warm-up)", "time (ms)", barmode="stack")
    lay["xaxis"]["type"] = "category"
    return _fig(data, lay)


def step_trend(runs: Sequence[dict[str, Any]]) -> Figure | None:
    """The steady step time of each recorded run of a script (the run history's rows, oldest first) and, on a
    second axis, how many findings it had; its git branch and commit on hover."""
    runs = [r for r in runs if r.get("steady_step_ns")]
    if not runs:
        return None
    ser = trend_series(runs)
    where = [_t(w) for w in ser["where"]]
    data: list[Figure] = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "median steady step (ms)",
            "x": ser["run"],
            "y": [ns / 1e6 for ns in ser["steady_ns"]],
            "customdata": where,
            "hovertemplate": "run %{x} (%{customdata}): %{y:.3f} ms<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "findings",
            "x": ser["run"],
            "y": ser["findings"],
            "yaxis": "y2",
            "line": {"dash": "dot", "color": "#7f7f7f"},
            "marker": {"symbol": "square", "color": "#7f7f7f"},
            "customdata": where,
            "hovertemplate": "run %{x} (%{customdata}): %{y} findings<extra></extra>",
        },
    ]
    lay = _layout(300, "recorded run (oldest first)", "median steady step (ms)")
    lay["xaxis"]["type"] = "category"
    lay["yaxis2"] = {"title": {"text": "findings"}, "overlaying": "y", "side": "right", "rangemode": "tozero",
                     "showgrid": False, "zeroline": False}
    lay["margin"]["r"] = 60
    return _fig(data, lay)
