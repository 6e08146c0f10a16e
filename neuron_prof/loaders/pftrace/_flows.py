"""Flow arrows of a .pftrace: endpoints paired by id, ids decoded with the scheme of the file section that wrote them."""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.model import TraceBuilder
from neuron_prof.model.order import sorted_unique


def flow_columns(b: TraceBuilder, metas: list[dict[str, Any]], ev: np.ndarray, fid: np.ndarray, sec: np.ndarray,
                 ev_ts: np.ndarray, ev_row: np.ndarray) -> None:
    """Pair flow endpoints by id into the builder's flow columns: consecutive endpoints in (ts, file order) make
    one arrow each. Per endpoint: `ev` its event's index in the file, `fid` the flow id, `sec` the file section
    (writer's rank), `ev_ts` its event's time and `ev_row` the slice row of that event (-1: not a slice)."""
    src, dst, ids, sec = pair_by_id(metas, ev, fid, sec, ev_ts, ev_row)
    names = section_names(b, metas, sorted_unique(sec).tolist())
    b.f_src, b.f_dst = src, dst  # type: ignore[assignment]
    b.f_id, b.f_cat, b.f_name = named_ids(names, ids, sec)  # type: ignore[assignment]


def pair_by_id(metas: list[dict[str, Any]], ev: np.ndarray, fid: np.ndarray, sec: np.ndarray, ev_ts: np.ndarray,
               ev_row: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, file's flow id, section) of the arrows, in (id, ts, file order). The endpoints of one id
    depend on nothing else: a subset holding all of each of its ids gives those ids' arrows (the streamed load
    pairs them in windows of ids)."""
    keep = ev_row >= 0  # endpoints on instants have no slice to link
    ev, fid, row, sec, t = ev[keep], fid[keep], ev_row[keep], sec[keep], ev_ts[keep]
    o = np.lexsort((ev, t, fid))
    fid, row, sec = fid[o], row[o], sec[o]
    same = fid[1:] == fid[:-1]
    src, dst, ids, sec = row[:-1][same], row[1:][same], fid[:-1][same], sec[:-1][same]
    later = np.array([int(x) & ((1 << 64) - 1) for m in metas for x in (m.get("flows") or {}).get(
        "src_later") or []], np.uint64)
    if len(later):
        _, counts = np.unique(fid, return_counts=True)
        two = np.isin(ids, sorted_unique(fid)[counts == 2])
        swap = two & np.isin(ids, later)
        src, dst = np.where(swap, dst, src), np.where(swap, src, dst)
    return src, dst, ids, sec


SectionNames = dict[int, tuple[np.ndarray, np.ndarray, np.uint64]]
"""Per file section with a flow id scheme: the cat and name string id of each combo code (then 0 for none), the xor."""


def section_names(b: TraceBuilder, metas: list[dict[str, Any]], sections: list[int]) -> SectionNames:
    """The id schemes of `sections` (sorted), their combos' strings interned in that order."""
    out: SectionNames = {}
    for section in sections:
        fm = _flow_meta(metas, section)
        combos = fm.get("combos") or []
        if not combos:
            continue
        pairs = [(b.strings.intern(x), b.strings.intern(y)) for x, y in combos] + [(0, 0)]
        out[section] = (np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64),
                        np.uint64(int(fm.get("xor") or 0)))
    return out


def named_ids(names: SectionNames, ids: np.ndarray, sec: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(model flow id, cat, name) of arrows with file flow ids `ids` written by sections `sec`."""
    cat = np.zeros(len(ids), np.int64)
    name = np.zeros(len(ids), np.int64)
    model_id = ids.view(np.int64).copy()
    for section in sorted_unique(sec).tolist():
        if section not in names:
            continue
        cats, nams, xor = names[section]
        k = sec == section
        c = ((ids[k] >> np.uint64(40)) & np.uint64(0xFF)).astype(np.int64)
        c = np.minimum(c, len(cats) - 1)
        cat[k] = cats[c]
        name[k] = nams[c]
        model_id[k] = ((ids[k] & ~np.uint64(0xFF << 40)) ^ xor).view(np.int64)
    return model_id, cat, name


def _flow_meta(metas: list[dict[str, Any]], section: int) -> dict[str, Any]:
    """The flow id scheme of one file section: the metadata written with that rank's sequences (files of
    several ranks, merged or concatenated, have one each), else the file's only one."""
    for m in metas:
        if m.get("rank") == section and isinstance(m.get("flows"), dict):
            return m["flows"]  # type: ignore[no-any-return]
    fms: list[Any] = [m.get("flows") for m in metas if isinstance(m.get("flows"), dict) and m.get("flows")]
    return fms[0] if len(fms) == 1 else {}
