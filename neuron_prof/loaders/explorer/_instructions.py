"""Device time per engine, per framework op, per source line and per execution, from ``Instruction``.

Sources: neuron-explorer-schema-7.4.0.txt and aws-neuron-sdk profile-schema-reference.rst:
``Instruction.raw_framework_id`` ("unique identifier for framework level instruction"; when an instruction maps
to several, one is chosen by modular flow invocation index) is the key of ``FrameworkInstruction``
(``raw_framework_id`` → ``framework_name``, e.g. ``NeuronLlamaDecoderLayer[1]/function[2]/aten.add``);
``Instruction.stack_frame_ids`` (a string ``[101, 102, 103]``: several frames when the compiler fused
operators) are ``StackFrame.id`` (→ ``parent_frame_id``, ``file_location_id`` → ``StackFrameFileLocation``:
``file_name_id``, ``function_name_id``, ``line_number`` → ``StackFrameFileName`` / ``StackFrameFunctionName``).
Assumption (the docs do not say more; docs/trainium.md): an instruction's time counts once for its framework
op and once for EACH of its stack frames (a fused instruction serves all of them); the frame chain of an id,
innermost first, is its call stack, and its user line is the one call-site rule's (`model.callsite`).

``Instruction`` can hold 10^8 rows: it is read in batches of the columns needed and aggregated by pyarrow,
never held whole. Each instruction's execution is the ExecutionInfo interval holding its ``start_ts``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from neuron_prof.loaders.explorer._tables import Tables
from neuron_prof.model.callsite import site_from_stack
from neuron_prof.model.order import searchsorted

TOP = 20
_INT = re.compile(r"-?\d+")


def op_name(framework_name: str) -> str:
    """The framework op a ``framework_name`` path ends in, written as torch.profiler names it:
    ``Layer[1]/function[2]/aten.add`` → ``aten::add``."""
    leaf = framework_name.rsplit("/", 1)[-1]
    leaf = re.sub(r"\[\d+\]$", "", leaf)
    ns, dot, rest = leaf.partition(".")
    return f"{ns}::{rest.split('.')[0]}" if dot and ns in ("aten", "prims", "c10d", "neuron", "torch") else leaf


def instruction_pass(tables: Tables, exec_start: np.ndarray | None = None,
                     exec_end: np.ndarray | None = None) -> dict[str, Any]:
    """One pass over Instruction: ``per_engine``, ``top_opcodes_ns``, device ns per framework id, per stack
    frame id string and per execution index (when `exec_start`/`exec_end`, device clock, are given)."""
    import pyarrow as pa

    if not tables.need("instruction totals", "Instruction", ("duration_ns",)):
        return {}
    have = tables.columns("Instruction")
    per_exec = exec_start is not None and len(exec_start) and "start_ts" in have
    cols: list[str] = [c for c in ("engine", "opcode", "duration_ns", "raw_framework_id", "stack_frame_ids")
                       if c in have]
    if per_exec:
        cols.append("start_ts")
    eng: dict[str, list[int]] = {}
    ops: dict[str, int] = {}
    fw: dict[int, list[int]] = {}
    frames: dict[str, int] = {}
    by_key: tuple[tuple[str, dict[Any, list[int]]], ...] = (("engine", eng), ("raw_framework_id", fw))
    ex = np.zeros(len(exec_start) if exec_start is not None and per_exec else 0, dtype=np.int64)
    for batch in tables.batches("Instruction", cols):
        t = pa.Table.from_batches([batch])
        t = t.set_column(t.column_names.index("duration_ns"), "duration_ns",
                         t.column("duration_ns").cast(pa.int64()).fill_null(0))
        for key, acc in by_key:
            if key in t.column_names:
                for r in t.group_by(key).aggregate([("duration_ns", "sum"), ("duration_ns", "count")]).to_pylist():
                    if r[key] is None:
                        continue
                    a = acc.setdefault(r[key] if key != "engine" else str(r[key]), [0, 0])
                    a[0] += int(r["duration_ns_count"])
                    a[1] += int(r["duration_ns_sum"] or 0)
        if "opcode" in t.column_names:
            for r in t.group_by("opcode").aggregate([("duration_ns", "sum")]).to_pylist():
                ops[str(r["opcode"])] = ops.get(str(r["opcode"]), 0) + int(r["duration_ns_sum"] or 0)
        if "stack_frame_ids" in t.column_names:
            for r in t.group_by("stack_frame_ids").aggregate([("duration_ns", "sum")]).to_pylist():
                if r["stack_frame_ids"]:
                    frames[r["stack_frame_ids"]] = frames.get(r["stack_frame_ids"], 0) + int(r["duration_ns_sum"])
        if per_exec:
            assert exec_start is not None and exec_end is not None
            st = t.column("start_ts").cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False)
            i = searchsorted(exec_start, st, "right") - 1
            ok = (i >= 0) & (st <= exec_end[np.maximum(i, 0)])
            ex += np.bincount(i[ok], weights=t.column("duration_ns").to_numpy(zero_copy_only=False)[ok],
                              minlength=len(ex)).astype(np.int64)
    out: dict[str, Any] = {
        "per_engine": {e: {"instructions": c, "time_ns": ns} for e, (c, ns) in sorted(eng.items())},
        "top_opcodes_ns": dict(sorted(ops.items(), key=lambda kv: -kv[1])[:TOP])}
    if fw:
        out["_framework_ids"] = fw
    if frames:
        out["_frames"] = frames
    if per_exec:
        out["_per_execution"] = ex
    return out


def framework_ops(tables: Tables, by_id: dict[int, list[int]]) -> list[dict[str, Any]]:
    """Device time per framework op (FrameworkInstruction.framework_name), most first: ``framework_name``,
    ``op`` (`op_name`), ``instructions``, ``device_ns``. Ids FrameworkInstruction lacks are ``framework id N``."""
    import pyarrow as pa

    names: dict[int, str] = {}
    if tables.need("device time per framework op", "FrameworkInstruction", ("raw_framework_id", "framework_name")):
        t = tables.table("FrameworkInstruction", {"raw_framework_id": pa.int64(), "framework_name": pa.string()})
        if t is not None:
            for i, n in zip(t.column("raw_framework_id").to_pylist(), t.column("framework_name").to_pylist()):
                if i is not None and n:
                    names.setdefault(int(i), str(n))
    acc: dict[str, list[int]] = {}
    for i, (count, ns) in by_id.items():
        n = names.get(int(i), f"framework id {i}")
        a = acc.setdefault(n, [0, 0])
        a[0] += count
        a[1] += ns
    rows = [{"framework_name": n, "op": op_name(n), "instructions": c, "device_ns": ns} for n, (c, ns) in acc.items()]
    return sorted(rows, key=lambda r: -r["device_ns"])


def source_lines(tables: Tables, by_ids: dict[str, int]) -> list[dict[str, Any]]:
    """Device time per user source line, through the StackFrame tables and the one call-site rule: ``site``
    (``path:LINE``, or ``path function`` when no line), ``stack`` (outermost first), ``device_ns``."""
    stacks = _stacks(tables)
    if not stacks:
        return []
    acc: dict[str, list[Any]] = {}
    for ids, ns in by_ids.items():
        for fid in dict.fromkeys(_INT.findall(ids)):  # each frame of a fused instruction once
            stack = stacks.get(fid)
            if stack is None:
                continue
            site = site_from_stack(stack, True)
            key = site.call_site or site.function
            if not key:
                continue
            a = acc.setdefault(key, [0, list(site.stack)])
            a[0] += ns
    rows = [{"site": k, "stack": v[1], "device_ns": v[0]} for k, v in acc.items()]
    return sorted(rows, key=lambda r: -r["device_ns"])[:TOP]


def _stacks(tables: Tables) -> dict[str, str]:
    """StackFrame id -> its call stack as Kineto writes one (``path(LINE): function;...``, innermost first)."""
    import pyarrow as pa

    s, i64 = pa.string(), pa.int64()
    need = (tables.need("device time per source line", "StackFrame", ("id", "file_location_id", "parent_frame_id"))
            and tables.need("device time per source line", "StackFrameFileLocation",
                            ("id", "file_name_id", "function_name_id", "line_number")))
    if not need:
        return {}
    fr = tables.table("StackFrame", {"id": s, "file_location_id": s, "parent_frame_id": s})
    loc = tables.table("StackFrameFileLocation", {"id": s, "file_name_id": s, "function_name_id": s,
                                                  "line_number": i64})
    if fr is None or loc is None:
        return {}
    names = {}
    for table in ("StackFrameFileName", "StackFrameFunctionName"):
        t = tables.table(table, {"id": s, "name": s}) if tables.need("source names", table, ("id", "name")) else None
        names[table] = dict(zip(t.column("id").to_pylist(), t.column("name").to_pylist())) if t is not None else {}
    where = {}
    for lid, fid, fnid, line in zip(*(loc.column(c).to_pylist() for c in ("id", "file_name_id",
                                                                          "function_name_id", "line_number"))):
        f = names["StackFrameFileName"].get(fid)
        if f:
            where[lid] = f"{f}({int(line or 0)}): {names['StackFrameFunctionName'].get(fnid) or '?'}"
    parent = dict(zip(fr.column("id").to_pylist(), fr.column("parent_frame_id").to_pylist()))
    frame = {i: where.get(loc_id) for i, loc_id in zip(fr.column("id").to_pylist(),
                                                       fr.column("file_location_id").to_pylist())}
    out = {}
    for fid in frame:
        parts: list[str] = []
        cur, seen = fid, set()
        while cur not in (None, "", "0") and cur not in seen and len(parts) < 256:
            seen.add(cur)
            if name := frame.get(cur):
                parts.append(name)
            cur = parent.get(cur)
        out[str(fid)] = ";".join(parts)
    return out
