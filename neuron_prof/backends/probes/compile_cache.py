"""Eager first-call compile stalls from a backend's compilation-cache entries (torch-neuronx's NEFF cache).

Source: ``_get_compilation_cache_entries()`` → ``{cache_key, neff_size_bytes, access_count,
compilation_time_ms}``; an eager op's key starts with the op name, its suffix format is undocumented: the op is
the longest op name of the trace the key starts with (`_compat.key_ops`), nothing is parsed after it. Entries that appear during the capture
are this capture's compiles (0 ms: loaded from the disk cache). The entry says nothing about *when* or
*where*: each is placed on the first not-yet-claimed call of its op in the profiler's op spans that lasted at
least as long as the compile (the host blocks on it), which gives time, call site and module path.
Keys that name no host op (graphs) are placed on the first ``Torch-Compiled Region`` / ``CompiledFunction``
span that can hold them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from neuron_prof.backends._compat import key_ops, op_key
from neuron_prof.backends.probes._common import probe_track, site_args, step_of
from neuron_prof.backends.probes._hostops import top_level_same_key
from neuron_prof.backends.probes._probe import Probe
from neuron_prof.model import Arg, Cat, KinetoCat, TrackKind

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes._view import HostView
    from neuron_prof.model import TraceBuilder

_GRAPH_SPANS = ("Torch-Compiled Region", "CompiledFunction")
UNPLACED = "compile_cache_unplaced"


class CompileCacheProbe(Probe):
    """New cache entries during the capture → one compile event each, placed on the op call that paid for it."""

    name = "compile_cache"

    def __init__(self, entries: Callable[[], list[dict[str, Any]] | None],
                 sync: Callable[[], Any] | None = None,
                 samples: Callable[[], list[tuple[int, float]] | None] | None = None,
                 graph_names: Callable[[], Sequence[str]] | None = None) -> None:
        super().__init__()
        self._entries, self._sync, self._samples = entries, sync, samples
        self._graph_names = graph_names
        self.graphs: list[str] = []
        self._before: dict[str, int] = {}
        self.new: list[dict[str, Any]] = []
        self.hits = 0
        self._last_sample = -1
        self.intervals: list[tuple[int, int, float]] = []
        """(Unix start ns, Unix end ns, ns) of compiles from the runtime's CompilationTime samples, when given."""

    def start(self, ctx: CaptureContext) -> None:
        self._before = {str(e.get("cache_key")): int(e.get("access_count") or 0) for e in self._entries() or ()}
        if self._samples is not None:
            got = self._samples() or []
            self._last_sample = max((t for t, _ in got), default=-1)

    def stop(self, ctx: CaptureContext) -> None:
        if self._sync is not None:
            self._sync()  # compiles run on a background thread: let them finish
        after = self._entries() or []
        self.new = [e for e in after if str(e.get("cache_key")) not in self._before]
        if self._samples is not None:
            # samples carry the steady clock (CLOCK_MONOTONIC): shift to Unix ns; a sample is taken at compile end
            offset = time.time_ns() - time.monotonic_ns()
            self.intervals = [(int(t + offset - v), int(t + offset), v) for t, v in (self._samples() or [])
                              if t > self._last_sample]
        self.graphs = list(self._graph_names() or ()) if self._graph_names is not None else []
        self.hits = sum(max(0, int(e.get("access_count") or 0) - self._before.get(str(e.get("cache_key")), 0))
                        for e in after if str(e.get("cache_key")) in self._before)

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        placed, unplaced = place(view, self.new, self.intervals, self.graphs)
        builder.metadata["compile_cache"] = {"new_entries": len(self.new), "hits_on_old_entries": self.hits,
                                             "unplaced": len(unplaced)}
        if unplaced:
            builder.metadata[UNPLACED] = [str(e.get("cache_key")) for e in unplaced]
        if not placed:
            return
        track = probe_track(builder, ctx, TrackKind.COMPILE)
        for row, e, kind, exact, name in placed:
            ms = float(e.get("compilation_time_ms") or 0)
            dur = int(ms * 1e6) if ms > 0 else 0
            cache = "miss" if ms > 0 else "disk"
            ts = int(view.ts[row])
            if exact is not None:
                ts, dur = exact
            s = builder.add_slice(track, ts, dur, name, Cat.COMPILE, {
                k: v for k, v in {
                    Arg.COMPILE_KIND: kind, Arg.SIGNATURE: str(e.get("cache_key")), Arg.CACHE: cache,
                    **(site_args(view.site(row)) if row >= 0 else {}), "neff_size_bytes": e.get("neff_size_bytes"),
                    Arg.STEP: step_of(ts, ctx), "host_op_ns": int(view.dur[row])}.items() if v not in (None, "")})
            builder.add_flow(row, s, cat=Cat.COMPILE, name="compile")


