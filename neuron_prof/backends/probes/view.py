"""HostView: read-only numpy view of the events already in a TraceBuilder (Kineto's, converted by capture).

Probes join their own records with these events (op spans, stacks, modules) without building a Trace.
Columns are copied once per contribute(); args are parsed only for the rows a probe asks about.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from neuron_prof.model import KinetoCat, TraceBuilder
from neuron_prof.model.callsite import MODULE_PREFIX, NO_STACK, Site, site_from_stack, stack_is_exact
from neuron_prof.model.order import searchsorted, sorted_unique

CALL_STACK = "Call stack"


class HostView:
    """Columns of the builder's slices at the time of the call, plus lookups probes need."""

    def __init__(self, builder: TraceBuilder) -> None:
        self.builder = builder
        self.strings = builder.strings
        self.ts = np.asarray(builder.s_ts, dtype=np.int64)
        self.dur = np.asarray(builder.s_dur, dtype=np.int64)
        self.end = self.ts + self.dur
        self.track = np.asarray(builder.s_track, dtype=np.int32)
        self.name = np.asarray(builder.s_name, dtype=np.int32)
        self.cat = np.asarray(builder.s_cat, dtype=np.int32)
        self.args_idx = np.asarray(builder.s_args, dtype=np.int64)
        self.exact = stack_is_exact(builder.metadata)
        """The ``Call stack`` lines are the lines executed (capture rewrote them); else no call sites."""
        self._modules: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
        self._by_track: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
        self._ops: Any = None

    def __len__(self) -> int:
        return len(self.ts)

    # ---- selection ----------------------------------------------------------------------------
    def cat_rows(self, *cats: str) -> np.ndarray:
        """Rows whose category is one of `cats`, in time order."""
        ids = [self.strings.get(c) for c in cats]
        rows = np.flatnonzero(np.isin(self.cat, [i for i in ids if i is not None]))
        return rows[np.argsort(self.ts[rows], kind="stable")]

    def name_rows(self, predicate: Callable[[str], bool], rows: np.ndarray | None = None) -> np.ndarray:
        """Rows (of `rows`, default all) whose name satisfies `predicate`, in time order (tested once per name)."""
        if rows is None:
            rows = np.arange(len(self.ts))
        names = self.name[rows]
        uniq = sorted_unique(names)
        keep = uniq[[predicate(self.strings[int(i)]) for i in uniq]] if len(uniq) else uniq
        sel = rows[np.isin(names, keep)]
        return sel[np.argsort(self.ts[sel], kind="stable")]

    def name_of(self, row: int) -> str:
        return self.strings[int(self.name[row])]

    def args(self, row: int) -> dict[str, Any]:
        """The args dict of slice `row` ({} when none)."""
        return self.builder.args.get(int(self.args_idx[row]))

    # ---- where a host op came from -------------------------------------------------------------
    def site(self, row: int, args: dict[str, Any] | None = None) -> Site:
        """Where in the user's code host slice `row` came from: its own ``Call stack``, else the nearest
        enclosing host op's (capture writes exact stacks on top-level ops only; see model.callsite)."""
        a = self.args(row) if args is None else args
        got = self._site_of(a)
        if got is not None:
            return got
        for r in self._enclosing_ops(row)[::-1]:
            got = self._site_of(self.args(int(r)))
            if got is not None:
                return got
        return NO_STACK

    def site_at(self, t_ns: int, tid: Any) -> Site:
        """The Site of the innermost host op running on thread `tid` at `t_ns` (NO_STACK when none)."""
        if self._ops is None:
            self._ops = ThreadOps(self)
        r = self._ops.innermost(tid, t_ns)
        return self.site(r) if r >= 0 else NO_STACK

    def _site_of(self, a: dict[str, Any]) -> Site | None:
        stack = a.get(CALL_STACK)
        if isinstance(stack, str) and stack:
            return site_from_stack(stack, self.exact, None)
        return None

    def _enclosing_ops(self, row: int) -> np.ndarray:
        """cpu_op rows on `row`'s track that enclose it, outermost first."""
        if self._by_track is None:
            self._by_track = self._index(self.cat_rows(KinetoCat.CPU_OP))
        got = self._by_track.get(int(self.track[row]))
        if got is None:
            return np.empty(0, dtype=np.int64)
        r, ts, end = got
        m = (ts <= self.ts[row]) & (end >= self.end[row]) & (r != row)
        return r[m]  # time order = outermost first

    def _index(self, rows: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        out = {}
        for t in sorted_unique(self.track[rows]):
            r = rows[self.track[rows] == t]
            out[int(t)] = (r, self.ts[r], self.end[r])
        return out

    def modules_at(self, t0: int, t1: int) -> str:
        """Module path of the nn.Module spans enclosing [t0, t1] on the thread that has the deepest such path."""
        if self._modules is None:
            rows = self.cat_rows(KinetoCat.PYTHON)
            self._modules = self._index(self.name_rows(lambda s: s.startswith(MODULE_PREFIX), rows))
        best: list[int] = []
        for rows, a, b in self._modules.values():
            enc = rows[(a <= t0) & (b >= t1)]
            if len(enc) > len(best):
                best = [int(r) for r in enc]
        return "/".join(self.name_of(r)[len(MODULE_PREFIX):] for r in best)


class ThreadOps:
    """Per-thread sorted cpu_op spans: innermost op containing a host instant (for flows and joins)."""

    def __init__(self, view: HostView) -> None:
        self.view = view
        rows = view.cat_rows(KinetoCat.CPU_OP)
        tracks = view.builder.tracks
        self._by_tid: dict[Any, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        by_track: dict[int, list[int]] = {}
        for r in rows:
            by_track.setdefault(int(view.track[r]), []).append(int(r))
        for t, rs in by_track.items():
            arr = np.asarray(rs, dtype=np.int64)
            tid = tracks[t].tid
            self._by_tid[tid] = (arr, view.ts[arr], view.end[arr])
            if isinstance(tid, int):
                self._by_tid.setdefault(str(tid), self._by_tid[tid])

    def innermost(self, tid: Any, t_ns: int, named: bool = False) -> int:
        """Row of the innermost cpu_op on thread `tid` running at `t_ns` (-1 when none).

        `named`: skip dispatcher spans without a namespace ("PythonSubclass"), i.e. only "ns::op" names.
        """
        got = self._by_tid.get(tid)
        if got is None:
            got = self._by_tid.get(str(tid))
            if got is None:
                return -1
        rows, ts, end = got
        i = int(searchsorted(ts, t_ns, side="right")) - 1
        best = -1
        # Walk back over earlier-starting spans: the latest-starting one that still covers t_ns is innermost.
        for j in range(i, max(i - 256, -1), -1):
            if end[j] >= t_ns and (not named or "::" in self.view.name_of(int(rows[j]))):
                best = int(rows[j])
                break
        return best

    def any_thread(self, t_ns: int) -> int:
        """Innermost cpu_op at `t_ns` on any thread (first match)."""
        for tid in list(self._by_tid):
            r = self.innermost(tid, t_ns)
            if r >= 0:
                return r
        return -1
