"""Append a finished Trace to a TraceBuilder (one profiler cycle into the session's builder).

The session keeps one builder for all cycles, because backends join their probe events with Kineto's
there (`contribute`). Each cycle is loaded with the fast chunked JSON loader into its own Trace, then
appended here: processes and tracks replayed through the builder's public API (so later cycles and the
backend find the same tracks), string ids remapped with one numpy take per column.
"""

from __future__ import annotations

import numpy as np

from neuron_prof.model import Meta, Trace, TraceBuilder


def append_trace(builder: TraceBuilder, trace: Trace) -> None:
    """Add every process, track, event, flow and metadata key of `trace` after what `builder` holds."""
    b = builder
    # Strings: one new id per id of the trace's table.
    smap = np.fromiter((b.strings.intern(s) for s in trace.strings.as_list()), dtype=np.int32,
                       count=len(trace.strings))
    pmap = [b.process(p.pid, p.name, kind=p.kind, rank=p.rank, sort_index=p.sort_index, labels=p.labels or None)
            for p in trace.processes]
    tmap = np.array([b.track(pmap[t.process], t.name, t.kind, tid=t.tid, unit=t.unit, sort_index=t.sort_index)
                     for t in trace.tracks], dtype=np.int32)
    if not len(tmap):
        tmap = np.zeros(1, dtype=np.int32)

    # Args: copied as raw JSON; indices shift by what the builder already holds (-1 stays "no args").
    a0 = len(b.args)
    for i in range(len(trace.args)):
        b.args.add_raw(trace.args.raw(i))

    def shift_args(col: np.ndarray) -> list[int]:
        return np.where(col >= 0, col + a0, -1).tolist()  # type: ignore[no-any-return]

    s0 = b.n_slices
    sl = trace.slices
    b.s_ts.extend(sl.ts_ns.tolist())
    b.s_dur.extend(sl.dur_ns.tolist())
    b.s_track.extend(tmap[sl.track].tolist())
    b.s_name.extend(smap[sl.name].tolist())
    b.s_cat.extend(smap[sl.cat].tolist())
    b.s_args.extend(shift_args(sl.args))
    ins = trace.instants
    b.i_ts.extend(ins.ts_ns.tolist())
    b.i_track.extend(tmap[ins.track].tolist())
    b.i_name.extend(smap[ins.name].tolist())
    b.i_cat.extend(smap[ins.cat].tolist())
    b.i_args.extend(shift_args(ins.args))
    c = trace.counters
    b.c_ts.extend(c.ts_ns.tolist())
    b.c_track.extend(tmap[c.track].tolist())
    b.c_value.extend(c.value.tolist())
    f = trace.flows
    # Flow ids stay unique across cycles: Kineto restarts its correlation ids in each one.
    f_off = max(b.f_id, default=0)
    b.f_src.extend((f.src + s0).tolist())
    b.f_dst.extend((f.dst + s0).tolist())
    b.f_id.extend((f.flow_id + f_off).tolist())
    b.f_cat.extend(smap[f.cat].tolist())
    b.f_name.extend(smap[f.name].tolist())

    md = dict(trace.metadata)
    warnings = md.pop(Meta.WARNINGS, None)
    if warnings:
        b.metadata.setdefault(Meta.WARNINGS, []).extend(warnings)
    md.pop(Meta.SOURCE, None)
    # Kineto's own file losing an event (torch writes an unescaped name now and then) is in the load warnings
    # above; `partial` describes a trace file as read later (docs/check.md), not the capture.
    md.pop(Meta.PARTIAL, None)
    b.metadata.update(md)
