"""`profile(max_events=N)`: keep a finished capture under N events, saying what was dropped.

In this order, each only while the trace is still over N:
1. the deepest Python frames (python_function slices of the host threads), a whole level at a time, deepest
   first: the ops and the frames nearest the program's top stay (an op's exact line is its own ``Call stack``
   argument, so it keeps it);
2. whole steps, sampled evenly: every k-th step kept (the first step always), every event that starts inside
   a dropped step's window removed;
3. the latest events (the trace ends early): what is left still fits the user's size.

What went is written under the metadata key ``Meta.CAPTURE_REDUCED`` (with what Python pruning folded,
`_prune`), and `summary` prints one line of it. Columnar: one nesting pass, then numpy masks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.model import FlowTable, KinetoCat, Meta, Trace, TrackKind
from neuron_prof.model.order import searchsorted


def cap_events(trace: Trace, max_events: int) -> tuple[Trace, dict[str, Any]]:
    """`trace` with at most `max_events` events, and what was dropped ({} when it already fits)."""
    over = trace.n_events - max_events
    if over <= 0:
        return trace, {}
    sl = trace.slices
    keep_s = np.ones(len(sl), bool)
    keep_i = np.ones(len(trace.instants), bool)
    keep_c = np.ones(len(trace.counters), bool)
    out: dict[str, Any] = {"max_events": int(max_events), "events_before": int(trace.n_events)}
    over -= _deep_frames(trace, keep_s, over, out)
    if over > 0:
        over -= _sample_steps(trace, (keep_s, keep_i, keep_c), over, out)
    if over > 0:
        over -= _cut_tail(trace, (keep_s, keep_i, keep_c), over, out)
    return _select(trace, keep_s, keep_i, keep_c), out


def _deep_frames(trace: Trace, keep: np.ndarray, over: int, out: dict[str, Any]) -> int:
    """Drop python_function slices deeper than a depth, the shallowest depth that removes `over` (or all but the
    top level). Returns how many went."""
    from neuron_prof.analysis.sites.nesting import nesting

    py_id = trace.strings.get(KinetoCat.PYTHON)
    if py_id is None:
        return 0
    rows = trace.slices_on(TrackKind.THREAD)
    depth = nesting(trace, rows).depth
    py = trace.slices.cat[rows] == py_id
    d = depth[py]
    if not len(d) or int(d.max()) <= 1:
        return 0
    # slices deeper than each depth: the deepest cut-off that drops enough
    per = np.bincount(d)
    deeper = np.cumsum(per[::-1])[::-1]  # deeper[k] = slices with depth >= k
    ks = np.flatnonzero(deeper[2:] >= over) + 2
    cut = int(ks.max()) if len(ks) else 2  # drop depth >= cut
    gone = rows[py & (depth >= cut)]
    keep[gone] = False
    out["python_frames_deeper_than"] = cut - 1
    out["python_frames_dropped"] = int(len(gone))
    return int(len(gone))


def _sample_steps(trace: Trace, keeps: tuple[np.ndarray, np.ndarray, np.ndarray], over: int,
                  out: dict[str, Any]) -> int:
    """Keep every k-th step (the first always), the smallest k that removes `over` events. Returns how many went."""
    steps = sorted((int(s), int(a), int(b)) for s, a, b in (trace.metadata.get(Meta.STEPS) or []))
    if len(steps) < 2:
        return 0
    starts = np.array([a for _, a, _ in steps], np.int64)
    ends = np.array([b for _, _, b in steps], np.int64)
    which = []  # per table: the step each live event starts in (-1: none)
    per_step = np.zeros(len(steps), np.int64)
    for ts, k in zip(_starts(trace), keeps, strict=True):
        pos = searchsorted(starts, ts, side="right") - 1
        inside = (pos >= 0) & (ts < ends[np.maximum(pos, 0)]) & k
        which.append(np.where(inside, pos, -1))
        per_step += np.bincount(pos[inside], minlength=len(steps))
    for every in range(2, len(steps) + 1):
        dropped = np.arange(len(steps)) % every != 0
        if int(per_step[dropped].sum()) >= over or every == len(steps):
            break
    gone = 0
    for w, k in zip(which, keeps, strict=True):
        hit = (w >= 0) & dropped[np.maximum(w, 0)]
        k[hit] = False
        gone += int(hit.sum())
    out["steps_sampled"] = {"every": every, "kept": [steps[i][0] for i in np.flatnonzero(~dropped).tolist()],
                            "steps_dropped": int(dropped.sum()), "events_dropped": gone}
    return gone


def _cut_tail(trace: Trace, keeps: tuple[np.ndarray, np.ndarray, np.ndarray], over: int,
              out: dict[str, Any]) -> int:
    """Drop the latest `over` events still kept (the trace ends early). Returns how many went."""
    starts = _starts(trace)
    ts = np.concatenate([t[k] for t, k in zip(starts, keeps, strict=True)])
    if not len(ts):
        return 0
    over = min(over, len(ts))
    cut = int(np.partition(ts, len(ts) - over)[len(ts) - over])  # drop events starting at or after this
    gone = 0
    for t, k in zip(starts, keeps, strict=True):
        hit = k & (t >= cut)
        k[hit] = False
        gone += int(hit.sum())
    out["ends_early_ns"] = cut
    out["events_cut_at_end"] = gone
    return gone


def _starts(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start times of the slices, instants and counter samples."""
    return trace.slices.ts_ns, trace.instants.ts_ns, trace.counters.ts_ns


def _select(trace: Trace, keep_s: np.ndarray, keep_i: np.ndarray, keep_c: np.ndarray) -> Trace:
    """The trace with the kept events only; flows between kept slices re-indexed."""
    idx = np.flatnonzero(keep_s)
    return trace.replace(slices=trace.slices.take(idx), instants=trace.instants.take(np.flatnonzero(keep_i)),
                         counters=trace.counters.take(np.flatnonzero(keep_c)), flows=kept_flows(trace, idx))


def kept_flows(trace: Trace, idx: np.ndarray) -> FlowTable:
    """The flows of `trace` whose both ends are among slice rows `idx`, re-indexed to positions in `idx`."""
    smap = np.full(len(trace.slices), -1, np.int64)
    smap[idx] = np.arange(len(idx))
    f = trace.flows
    fk = np.flatnonzero((smap[f.src] >= 0) & (smap[f.dst] >= 0)) if len(f) else np.zeros(0, np.int64)
    flows = f.take(fk)
    return FlowTable(smap[flows.src], smap[flows.dst], flows.flow_id, flows.cat, flows.name)
