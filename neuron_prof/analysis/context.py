"""Context: what every analysis needs from a Trace, computed once and shared (masks, steps, args)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from functools import cache, cached_property
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from neuron_prof.analysis.spill import Spill
from neuron_prof.analysis.steps.boundaries import Steps, make_steps
from neuron_prof.analysis.steps.evaluation import EvalPass, evaluation_passes
from neuron_prof.model import Arg, ArgsStore, Meta, Trace
from neuron_prof.model.order import row_dtype, searchsorted, sorted_unique

WARNING_SHARE = 0.02
"""A finding costing this share of the profiled wall time is a warning..."""
CRITICAL_SHARE = 0.10
"""...and this share makes it critical."""


def as_int(v: Any, default: int = 0) -> int:
    """An int from a trace argument of any type (probes and foreign traces write what they like)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)) and v == v and abs(v) < 2**63:
        return int(v)
    if isinstance(v, str):
        try:
            return int(float(v))
        except ValueError:
            return default
    return default


PICK_CHUNK = 1 << 16
"""Documents `Context.pick_columns` copies and decodes at a time: its transient memory stays bounded however
many rows it is asked for (a big trace's op args hold call stacks of ~1 kB)."""

PICK_SPAN = 1 << 25
"""...and bytes of the args blob its documents may span (`_windows`)."""
ARGS_CACHED = 1 << 16
"""Distinct args documents `Context.args` keeps parsed (then it starts again): repeats are the common case, and
a row-by-row loop over a big trace's documents must not keep them all."""
ARGS_CACHED_BYTES = 1 << 20
"""...and bytes of their JSON text (parsed, about three times as much): a loop over a big trace's collectives
kept ~16 MB per 10k documents for the rest of the run."""

ARGS_READS_HELD = 1 << 12
"""Documents `Context.args` reads between two `ArgsStore.drop_pages` (each read of a mapped blob brings in a
folio of up to 2 MB: 4096 sparse reads can map most of a big blob)."""

ABSENT = msgspec.UNSET
"""`Context.pick_args`' value for a key a document does not have (a JSON null is None)."""


@cache
def _picker(
    keys: tuple[str, ...], raw: bool = False,
) -> tuple[msgspec.json.Decoder[Any], msgspec.json.Decoder[Any], tuple[Callable[[Any], Any], ...]]:
    """Decoders of args documents that keep only `keys` (msgspec skips the others without building them):
    of one document (for ``decode_lines``) and of a JSON array of them; and the getter of each key's value
    (`raw`: the value's JSON text, a ``msgspec.Raw``, not decoded)."""
    names = [f"k{i}" for i in range(len(keys))]
    kind = msgspec.Raw if raw else Any
    struct = msgspec.defstruct("PickedArgs", [(n, kind, ABSENT) for n in names], rename=dict(zip(names, keys)))
    many = list[struct]  # type: ignore[valid-type]  # a type made at run time
    return msgspec.json.Decoder(struct), msgspec.json.Decoder(many), tuple(attrgetter(n) for n in names)


def _decode_picked(args: ArgsStore, idx: np.ndarray, one: msgspec.json.Decoder[Any],
                   array: msgspec.json.Decoder[Any]) -> list[Any]:
    """The documents at `idx` decoded: from the blob's runs (`ArgsStore.json_runs`) when they decode to one
    value per document, else as one JSON array (raises msgspec's errors)."""
    runs = args.json_runs(idx)
    if runs is not None:
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            docs = one.decode_lines(runs)
            if len(docs) == len(idx):
                return docs  # type: ignore[no-any-return]
    return array.decode(args.json_array(idx))  # type: ignore[no-any-return]


def _windows(store: ArgsStore, idx: np.ndarray) -> list[tuple[int, int]]:
    """[a, z) ranges of `idx` (ArgsStore indices, no -1) decoded at a time: `PICK_CHUNK` documents at most and,
    when `idx` ascends, documents within `PICK_SPAN` bytes of the blob (sparse rows of a memory-mapped blob
    would bring most of its pages in for one chunk)."""
    n = len(idx)
    cuts = set(range(0, n, PICK_CHUNK))
    if n > 1 and bool((np.diff(idx) >= 0).all()):
        pos = store.buffers[1][idx]
        cuts.update(searchsorted(pos, np.arange(int(pos[0]), int(pos[-1]) + 1, PICK_SPAN)).tolist())
    edges = sorted(c for c in cuts if 0 <= c < n)
    return list(zip(edges, [*edges[1:], n], strict=True))


def severity_for(share: float, floor: str = "info") -> str:
    """Severity from the share of wall time a problem costs, never below `floor`."""
    sev = "critical" if share >= CRITICAL_SHARE else "warning" if share >= WARNING_SHARE else "info"
    order = ("info", "warning", "critical")
    return order[max(order.index(sev), order.index(floor))]