Placed = tuple[int, dict[str, Any], str, "tuple[int, int] | None", str]


def place(view: HostView, entries: list[dict[str, Any]], intervals: list[tuple[int, int, float]] | None = None,
          graph_names: Sequence[str] = ()) -> tuple[list[Placed], list[dict[str, Any]]]:
    """(row, entry, compile kind, exact (ts, dur) or None, name) per entry placed on a host op span, and those
    unplaced. The name is the host op's (the ops' joined by "|" when fused), or the cache key for a graph.

    With timed samples, an entry takes the first unused sample of the same whole-ms duration, and the op whose
    span holds that interval; otherwise the first long-enough unclaimed call of its op.
    """
    free = list(intervals or [])
    ops = view.cat_rows(KinetoCat.CPU_OP)
    by_key: dict[str, np.ndarray] = {}
    parts_of: dict[str, list[str]] = {}
    if len(ops):
        known = {op_key(view.name_of(int(ops[i]))) for i in np.unique(view.name[ops], return_index=True)[1]}
        parts_of = {str(e.get("cache_key")): key_ops(str(e.get("cache_key")), known) for e in entries}
        keys_wanted = {k for ps in parts_of.values() for k in ps}
        cand = top_level_same_key(view, view.name_rows(lambda s: op_key(s) in keys_wanted, ops))
        for r in cand:
            by_key.setdefault(op_key(view.name_of(int(r))), []).append(int(r))  # type: ignore[attr-defined]
    graphs = view.name_rows(lambda s: s.startswith(_GRAPH_SPANS), ops) if len(ops) else np.empty(0, np.int64)
    claimed: set[int] = set()
    placed: list[Placed] = []
    unplaced: list[dict[str, Any]] = []
    for e in entries:
        need = int(float(e.get("compilation_time_ms") or 0) * 1e6)
        key = str(e.get("cache_key"))
        parts = parts_of.get(key, [])
        rows = [r for p in parts for r in by_key.get(p, [])]
        kind = "eager"
        if not rows:
            rows, kind = [int(r) for r in graphs], "torch.compile"
        rows = sorted(set(rows), key=lambda r: int(view.ts[r]))
        exact = _take_interval(free, float(e.get("compilation_time_ms") or 0))
        row = _holding(view, rows, exact, claimed) if exact is not None else -1
        if row < 0:
            row = _first_fit(view, rows, need, claimed)
        if row < 0:
            unplaced.append(e)
            continue
        claimed.add(row)
        if kind == "eager":
            name = view.name_of(row) if len(parts) == 1 else "|".join(parts)
        else:  # a graph's key starts with its graph name (get_dynamo_metrics), when the backend gave them
            name = max((g for g in graph_names if g and key.startswith(g)), key=len, default=key)
        placed.append((row, e, kind, (exact[0], exact[1] - exact[0]) if exact is not None and
                       view.ts[row] <= exact[0] and exact[1] <= view.end[row] else None, name))
    return placed, unplaced


def _take_interval(free: list[tuple[int, int, float]], ms: float) -> tuple[int, int] | None:
    if ms <= 0:
        return None
    for i, (a, b, v) in enumerate(free):
        if abs(v / 1e6 - ms) <= 1.0:
            free.pop(i)
            return a, b
    return None


def _holding(view: HostView, rows: list[int], iv: tuple[int, int], claimed: set[int]) -> int:
    for r in rows:
        if r not in claimed and view.ts[r] <= iv[0] and iv[1] <= view.end[r]:
            return r
    return -1


def _first_fit(view: HostView, rows: list[int], need_ns: int, claimed: set[int]) -> int:
    """The first unclaimed row long enough to hold the compile (compile times are whole ms: allow 1 ms)."""
    free = [r for r in rows if r not in claimed]
    for r in free:
        if view.dur[r] >= need_ns - 1_000_000:
            return r
    return max(free, key=lambda r: int(view.dur[r])) if free else -1
