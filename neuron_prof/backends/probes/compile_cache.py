"""Eager first-call compile stalls from a backend's compilation-cache entries (torch-neuronx's NEFF cache).

Source: ``_get_compilation_cache_entries()`` → ``{cache_key, neff_size_bytes, access_count,
compilation_time_ms}``; an eager op's key starts with the op name, its suffix format is undocumented: the op is
the longest op name of the trace the key starts with (`_compat.key_ops`), nothing is parsed after it. Entries
that appear during the capture are this capture's compiles (0 ms: loaded from the disk cache). The entry says
nothing about *when* or *where*: the runtime's CompilationTime samples (metrics on) give each compile's
interval. Blocking mode (``NEURON_LAUNCH_BLOCKING=1``): the op call whose span holds it paid for it; without
samples, the first not-yet-claimed call of its op that lasted at least as long as the compile. Asynchronous
mode (no call holds it): the compile ran on the background compile thread, queued by the last call of its op
before it, and the host paid only where it waited for the device meanwhile (see `_add_async`).
Keys that name no host op (graphs) are placed on the first ``Torch-Compiled Region`` / ``CompiledFunction``
span that can hold them.

The cache keeps one entry per key, so a signature compiled again after the user cleared the cache
(``_C._clear_compilation_cache()``, or ``_clear_compilation_memory_cache()``: memory only, reloaded from disk) would
show once. Those two functions are wrapped during the capture: each call first reads the entries the capture has
added so far (they are this segment's compiles, placed on calls before the clear), then clears; the call is
recorded, with its line, as an instant on the compile track (`EventName.CACHE_CLEARED`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from neuron_prof.backends._compat import key_ops, launch_blocking_env, op_key
from neuron_prof.backends.probes._common import probe_track, site_args, step_of
from neuron_prof.backends.probes._hostops import top_level_same_key
from neuron_prof.backends.probes.probe import Probe
from neuron_prof.model import Arg, Cat, KinetoCat, TrackKind
from neuron_prof.model.callsite import NO_STACK, Site, live_site, site_from_stack
from neuron_prof.model.schema import EventName
from neuron_prof.patches import patch, restore_patches

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes.view import HostView
    from neuron_prof.model import TraceBuilder

_GRAPH_SPANS = ("Torch-Compiled Region", "CompiledFunction")
UNPLACED = "compile_cache_unplaced"
MODE = "mode"
"""Compile event arg: "blocking" (the op waited for its compile) or "async" (NEURON_LAUNCH_BLOCKING=0)."""
COMPILE_THREAD = "neuron compile thread"
"""Track of compiles that ran on the runtime's background compile thread (asynchronous mode)."""
_TOL = 100_000
"""Slack between the runtime's steady-clock samples and the profiler's op times (100 µs)."""
CLEARERS = ("_clear_compilation_cache", "_clear_compilation_memory_cache")
"""The ``torch_neuronx._C`` functions that empty the compile cache (the first also its disk files)."""
Window = tuple[int, int]
"""(Unix start ns, Unix end ns) of the part of the capture between two clears of the cache."""


