"""What the timeline's detail shows about one slice: name, lane, times, arguments, call site, linked
slices. Pure functions over the model and the analysis (one call-site attribution: `analysis.sites_of`);
no Textual.
"""

from __future__ import annotations

from collections.abc import Sequence

from neuron_prof.analysis import Context, fit_site, fmt_value, sites_of
from neuron_prof.analysis.fmt import fmt_ns, fmt_ts, printable
from neuron_prof.model import Trace
from neuron_prof.tui._lane_names import lane_name, lane_title

MAX_LINKED = 12
"""Linked slices listed; the rest are counted."""


def slice_facts(
    trace: Trace, ctx: Context, row: int, origin: int, linked: Sequence[int], width: int = 200
) -> list[tuple[str, str]]:
    """(label, value) lines about slice `row`; times relative to `origin`. Call sites are fitted to `width`."""
    s = trace.slices
    track = int(s.track[row])
    ts, dur = int(s.ts_ns[row]), int(s.dur_ns[row])
    out: list[tuple[str, str]] = [
        ("name", printable(trace.slice_name(row))),
        ("lane", printable(lane_title(trace, track))),
        ("start", fmt_ts(ts, origin)),
        ("duration", fmt_ns(dur)),
        ("category", printable(trace.s(int(s.cat[row])))),
    ]
    site = sites_of(ctx).of_row(row)
    room = max(20, width - 12)
    if site.call_site:
        out.append(("call site", fit_site(site.call_site, room)))
    elif site.reason:
        out.append(("call site", printable(site.reason)))
    for i, frame in enumerate(site.stack):
        out.append(("stack" if i == 0 else "", fit_site(printable(frame), room)))
    for k, v in trace.slice_args(row).items():
        if k == "stack":
            continue
        text = ", ".join(map(str, v)) if isinstance(v, (list, tuple)) else fmt_value(k, v)
        out.append((printable(k), printable(text)))
    for i, r in enumerate(linked[:MAX_LINKED]):
        t = int(s.track[r])
        arrow = "→" if int(s.ts_ns[r]) >= ts else "←"
        out.append((
            "linked" if i == 0 else "",
            f"{arrow} {printable(trace.slice_name(r))}  {lane_name(trace, t)}  "
            f"{fmt_ts(int(s.ts_ns[r]), origin)}  {fmt_ns(int(s.dur_ns[r]))}",
        ))
    if len(linked) > MAX_LINKED:
        out.append(("", f"and {len(linked) - MAX_LINKED} more"))
    return out
