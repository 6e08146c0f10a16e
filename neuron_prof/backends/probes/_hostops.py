"""Host-op helpers shared by fallback, stall, compile-cache and device probes: nesting, shapes, bytes."""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.backends._compat import op_key
from neuron_prof.backends.probes._common import dtype_bytes
from neuron_prof.backends.probes._view import HostView
from neuron_prof.model import KinetoCat

COPY_OPS = frozenset({"to", "_to_copy", "copy_", "_copy_from", "_copy_from_and_resize", "_to_cpu"})
SYNC_OPS = frozenset({"item", "_local_scalar_dense", "is_nonzero", "equal", "tolist"})


def top_level_same_key(view: HostView, rows: np.ndarray) -> np.ndarray:
    """`rows` (time order) minus those nested inside an earlier row of the same op key on the same track.

    A device op dispatched through a Python backend shows twice (outer device op, inner CPU kernel): keep the outer.
    """
    keep = []
    open_until: dict[tuple[int, str], int] = {}
    for r in rows:
        r = int(r)
        key = (int(view.track[r]), op_key(view.name_of(r)))
        if open_until.get(key, -1) >= view.end[r]:
            continue
        open_until[key] = int(view.end[r])
        keep.append(r)
    return np.asarray(keep, dtype=np.int64)


def tensor_bytes(args: dict[str, Any], first_only: bool = False) -> int:
    """Bytes of the tensor inputs of a Kineto op from ``Input Dims`` and ``Input type``."""
    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    total = 0
    for d, t in zip(dims, types):
        if not isinstance(t, str) or not t or t in ("Scalar", "ScalarList", "TensorList", "GenericList"):
            continue
        if not isinstance(d, list) or (d and not all(isinstance(x, int) for x in d)):
            continue
        n = 1
        for x in d:
            n *= x
        total += n * dtype_bytes(t.replace(" ", "_") if t != "long int" else t)
        if first_only:
            break
    return total


def shapes_dtypes(args: dict[str, Any]) -> tuple[list[Any], list[str]]:
    dims = args.get("Input Dims") or []
    types = args.get("Input type") or []
    return list(dims), [str(t) for t in types]


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
        i = int(np.searchsorted(ts, t_ns, side="right")) - 1
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
