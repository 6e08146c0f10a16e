"""Host-op helpers shared by fallback, stall, compile-cache and device probes: nesting, shapes, bytes.

`ThreadOps` lives with `HostView` (`_view`), which uses it; it is re-exported here for the probes."""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.backends._compat import op_key
from neuron_prof.backends.probes._common import dtype_bytes
from neuron_prof.backends.probes.view import HostView, ThreadOps

__all__ = ["COPY_OPS", "SYNC_OPS", "ThreadOps", "shapes_dtypes", "tensor_bytes", "top_level_same_key"]

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
