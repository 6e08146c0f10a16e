"""Find the collectives of each rank in a trace and match the same collective across ranks.

Sources, best first (a rank uses the best one every rank has, so matches compare like with like):
  1. neuron-prof's collective probe slices (COLLECTIVE tracks; args carry group/seq/bytes)
  2. NCCL device kernels (``ncclKernel_AllReduce_...`` / ``ncclDevKernel_...``) on device tracks
  3. host annotations ``nccl:all_reduce`` / ``gloo:all_reduce`` (real duration of the collective)
  4. ``record_param_comms`` cpu ops (NCCL; ``Collective name`` arg)
The k-th occurrence of the same (group, op) on every rank is taken as the same collective.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from neuron_prof.analysis.collectives.rows import collective_args, message_bytes
from neuron_prof.analysis.collectives.source import on_device
from neuron_prof.analysis.context import Context
from neuron_prof.model import Trace, TrackKind
from neuron_prof.model.order import sorted_unique

_KERNEL_RE = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)
_ANNOT_RE = re.compile(r"^(?:nccl|gloo):(\w+)$")
SOURCES = ("probe", "device_collective", "nccl_kernel", "annotation", "record_param_comms")
"""Where a rank's collectives are read, best first: the host's collective tracks (a probe measured each call
where the host made it), the device's collective tracks (Neuron Explorer's CcOp), device kernels, host
annotations. One source per rank: the same all_reduce seen by the host and by the device is one collective."""


@dataclass(frozen=True)
class RankCollectives:
    """One rank's collectives, in start order."""

    rank: int
    source: str
    key: list[str]
    """"group/op" per collective."""
    start_ns: np.ndarray
    end_ns: np.ndarray
    bytes: np.ndarray
    """float64, NaN where the trace carries no size."""
    row: np.ndarray
    """Slice row in the trace."""

    def __len__(self) -> int:
        return len(self.start_ns)


def _norm_op(op: str) -> str:
    return op.lower().replace("_", "").replace("coalesced", "").rstrip("_")


def ranks_of(trace: Trace) -> dict[int, np.ndarray]:
    """Rank -> indices of its processes (a single-rank trace maps everything to its metadata rank or 0)."""
    default = trace.rank if trace.rank is not None else 0
    out: dict[int, list[int]] = {}
    for i, p in enumerate(trace.processes):
        out.setdefault(p.rank if p.rank is not None else default, []).append(i)
    return {r: np.array(v, dtype=np.int32) for r, v in out.items()}


_GROUP_KEYS = ("Process Group Name", "group")
"""The args keys naming a collective's process group (record_param_comms', a probe's)."""