class Context:
    """Shared, lazily computed views of one Trace for the analyses."""

    def __init__(self, trace: Trace, warmup_steps: int | None = None) -> None:
        self.trace = trace
        self._warmup_steps = warmup_steps
        self._args_cache: dict[bytes, dict[str, Any]] = {}
        self._cached_bytes = 0
        self._reads = 0
        self._memo: dict[str, Any] = {}
        self._spill = Spill(trace)

    def memo(self, key: str, fn: Callable[[], Any]) -> Any:
        """`fn()` computed once per context (analyses share parsed probe events this way); for a big trace
        from the column cache, its big arrays moved to mapped files (`spill`)."""
        if key not in self._memo:
            if self._spill.folder is not None:  # what the caller read so far comes back when it reads it again
                self.drop_pages()
            self._memo[key] = self._spill(fn())
            if self._spill.folder is not None:  # a pass over every row just ended: its pages need not stay
                self.drop_pages()
        return self._memo[key]

    def empty(self, n: int, dtype: Any) -> np.ndarray:
        """A writable array for a shared result written a window at a time: in a mapped file from the start for a
        big cached trace (`Spill.empty`), so it is never whole in memory."""
        return self._spill.empty(n, dtype)

    def drop_pages(self) -> None:
        """Hand back the resident pages of the trace's mapped columns and of the shared arrays (`Trace.drop_pages`,
        `Spill.drop_pages`)."""
        self.trace.drop_pages()
        self._spill.drop_pages()

    # ---- time ---------------------------------------------------------------------------------
    @cached_property
    def window(self) -> tuple[int, int]:
        """(start, end) of the profiled region (Unix ns)."""
        w = self.trace.metadata.get(Meta.WALL)
        if isinstance(w, (list, tuple)) and len(w) == 2 and int(w[1]) > int(w[0]):
            return int(w[0]), int(w[1])
        return self.trace.time_range()

    @cached_property
    def wall_ns(self) -> int:
        a, b = self.window
        return max(b - a, 0)

    def share(self, ns: float) -> float:
        """`ns` as a fraction (0-1) of the profiled wall time."""
        return float(min(max(ns / self.wall_ns, 0.0), 1.0)) if self.wall_ns > 0 else 0.0

    # ---- tracks and rows ------------------------------------------------------------------------
    def rows(self, *kinds: str) -> np.ndarray:
        """Slice rows on tracks of these kinds, in table order (computed once per kind set), in `row_dtype`."""
        dt = row_dtype(len(self.trace.slices))
        return self.memo(f"rows:{','.join(kinds)}",  # type: ignore[no-any-return]
                         lambda: (self.trace.slices_on(*kinds) if kinds else np.zeros(0, np.int64)).astype(dt, copy=False))

    def cat_rows(self, rows: np.ndarray, cats: Iterable[str], keep: bool = True) -> np.ndarray:
        """The rows of `rows` whose category is (keep=True) or is not (keep=False) in `cats`."""
        ids = self.trace.name_ids(*cats)
        m = np.isin(self.trace.slices.cat[rows], ids)
        return rows[m if keep else ~m]

    def name_rows(self, rows: np.ndarray, names: Iterable[str]) -> np.ndarray:
        """The rows of `rows` whose name is one of `names`."""
        return rows[np.isin(self.trace.slices.name[rows], self.trace.name_ids(*names))]

    # ---- args -----------------------------------------------------------------------------------
    def args(self, args_idx: int) -> dict[str, Any]:
        """Args dict by ArgsStore index, parsed once per distinct JSON document."""
        if args_idx < 0:
            return {}
        raw = self.trace.args.raw(int(args_idx))
        self._reads += 1
        if not self._reads % ARGS_READS_HELD:  # rows read one by one over a mapped blob: hand its pages back
            self.trace.args.drop_pages()
        d = self._args_cache.get(raw)
        if d is None:
            d = self.trace.args.get(int(args_idx))
            if len(self._args_cache) >= ARGS_CACHED or self._cached_bytes >= ARGS_CACHED_BYTES:  # a big trace
                self._args_cache.clear()
                self._cached_bytes = 0
            self._args_cache[raw] = d
            self._cached_bytes += len(raw)
        return d

    def pick_args(self, args_idx: np.ndarray, keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
        """The values of `keys` in each args document of `args_idx` (ArgsStore indices, -1: no args), one
        tuple per index: ``args(i)[k]``, or ABSENT where the document has no key k (`pick_columns`, by row)."""
        return list(zip(*self.pick_columns(args_idx, keys), strict=True))

    def iter_pick_args(self, args_idx: np.ndarray, keys: tuple[str, ...]) -> Iterator[tuple[Any, ...]]:
        """`pick_args`, one window of `PICK_CHUNK` indices decoded at a time: a loop over a big trace's rows
        holds one window's values, not every row's."""
        for k0 in range(0, len(args_idx), PICK_CHUNK):
            yield from zip(*self.pick_columns(args_idx[k0:k0 + PICK_CHUNK], keys), strict=True)

    def pick_columns(self, args_idx: np.ndarray, keys: tuple[str, ...], raw: bool = False) -> tuple[list[Any], ...]:
        """The values of `keys` in each args document of `args_idx` (ArgsStore indices, -1: no args), one
        list per key: ``args(i)[k]`` at the index's position, or ABSENT where the document has no key k.
        `raw`: each value's JSON text (bytes) instead, for a caller that decodes only its distinct values.

        Decoded `PICK_CHUNK` documents at a time, reading only these keys: for a column of rows, many times faster than
        `args` per row (a Kineto op's args hold shapes, strides and ids besides its call stack).
        """
        idx = np.asarray(args_idx, dtype=np.int64)
        have = np.flatnonzero(idx >= 0)
        if not len(have):
            return tuple([ABSENT] * len(idx) for _ in keys)
        cols: list[list[Any]] = [[] for _ in keys]
        store = self.trace.args
        for a, z in _windows(store, idx[have]):
            for col, part in zip(cols, self._pick_chunk(idx[have[a:z]], keys, raw), strict=True):
                col.extend(part)
            if len(have) >= 1 << 12:  # a column of rows, not a few: its pages need not stay resident
                store.drop_pages()
        if len(have) == len(idx):
            return tuple(cols)
        pos = have.tolist()
        out = []
        for col in cols:
            full = [ABSENT] * len(idx)
            for j, v in zip(pos, col, strict=True):
                full[j] = v
            out.append(full)
        return tuple(out)

    def _pick_chunk(self, idx: np.ndarray, keys: tuple[str, ...], raw: bool = False) -> list[list[Any]]:
        """`pick_columns` of indices that are all >= 0, one decode."""
        one, array, gets = _picker(tuple(keys), raw)
        try:
            docs = _decode_picked(self.trace.args, idx, one, array)
            if raw:
                return [[ABSENT if v is ABSENT else bytes(v) for v in map(get, docs)] for get in gets]
            return [list(map(get, docs)) for get in gets]
        except (msgspec.DecodeError, msgspec.ValidationError):  # a document that is no JSON object
            dicts = [self.args(int(i)) for i in idx.tolist()]
            if raw:
                return [[ABSENT if k not in a else msgspec.json.encode(a[k]) for a in dicts] for k in keys]
            return [[a.get(k, ABSENT) for a in dicts] for k in keys]

    def slice_args(self, row: int) -> dict[str, Any]:
        return self.args(int(self.trace.slices.args[row]))

    def instant_args(self, row: int) -> dict[str, Any]:
        return self.args(int(self.trace.instants.args[row]))

    def module(self, args: dict[str, Any]) -> str:
        m = args.get(Arg.MODULE)
        return m if isinstance(m, str) else ""

    # ---- steps -----------------------------------------------------------------------------------
    @cached_property
    def steps(self) -> Steps:
        return make_steps(self.trace, self._warmup_steps, self.eval_passes)

    def eval_passes(self) -> list[EvalPass]:
        """The trace's evaluation passes (`steps.evaluation`), computed once per context: the steps' warm-up and
        phases and the compile analyses read the same ones."""
        return self.memo("eval_passes", lambda: evaluation_passes(self.trace))  # type: ignore[no-any-return]

    def step_split(self, ts: np.ndarray, cost: np.ndarray) -> dict[str, Any]:
        """Evidence on how a cost spreads over warm-up and steady steps (empty without steps); an iteration's
        tail after its update counts in its own step (`Steps.iteration_index`)."""
        st = self.steps
        if not len(st):
            return {}
        k = st.iteration_index(ts)
        cost = np.asarray(cost, dtype=np.float64)
        warm = (k >= 0) & (k < st.warmup)
        steady = k >= st.warmup
        n_steady = len(st) - st.warmup
        hit = sorted_unique(k[k >= 0])
        return {
            "steps": [int(st.ids[i]) for i in hit[:50]],
            "warmup_ns": int(cost[warm].sum()),
            "steady_ns": int(cost[steady].sum()),
            "steady_count": int(steady.sum()),
            "steady_per_step_ns": int(cost[steady].sum() / n_steady) if n_steady else 0,
            "steady_step_share": (
                float(cost[steady].sum() / st.dur_ns[st.steady].sum())
                if n_steady and st.dur_ns[st.steady].sum() > 0
                else 0.0
            ),
            "steady_steps_hit": int(len(sorted_unique(k[steady]))),
            "steady_steps": int(n_steady),
        }