class CompileCacheProbe(Probe):
    """New cache entries during the capture → one compile event each, placed on the op call that paid for it."""

    name = "compile_cache"

    def __init__(self, entries: Callable[[], list[dict[str, Any]] | None],
                 sync: Callable[[], Any] | None = None,
                 samples: Callable[[], list[tuple[int, float]] | None] | None = None,
                 graph_names: Callable[[], Sequence[str]] | None = None,
                 waits: Callable[[], Sequence[Any]] | None = None, clear_owner: Any | None = None) -> None:
        super().__init__()
        self._clear_owner = clear_owner
        """The object whose `CLEARERS` the user calls (``torch_neuronx._C``); wrapped during the capture."""
        self._saved: list[tuple[Any, str, Any, bool]] = []
        self._segment_t0 = 0
        self.windows: list[Window] = []
        """Per entry of `new`: the part of the capture it was compiled in."""
        self.clears: list[tuple[int, str, int, Site]] = []
        """(Unix ns, function, entries it dropped, site) of each clear of the cache during the capture."""
        self._waits = waits
        """The sync probe's synchronize() records: (name, kind, start ns, end ns, site, ...)."""
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
        self.new, self.windows, self.clears, self.hits = [], [], [], 0
        self._segment_t0 = time.time_ns()
        for name in CLEARERS:
            fn = getattr(self._clear_owner, name, None) if self._clear_owner is not None else None
            if callable(fn):
                patch(self._clear_owner, name, self._wrap_clear(name, fn), self._saved)
        if self._samples is not None:
            got = self._samples() or []
            self._last_sample = max((t for t, _ in got), default=-1)

    def _wrap_clear(self, name: str, orig: Callable[..., Any]) -> Callable[..., Any]:
        probe = self

        @functools.wraps(orig)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:  # a failure while recording must never replace the user's call
                probe._end_segment(name, live_site(2))
            except Exception:  # noqa: BLE001
                probe.hook_errors += 1
            return orig(*args, **kwargs)

        return wrapper

    def _end_segment(self, name: str, site: Site) -> None:
        """Before a clear: the entries added since the segment began are its compiles; the cache starts empty.
        No device sync here (the clear may run inside a step): a compile still in flight is read as it stands."""
        now = time.time_ns()
        entries = self._entries() or []
        self._take_new(entries, (self._segment_t0, now))
        self.clears.append((now, name, len(entries), site))
        self._before, self._segment_t0 = {}, now

    def _take_new(self, entries: list[dict[str, Any]], window: Window) -> None:
        fresh = [e for e in entries if str(e.get("cache_key")) not in self._before]
        self.new += fresh
        self.windows += [window] * len(fresh)
        self.hits += sum(max(0, int(e.get("access_count") or 0) - self._before.get(str(e.get("cache_key")), 0))
                         for e in entries if str(e.get("cache_key")) in self._before)

    def stop(self, ctx: CaptureContext) -> None:
        restore_patches(self._saved)
        if self._sync is not None:
            self._sync()  # compiles run on a background thread: let them finish
        after = self._entries() or []
        self._take_new(after, (self._segment_t0, time.time_ns()))
        if self._samples is not None:
            # samples carry the steady clock (CLOCK_MONOTONIC): shift to Unix ns; a sample is taken at compile end
            offset = time.time_ns() - time.monotonic_ns()
            self.intervals = [(int(t + offset - v), int(t + offset), v) for t, v in (self._samples() or [])
                              if t > self._last_sample]
        self.graphs = list(self._graph_names() or ()) if self._graph_names is not None else []

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        placed, unplaced = place(view, self.new, self.intervals, self.graphs, self.windows)
        modes = sorted({"async" if p.asynchronous else "blocking" for p in placed if p.exact is not None})
        builder.metadata["compile_cache"] = {"new_entries": len(self.new), "hits_on_old_entries": self.hits,
                                             "unplaced": len(unplaced), "modes": modes,
                                             "NEURON_LAUNCH_BLOCKING": launch_blocking_env(),
                                             **({"clears": len(self.clears)} if self.clears else {})}
        if unplaced:
            builder.metadata[UNPLACED] = [str(e.get("cache_key")) for e in unplaced]
        if not placed and not self.clears:
            return
        track = probe_track(builder, ctx, TrackKind.COMPILE)
        for ts, name, n, site in self.clears:
            builder.add_instant(track, ts, EventName.CACHE_CLEARED, Cat.COMPILE, _present(
                {"call": f"torch_neuronx._C.{name}()", "entries": n, **site_args(site), Arg.STEP: step_of(ts, ctx)}))
        waits = self._wait_spans(ctx) if any(p.asynchronous for p in placed) else []
        for p in placed:
            e, row = p.entry, p.row
            ms = float(e.get("compilation_time_ms") or 0)
            dur = int(ms * 1e6) if ms > 0 else 0
            ts = int(view.ts[row])
            if p.exact is not None:
                ts, dur = p.exact
            args = {Arg.COMPILE_KIND: p.kind, Arg.SIGNATURE: str(e.get("cache_key")),
                    Arg.CACHE: "miss" if ms > 0 else "disk", **site_args(view.site(row)),
                    "neff_size_bytes": e.get("neff_size_bytes"), Arg.STEP: step_of(ts, ctx),
                    "host_op_ns": int(view.dur[row]), MODE: "async" if p.asynchronous else "blocking"}
            if not p.asynchronous:
                s = builder.add_slice(track, ts, dur, p.name, Cat.COMPILE, _present(args))
                builder.add_flow(row, s, cat=Cat.COMPILE, name="compile")
                continue
            self._add_async(builder, ctx, view, track, p, ts, dur, args, waits)

    def _add_async(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView, track: int, p: Placement,
                   ts: int, dur: int, args: dict[str, Any], waits: list[tuple[int, int, str, Site]]) -> None:
        """The compile on the background compile thread's own track; on the compile track, the host's stall:
        each wait (sync, copy to host) that overlapped it, charged with the triggering op, signature and line."""
        host = int(builder.tracks[int(view.track[p.row])].process)
        thread = builder.track(host, COMPILE_THREAD, TrackKind.OTHER, sort_index=-1)
        work = builder.add_slice(thread, ts, dur, p.name, Cat.COMPILE,
                                 _present({**args, Arg.OP: view.name_of(p.row)}))
        builder.add_flow(p.row, work, cat=Cat.COMPILE, name="compile")
        for w0, w1, wname, wsite in waits:
            a, z = max(ts, w0), min(ts + dur, w1)
            if z <= a:
                continue
            stall = builder.add_slice(track, a, z - a, p.name, Cat.COMPILE, _present({
                **args, "compile_ns": dur, "stall_ns": z - a, "wait": wname, "wait_call_site": wsite.call_site,
                Arg.OP: view.name_of(p.row), Arg.STEP: step_of(a, ctx)}))
            builder.add_flow(work, stall, cat=Cat.COMPILE, name="stall")

    def _wait_spans(self, ctx: CaptureContext) -> list[tuple[int, int, str, Site]]:
        """(start, end, what, site) of every host wait on the device: reads of device data recorded by capture,
        and the waits `waits` gives (the sync probe's synchronize() calls)."""
        out = [(d.start_ns, d.end_ns, d.call or d.op, site_from_stack(d.stack, True, None) if d.stack else NO_STACK)
               for d in ctx.device_ops if d.kind == "sync"]
        if self._waits is not None:
            out += [(int(r[2]), int(r[3]), str(r[0]), r[4]) for r in self._waits() or ()]
        return sorted(out, key=lambda w: w[0])


