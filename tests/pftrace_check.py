"""Check a native Perfetto trace (.pftrace) without trace_processor.

Parses the file with the perfetto package's Trace proto and replays, in file order, the rules that Perfetto's
trace_processor (and so the Perfetto UI) applies when importing TrackEvent data: sequence ids and incremental
state, interned ids, track declarations and hierarchy, counter tracks, BEGIN/END nesting per track, flows.
Errors are what the UI would drop or show wrongly; warnings are suspicious but accepted.
See ../shared/design/perfetto-facts.md for the rules. Vendored from ../shared/tools/pftrace_check.py so that
the tests check every .pftrace in a clone without ../shared.

usage: python pftrace_check.py FILE [FILE ...]      exit 1 when any file has errors
"""
import collections
import sys

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent, TracePacket

CLEARED = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
B, E, I, C = (TrackEvent.TYPE_SLICE_BEGIN, TrackEvent.TYPE_SLICE_END,
              TrackEvent.TYPE_INSTANT, TrackEvent.TYPE_COUNTER)


class Seq:
    __slots__ = ('valid', 'names', 'cats', 'dan', 'dsv', 'defaults_clock', 'default_track',
                 'inc_clocks', 'last_ts')

    def __init__(self):
        self.valid = False  # TP: incremental state invalid until first CLEARED
        self.names, self.cats, self.dan, self.dsv = {}, {}, {}, {}
        self.defaults_clock = None
        self.default_track = None
        self.inc_clocks = {}  # seq-scoped incremental clock id -> last value
        self.last_ts = {}


def da_value(a, seq, errs):
    w = a.WhichOneof('value')
    if a.dict_entries:
        return {da_name(x, seq, errs): da_value(x, seq, errs) for x in a.dict_entries}
    if a.array_values:
        return [da_value(x, seq, errs) for x in a.array_values]
    if w == 'string_value_iid':
        if a.string_value_iid not in seq.dsv:
            errs['debug annotation string_value_iid undefined on sequence'] += 1
        return seq.dsv.get(a.string_value_iid)
    if w is None:
        return None
    return getattr(a, w)


def da_name(a, seq, errs):
    if a.HasField('name_iid'):
        if a.name_iid not in seq.dan:
            errs['debug annotation name_iid undefined on sequence'] += 1
        return seq.dan.get(a.name_iid)
    if a.HasField('name'):
        return a.name
    errs['debug annotation without name'] += 1
    return None


