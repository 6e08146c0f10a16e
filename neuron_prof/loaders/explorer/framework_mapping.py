"""TorchNeuron's framework→runtime mapping: which host ops a runtime execution (``nrta_seq_id``) served.

Source: shared/design/torch-neuronx-facts.md ("Profiler", "Corrections and additions"): ``framework_mapping_<ts>.json``
is ``{"version": 1, "data": [{"nrta_seq_id": int, "framework_op_exec_ids": [{"seq_nr", "th_id", "stream_id"}]}]}``,
written by ``NeuronProfiler`` when runtime and PyTorch profiling are both on; the same mapping is readable in
memory (``_C._get_profiler_mappings()``). ``seq_nr`` is ``at::sequence_number::peek()`` at submission: it may be
one above the Kineto "Sequence number" of an op that created an autograd node (see `host_op_for`); ``th_id`` is
RecordFunction's per-thread counter, not the OS thread id, so it is not joined to Kineto's ``tid``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from neuron_prof.errors import TraceFormatError

MappingIndex = dict[int, list[tuple[int, int | None, int | None]]]
"""nrta_seq_id -> [(seq_nr, th_id, stream_id)]."""


def parse_mapping(doc: Any) -> MappingIndex:
    """The documented document (or its ``data`` list alone, as the in-memory API may give it) as an index.
    Entries without an integer ``nrta_seq_id`` or ``seq_nr`` are skipped."""
    data = doc.get("data") if isinstance(doc, Mapping) else doc
    out: MappingIndex = {}
    if not isinstance(data, Sequence) or isinstance(data, (str, bytes)):
        return out
    for e in data:
        if not isinstance(e, Mapping) or not _is_int(e.get("nrta_seq_id")):
            continue
        ids = out.setdefault(int(e["nrta_seq_id"]), [])
        for f in e.get("framework_op_exec_ids") or ():
            if isinstance(f, Mapping) and _is_int(f.get("seq_nr")):
                ids.append((int(f["seq_nr"]), _int_or_none(f.get("th_id")), _int_or_none(f.get("stream_id"))))
    return out


def read_mapping_file(path: str | os.PathLike[str]) -> MappingIndex:
    """A ``framework_mapping_*.json`` file; TraceFormatError when it is not JSON."""
    p = Path(path)
    try:
        return parse_mapping(orjson.loads(p.read_bytes()))
    except orjson.JSONDecodeError as e:
        raise TraceFormatError(p, f"framework mapping is not JSON ({e})") from None


def host_op_for(seq_nrs: Sequence[int], op_seq: np.ndarray, op_ts: np.ndarray, at_ns: int) -> int:
    """Index into the host ops (their Kineto "Sequence number" `op_seq`, start `op_ts`) that submitted work
    recorded with `seq_nrs`, started at or before `at_ns`: the latest op whose number equals a ``seq_nr`` or
    is one below it (peek() after the op made its autograd node); -1 when none."""
    want = np.asarray([s for n in seq_nrs for s in (n, n - 1)], dtype=np.int64)
    if not len(want) or not len(op_seq):
        return -1
    cand = np.flatnonzero(np.isin(op_seq, want) & (op_ts <= at_ns))
    if not len(cand):
        return -1
    return int(cand[np.argmax(op_ts[cand])])


def mapping_links(index: MappingIndex, op_seq: np.ndarray, op_ts: np.ndarray, nrt_ids: Sequence[Any],
                  dev_ts: np.ndarray) -> list[tuple[int, int]]:
    """(host op index, device event index) for each device event (a ``privateuse1_driver`` event, its
    ``nrt_sequence_id`` in `nrt_ids`, start `dev_ts`) whose runtime execution the mapping names, joined by
    `host_op_for`. ``th_id`` is never compared with the trace's thread ids (it is RecordFunction's counter)."""
    out = []
    for j, nrt in enumerate(nrt_ids):
        ids = index.get(int(nrt)) if _is_int(nrt) else None
        h = host_op_for([s for s, _, _ in ids], op_seq, op_ts, int(dev_ts[j])) if ids else -1
        if h >= 0:
            out.append((h, j))
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_or_none(v: Any) -> int | None:
    return int(v) if _is_int(v) else None