def _present(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if v not in (None, "")}


@dataclass(frozen=True)
class Placement:
    """Where one new cache entry goes: the host op call that triggered it, and its compile interval."""

    row: int
    entry: dict[str, Any]
    kind: str
    """"eager" | "torch.compile"."""
    exact: tuple[int, int] | None
    """(start ns, duration ns) from the runtime's CompilationTime sample, when one matched."""
    name: str
    asynchronous: bool = False
    """The compile ran after the op returned (NEURON_LAUNCH_BLOCKING=0): on the background compile thread."""


def place(view: HostView, entries: list[dict[str, Any]], intervals: list[tuple[int, int, float]] | None = None,
          graph_names: Sequence[str] = (), windows: Sequence[Window] | None = None,
          ) -> tuple[list[Placement], list[dict[str, Any]]]:
    """A Placement per entry placed on a host op call, and the entries left unplaced. The name is the host
    op's (the ops' joined by "|" when fused), or the graph name (else the cache key) for a graph. With
    `windows` (one per entry: the part of the capture between clears of the cache it was compiled in), an
    entry goes only on a call, and takes only a sample, inside its window.

    With timed samples, an entry takes the first unused sample of the same whole-ms duration, and the op whose
    span holds that interval (blocking mode); when no call holds it, the last call of its op submitted before
    it started (asynchronous mode). Without samples, the first long-enough unclaimed call of its op.
    """
    free = list(intervals or [])
    ops = view.cat_rows(KinetoCat.CPU_OP)
    by_key: dict[str, list[int]] = {}
    parts_of: dict[str, list[str]] = {}
    if len(ops):
        known = {op_key(view.name_of(int(ops[i]))) for i in np.unique(view.name[ops], return_index=True)[1]}
        parts_of = {str(e.get("cache_key")): key_ops(str(e.get("cache_key")), known) for e in entries}
        keys_wanted = {k for ps in parts_of.values() for k in ps}
        cand = top_level_same_key(view, view.name_rows(lambda s: op_key(s) in keys_wanted, ops))
        for r in cand:
            by_key.setdefault(op_key(view.name_of(int(r))), []).append(int(r))
    graphs = view.name_rows(lambda s: s.startswith(_GRAPH_SPANS), ops) if len(ops) else np.empty(0, np.int64)
    claimed: set[int] = set()
    placed: list[Placement] = []
    unplaced: list[dict[str, Any]] = []
    for i, e in enumerate(entries):
        need = int(float(e.get("compilation_time_ms") or 0) * 1e6)
        key = str(e.get("cache_key"))
        parts = parts_of.get(key, [])
        rows = [r for p in parts for r in by_key.get(p, [])]
        kind = "eager"
        if not rows:
            rows, kind = [int(r) for r in graphs], "torch.compile"
        win = windows[i] if windows is not None and i < len(windows) else None
        if win is not None:
            rows = [r for r in rows if win[0] - _TOL <= int(view.ts[r]) <= win[1] + _TOL]
        rows = sorted(set(rows), key=lambda r: int(view.ts[r]))
        exact = _take_interval(free, float(e.get("compilation_time_ms") or 0), win)
        row = _holding(view, rows, exact, claimed) if exact is not None else -1
        asynchronous = False
        if row < 0 and exact is not None:
            row = _submitted_before(view, rows, exact[0], claimed)
            asynchronous = row >= 0
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
        keep = exact is not None and (asynchronous or view.ts[row] - _TOL <= exact[0]
                                      and exact[1] <= view.end[row] + _TOL)
        placed.append(Placement(row, e, kind, (exact[0], exact[1] - exact[0]) if keep and exact else None, name,
                                asynchronous))
    return placed, unplaced


