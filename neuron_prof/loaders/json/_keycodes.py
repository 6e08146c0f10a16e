"""Chrome JSON flow keys (cat, name, id) as int64 codes, for the streamed load: its endpoints go to files with
their keys as codes (`codes`), the end reads a code's cat, name and wanted flow id back (`meta`).

A code is (index of (cat, name)) << 42 | id for an int id in [0, 2**42) (all of Kineto's), else 2**62 + the
index of the whole key (kept in a dict: there are few). All endpoints of one key share one code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from neuron_prof.loaders.json._convert import wanted_ids

_ID_SPAN = 1 << 42
_PAIR_SPAN = 1 << 20
_ODD = 1 << 62


class KeyCodes:
    """The (cat, name) pairs and odd keys seen so far, and the codes of keys."""

    def __init__(self) -> None:
        self.pairs: dict[tuple[Any, Any], int] = {}
        """(cat, name) of flow keys -> index (a handful: ac2g, fwdbwd, ...)."""
        self.odd: dict[tuple[Any, Any, Any], int] = {}
        """Flow keys whose id is no int in [0, 2**42) -> index (Kineto's ids all are)."""

    def codes(self, keys: list[tuple[Any, Any, Any]]) -> np.ndarray:
        """Flow keys (cat, name, id) as int64: (index of (cat, name)) << 42 | id, or 2**62 + index of the key.
        A dict of millions of key tuples would hold GBs; these are 8 bytes each, on disk."""
        if not keys:
            return np.zeros(0, np.int64)
        cats, names, ids = zip(*keys)
        pairs = self.pairs
        cn = list(zip(cats, names))
        for k in dict.fromkeys(cn):  # a handful of (cat, name)
            pairs.setdefault(k, len(pairs))
        p = np.fromiter(map(pairs.__getitem__, cn), np.int64, len(cn))
        i = _ints(ids)
        normal = (i >= 0) & (i < _ID_SPAN) & (p < _PAIR_SPAN)
        out = (p << 42) | np.where(normal, i, 0)
        if not normal.all():
            odd = self.odd
            for j in np.flatnonzero(~normal).tolist():
                out[j] = _ODD | odd.setdefault(keys[j], len(odd))
        return out

    def meta(self, sids: Callable[[list[Any]], np.ndarray]) -> Callable[[np.ndarray], tuple[np.ndarray, ...]]:
        """Codes -> (wanted flow id, cat string id, name string id), the strings by `sids` (interned in the
        order of the keys: pairs' cats, pairs' names, then the odd keys')."""
        pairs, odd = list(self.pairs), list(self.odd)
        p_cat, p_name = sids([p[0] for p in pairs]), sids([p[1] for p in pairs])
        o_cat, o_name = sids([k[0] for k in odd]), sids([k[1] for k in odd])
        o_want = wanted_ids([k[2] for k in odd])

        def meta(code: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            normal = code < _ODD
            p = np.where(normal, code >> 42, 0)
            o = np.where(normal, 0, code - _ODD)
            want = np.where(normal, code & (_ID_SPAN - 1), o_want[o] if len(odd) else -1)
            cat = np.where(normal, p_cat[p], o_cat[o] if len(odd) else 0)
            name = np.where(normal, p_name[p], o_name[o] if len(odd) else 0)
            return want, cat, name
        return meta


def _ints(ids: tuple[Any, ...]) -> np.ndarray:
    """Flow ids as int64, -1 for those that are no int of 64 bits (a string, None, a float, a bool...)."""
    if set(map(type, ids)) == {int}:
        try:
            return np.array(ids, dtype=np.int64)
        except OverflowError:
            pass
    return np.array([i if type(i) is int and -2**63 <= i < 2**63 else -1 for i in ids], dtype=np.int64)
