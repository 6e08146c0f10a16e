"""HostView: read-only numpy view of the events already in a TraceBuilder (Kineto's, converted by capture).

Probes join their own records with these events (op spans, stacks, modules) without building a Trace.
Columns are copied once per contribute(); args are parsed only for the rows a probe asks about.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from neuron_prof.backends.probes.callsite import MODULE_PREFIX, frame_site, parse_call_stack
from neuron_prof.model import KinetoCat, TraceBuilder

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
        self._modules: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
        self._pyfuncs: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None

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
        uniq = np.unique(names)
        keep = uniq[[predicate(self.strings[int(i)]) for i in uniq]] if len(uniq) else uniq
        sel = rows[np.isin(names, keep)]
        return sel[np.argsort(self.ts[sel], kind="stable")]

    def name_of(self, row: int) -> str:
        return self.strings[int(self.name[row])]

    def args(self, row: int) -> dict[str, Any]:
        """The args dict of slice `row` ({} when none)."""
        return self.builder.args.get(int(self.args_idx[row]))

    # ---- where a host op came from -------------------------------------------------------------
    def site_and_module(self, row: int, args: dict[str, Any] | None = None) -> tuple[str, str]:
        """(call_site, module path) of host slice `row`: from its Call stack, else enclosing python spans."""
        a = self.args(row) if args is None else args
        stack = a.get(CALL_STACK)
        if isinstance(stack, str) and stack:
            site, module = parse_call_stack(stack)
            if site or module:
                return site, module
        return self._enclosing_site(row), self._enclosing_modules(row)

    def _python_index(self) -> tuple[dict[int, Any], dict[int, Any]]:
        if self._modules is None or self._pyfuncs is None:
            rows = self.cat_rows(KinetoCat.PYTHON)
            mods = self.name_rows(lambda s: s.startswith(MODULE_PREFIX), rows)
            funcs = self.name_rows(lambda s: bool(frame_site(s)), rows)
            self._modules = self._by_track(mods)
            self._pyfuncs = self._by_track(funcs)
        return self._modules, self._pyfuncs

    def _by_track(self, rows: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        out = {}
        for t in np.unique(self.track[rows]):
            r = rows[self.track[rows] == t]
            out[int(t)] = (r, self.ts[r], self.end[r])
        return out

    def _enclosing(self, index: dict[int, Any], row: int) -> np.ndarray:
        got = index.get(int(self.track[row]))
        if got is None:
            return np.empty(0, dtype=np.int64)
        r, ts, end = got
        m = (ts <= self.ts[row]) & (end >= self.end[row])
        return r[m]  # time order = outermost first

    def _enclosing_modules(self, row: int) -> str:
        mods, _ = self._python_index()
        return "/".join(self.name_of(int(r))[len(MODULE_PREFIX):] for r in self._enclosing(mods, row))

    def _enclosing_site(self, row: int) -> str:
        _, funcs = self._python_index()
        enc = self._enclosing(funcs, row)
        return frame_site(self.name_of(int(enc[-1]))) if len(enc) else ""