def _take_interval(free: list[tuple[int, int, float]], ms: float, win: Window | None = None,
                   ) -> tuple[int, int] | None:
    if ms <= 0:
        return None
    for i, (a, b, v) in enumerate(free):
        if win is not None and not (win[0] - _TOL <= a <= win[1] + _TOL):
            continue
        if abs(v / 1e6 - ms) <= 1.0:
            free.pop(i)
            return a, b
    return None


def _holding(view: HostView, rows: list[int], iv: tuple[int, int], claimed: set[int]) -> int:
    """The first unclaimed call whose span holds the interval (give or take the clocks' _TOL)."""
    for r in rows:
        if r not in claimed and view.ts[r] - _TOL <= iv[0] and iv[1] <= view.end[r] + _TOL:
            return r
    return -1


def _submitted_before(view: HostView, rows: list[int], start: int, claimed: set[int]) -> int:
    """The last unclaimed call that began before the compile did (it queued the compile and returned)."""
    before = [r for r in rows if r not in claimed and view.ts[r] <= start + _TOL]
    return before[-1] if before else -1


def _first_fit(view: HostView, rows: list[int], need_ns: int, claimed: set[int]) -> int:
    """The first unclaimed row long enough to hold the compile (compile times are whole ms: allow 1 ms)."""
    free = [r for r in rows if r not in claimed]
    for r in free:
        if view.dur[r] >= need_ns - 1_000_000:
            return r
    return max(free, key=lambda r: int(view.dur[r])) if free else -1