def _candidates(trace: Trace, rows: np.ndarray, source: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(keys, rows kept, bytes) of the slices in `rows` that are collectives of `source`."""
    names = trace.slices.name[rows]
    ctx = Context(trace)
    keys: list[str] = []
    keep: list[int] = []
    nbytes: list[float] = []
    for uid in sorted_unique(names):
        s = trace.strings[int(uid)]
        if source == "nccl_kernel":
            m = _KERNEL_RE.match(s)
            op = _norm_op(m.group(1)) if m else None
        elif source == "annotation":
            m = _ANNOT_RE.match(s)
            op = _norm_op(m.group(1)) if m else None
        elif source == "record_param_comms":
            op = "rpc" if s == "record_param_comms" else None
        else:
            op = _norm_op(s)
        if op is None:
            continue
        mine = rows[names == uid]
        # the args as columns a window at a time (`collective_args`), not a parse and a sparse read of the blob
        # per call: a big cached trace's blob would stay resident (~900 MB of pages for a 3 GB trace)
        with_args = source in ("probe", "device_collective", "record_param_comms")
        args = collective_args(ctx, mine, _GROUP_KEYS) if with_args else repeat({})
        for r, a in zip(mine.tolist(), args):
            key, b = op, float("nan")
            if with_args:
                b = float(message_bytes(a) or "nan")
                if source == "record_param_comms":
                    key = _norm_op(str(a.get("Collective name", "collective")))
                    group = a.get("Process Group Name", "")
                else:
                    group = a.get("group", "")
                key = f"{group}/{key}"
            keys.append(key)
            keep.append(r)
            nbytes.append(b)
    return keys, np.array(keep, dtype=np.int64), np.array(nbytes, dtype=np.float64)


def _source_rows(trace: Trace, procs: np.ndarray, source: str) -> np.ndarray:
    mine = set(procs.tolist())
    dev = on_device(trace)
    tracks = np.array([i for i, t in enumerate(trace.tracks) if t.process in mine and (
        (source == "probe" and t.kind == TrackKind.COLLECTIVE and not dev[i])
        or (source == "device_collective" and t.kind == TrackKind.COLLECTIVE and dev[i])
        or (source == "nccl_kernel" and t.kind == TrackKind.DEVICE)
        or (source in ("annotation", "record_param_comms") and t.kind == TrackKind.THREAD))], dtype=np.int32)
    return np.flatnonzero(np.isin(trace.slices.track, tracks))


def collectives_by_source(trace: Trace, *, stop_when_complete: bool = False) -> dict[str, dict[int, RankCollectives]]:
    """Each source's collectives per rank, in SOURCES order (a rank without that source is absent).

    `stop_when_complete`: stop at the first source that every rank of `trace` has (what `pick_source` takes)."""
    found: dict[str, dict[int, RankCollectives]] = {}
    ranks = ranks_of(trace)
    for source in SOURCES:
        per: dict[int, RankCollectives] = {}
        for r, procs in ranks.items():
            keys, rows, nbytes = _candidates(trace, _source_rows(trace, procs, source), source)
            if not len(rows):
                continue
            order = np.argsort(trace.slices.ts_ns[rows], kind="stable")
            rows = rows[order]
            per[r] = RankCollectives(rank=r, source=source, key=[keys[i] for i in order],
                                     start_ns=trace.slices.ts_ns[rows].copy(),
                                     end_ns=(trace.slices.ts_ns[rows] + trace.slices.dur_ns[rows]),
                                     bytes=nbytes[order], row=rows)
        if per:
            found[source] = per
            if stop_when_complete and len(per) == len(ranks):
                break
    return found


def pick_source(found: dict[str, dict[int, RankCollectives]], ranks: int) -> dict[int, RankCollectives]:
    """The best source that all `ranks` ranks have, else the best one any rank has ({} when none)."""
    for source in SOURCES:
        per = found.get(source)
        if per and len(per) == ranks:
            return per
    return next((found[s] for s in SOURCES if found.get(s)), {})


def extract_collectives(trace: Trace) -> dict[int, RankCollectives]:
    """Each rank's collectives from the best source that all ranks share."""
    return pick_source(collectives_by_source(trace, stop_when_complete=True), len(ranks_of(trace)))


def match(per_rank: dict[int, RankCollectives]) -> tuple[list[int], np.ndarray]:
    """Match collectives across ranks by (key, occurrence).

    Returns (ranks in order, index matrix M of shape (n_matched, n_ranks)): M[k, j] is the position of
    matched collective k in rank ranks[j]'s RankCollectives, sorted by the first rank's start time.
    """
    ranks = sorted(per_rank)
    if len(ranks) < 2:
        return ranks, np.zeros((0, len(ranks)), dtype=np.int64)
    occ: list[dict[tuple[str, int], int]] = []
    for r in ranks:
        seen: dict[str, int] = {}
        m: dict[tuple[str, int], int] = {}
        for i, k in enumerate(per_rank[r].key):
            n = seen.get(k, 0)
            seen[k] = n + 1
            m[(k, n)] = i
        occ.append(m)
    common = [k for k in occ[0] if all(k in o for o in occ[1:])]
    mat = np.array([[o[k] for o in occ] for k in common], dtype=np.int64).reshape(-1, len(ranks))
    if len(mat):
        mat = mat[np.argsort(per_rank[ranks[0]].start_ns[mat[:, 0]], kind="stable")]
    return ranks, mat