def validate(path, canonical=False, verbose=True):
    data = open(path, 'rb').read()
    tr = Trace()
    tr.ParseFromString(data)
    errs = collections.Counter()
    warn = collections.Counter()
    seqs = collections.defaultdict(Seq)
    tracks = {}          # uuid -> (kind, descriptor) ; kind in process/thread/counter/custom
    pid_uuid, tid_uuid = {}, {}
    events = collections.defaultdict(list)  # uuid -> [(ts, idx, type, name, cat, args, flows, tflows)]
    counters_before_decl = 0
    global_clock_snap = {}
    n_te = 0
    for idx, p in enumerate(tr.packet):
        sid = p.trusted_packet_sequence_id if p.HasField('trusted_packet_sequence_id') else 0
        seq = seqs[sid]
        flags = p.sequence_flags
        if flags & CLEARED or p.incremental_state_cleared:
            if not sid:
                errs['SEQ_INCREMENTAL_STATE_CLEARED without trusted_packet_sequence_id'] += 1
            prev = seq
            seq = seqs[sid] = Seq()
            seq.valid = True
        if p.HasField('trace_packet_defaults'):
            d = p.trace_packet_defaults
            seq.defaults_clock = d.timestamp_clock_id if d.HasField('timestamp_clock_id') else None
            if d.HasField('track_event_defaults') and d.track_event_defaults.HasField('track_uuid'):
                seq.default_track = d.track_event_defaults.track_uuid
        if p.HasField('interned_data'):
            if not seq.valid:
                errs['interned_data ignored: incremental state not cleared yet on sequence'] += 1
            else:
                idd = p.interned_data
                for tab, lst, attr in ((seq.names, idd.event_names, 'name'),
                                       (seq.cats, idd.event_categories, 'name'),
                                       (seq.dan, idd.debug_annotation_names, 'name')):
                    for e in lst:
                        if e.iid == 0:
                            errs['interned iid 0 (reserved)'] += 1
                        if e.iid in tab and tab[e.iid] != getattr(e, attr):
                            errs['interned iid redefined with different value'] += 1
                        tab[e.iid] = getattr(e, attr)
                for e in idd.debug_annotation_string_values:
                    seq.dsv[e.iid] = e.str.decode('utf-8', 'replace')
        if p.HasField('clock_snapshot'):
            for c in p.clock_snapshot.clocks:
                if 64 <= c.clock_id < 128:
                    if not sid:
                        errs['sequence-scoped clock without sequence id'] += 1
                    if c.is_incremental:
                        seq.inc_clocks[c.clock_id] = c.timestamp
                else:
                    global_clock_snap[c.clock_id] = c.timestamp
            continue  # TP: a packet with clock_snapshot is consumed by it only
        if flags & NEEDS and not seq.valid:
            errs['packet skipped: SEQ_NEEDS_INCREMENTAL_STATE before CLEARED on its sequence'] += 1
            continue
        # ---- timestamp resolution
        ts = None
        if p.HasField('timestamp'):
            ts = p.timestamp
            cid = p.timestamp_clock_id if p.HasField('timestamp_clock_id') else seq.defaults_clock
            if cid is not None and 64 <= cid < 128:
                if cid in seq.inc_clocks:
                    ts = seq.inc_clocks[cid] + p.timestamp
                    seq.inc_clocks[cid] = ts
                else:
                    errs['timestamp on undefined sequence-scoped clock'] += 1
            elif cid not in (None, 6) and cid not in global_clock_snap and cid >= 64:
                errs['timestamp on undefined global clock'] += 1
            if ts >= 1 << 63:
                errs['timestamp >= 2^63'] += 1
        if p.HasField('track_descriptor'):
            d = p.track_descriptor
            if not d.HasField('uuid'):
                errs['track_descriptor without uuid'] += 1
                continue
            u = d.uuid
            if d.HasField('thread'):
                kind = 'thread'
                if not (d.thread.HasField('pid') and d.thread.HasField('tid')):
                    errs['thread descriptor missing pid/tid'] += 1
                key = (d.thread.pid, d.thread.tid)
                if tid_uuid.setdefault(key, u) != u:
                    errs['two uuids for one (pid,tid): TP treats as tid reuse (2 threads)'] += 1
                if ts is None:
                    warn['thread descriptor packet without timestamp'] += 1
            elif d.HasField('process'):
                kind = 'process'
                if not d.process.HasField('pid'):
                    errs['process descriptor missing pid'] += 1
                if pid_uuid.setdefault(d.process.pid, u) != u:
                    errs['two uuids for one pid: TP treats as pid reuse (2 processes)'] += 1
                if ts is None:
                    warn['process descriptor packet without timestamp'] += 1
            elif d.HasField('counter'):
                kind = 'counter'
            else:
                kind = 'custom'
                if not d.name and u != 0:
                    warn['custom track without name'] += 1
            old = tracks.get(u)
            if old is not None:
                ok = (old[0] == kind and old[1].parent_uuid == d.parent_uuid)
                if not ok:
                    errs['conflicting TrackDescriptor for same uuid'] += 1
            else:
                tracks[u] = (kind, d, idx)
            continue
        if not p.HasField('track_event'):
            continue
        n_te += 1
        te = p.track_event
        if not sid:
            errs['track_event without trusted_packet_sequence_id (dropped by TP)'] += 1
            continue
        if ts is None:
            errs['track_event without timestamp (dropped by TP)'] += 1
            continue
        uses_iid = te.HasField('name_iid') or len(te.category_iids) > 0 or any(
            a.HasField('name_iid') for a in te.debug_annotations)
        if uses_iid and not (flags & NEEDS):
            warn['uses interned ids without SEQ_NEEDS_INCREMENTAL_STATE flag'] += 1
        u = te.track_uuid if te.HasField('track_uuid') else (seq.default_track or 0)
        name = None
        if te.HasField('name_iid'):
            name = seq.names.get(te.name_iid)
            if name is None:
                errs['name_iid undefined on sequence (slice gets NULL name)'] += 1
        elif te.HasField('name'):
            name = te.name
        cat = None
        if te.category_iids:
            cs = []
            for c in te.category_iids:
                if c not in seq.cats:
                    errs['category_iid undefined on sequence'] += 1
                cs.append(seq.cats.get(c, f'unknown({c})'))
            cat = ','.join(cs)
        elif te.categories:
            cat = ','.join(te.categories)
        args = {da_name(a, seq, errs): da_value(a, seq, errs) for a in te.debug_annotations} or None
        if te.type == C:
            t = tracks.get(u)
            if t is None or t[0] != 'counter':
                errs['TYPE_COUNTER on a track not declared (earlier in file) as counter (dropped)'] += 1
            if not (te.HasField('counter_value') or te.HasField('double_counter_value')):
                errs['TYPE_COUNTER without value'] += 1
            val = te.double_counter_value if te.HasField('double_counter_value') else te.counter_value
            events[u].append((ts, idx, C, val, None, None, (), ()))
            continue
        if te.type not in (B, E, I):
            errs[f'unsupported TrackEvent type {te.type}'] += 1
            continue
        events[u].append((ts, idx, te.type, name, cat, args, tuple(te.flow_ids),
                          tuple(te.terminating_flow_ids)))
    # ---- post checks
    for u, (kind, d, idx) in tracks.items():
        pu = d.parent_uuid
        if pu and pu not in tracks:
            errs['parent_uuid refers to undeclared track (TP: hierarchy error, events dropped)'] += 1
        if kind in ('thread', 'process') and pu:
            warn['parent_uuid ignored on thread/process track'] += 1
    slices = []
    flow_pts = collections.defaultdict(list)
    for u, evs in events.items():
        t = tracks.get(u)
        if t is None and u != 0:
            warn['events on uuid without TrackDescriptor (unnamed root track)'] += 1
        if t is not None and t[0] == 'counter' and any(e[2] != C for e in evs):
            errs['slice/instant event on counter track'] += 1
        evs.sort(key=lambda e: (e[0], e[1]))  # TP: sort by ts, ties by file order
        stack = []
        for ts, idx, ty, name, cat, args, fl, tfl in evs:
            if ty == B:
                stack.append([ts, name, cat, args, list(fl), list(tfl), len(stack)])
            elif ty == E:
                if not stack:
                    errs['SLICE_END with no open slice on track (ignored)'] += 1
                    continue
                b = stack.pop()
                if name is not None and b[1] is not None and name != b[1]:
                    warn['END name differs from top-of-stack BEGIN name (TP matches by name)'] += 1
                if args:
                    b[3] = dict(b[3] or {}, **args)
                slices.append((u, b[0], ts - b[0], b[1], b[2], b[3], b[6]))
                for f in b[4]:
                    flow_pts[f].append((b[0], 'out', u))
                for f in b[5]:
                    flow_pts[f].append((b[0], 'term', u))
                for f in fl:
                    flow_pts[f].append((ts, 'out', u))
                for f in tfl:
                    flow_pts[f].append((ts, 'term', u))
            elif ty == I:
                slices.append((u, ts, 0, name, cat, args, len(stack)))
                for f in fl:
                    flow_pts[f].append((ts, 'out', u))
                for f in tfl:
                    flow_pts[f].append((ts, 'term', u))
        if stack:
            warn['slices left open at end of trace (dur = -1 in TP)'] += len(stack)
        if len(stack) > 512 or any(s_[6] >= 512 for s_ in slices[-10:]):
            errs['slice depth > 512 (TP max depth)'] += 1
    n_flows = 0
    for f, pts in flow_pts.items():
        pts.sort()
        if len(pts) < 2:
            warn['flow id with a single endpoint (no arrow)'] += 1
            continue
        if pts[0][1] == 'term':
            errs['terminating_flow_id seen before (in ts order) the flow started: arrow lost'] += 1
        n_flows += len(pts) - 1
    res = dict(file=path, bytes=len(data), packets=len(tr.packet), track_events=n_te,
               tracks=len(tracks), sequences=len([s_ for s_ in seqs if s_]),
               slices=len(slices), flows=n_flows, errors=dict(errs), warnings=dict(warn))
    if verbose:
        for k, v in res.items():
            print(f'{k}: {v}')
    if canonical:
        return res, slices, tracks
    return res


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    bad = 0
    for f in sys.argv[1:]:
        bad += bool(validate(f)['errors'])
    sys.exit(1 if bad else 0)
