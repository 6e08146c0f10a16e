"""Neuron Explorer's whole-profile tables: ``Summary``, ``OpcodeSummary``, ``ExecutionInfo`` per NEFF.

Source: neuron-explorer-schema-7.4.0.txt (aws-neuron-sdk profile-schema-reference.rst). ``Summary`` is one row
of metrics (times in s, shares in %, bytes, flops); ``OpcodeSummary`` one row per (engine, opcode) with
``instruction_count``, ``instruction_time_ns``, ``active_time_ns``, ``active_time_percent``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.loaders.explorer._tables import Tables

SUMMARY_FIELDS = ("total_time", "mfu_estimated_percent", "mbu_estimated_percent", "hfu_estimated_percent",
                  "dma_active_time_percent", "cc_op_active_time_percent", "total_active_time_percent",
                  "hbm_read_bytes", "hbm_write_bytes", "spill_save_bytes", "spill_reload_bytes", "model_flops",
                  "hardware_flops", "dma_transfer_total_bytes", "total_exec_time")
"""Summary metrics kept (plus every per-engine ``*_active_time_percent``)."""
TOP_OPCODES = 20


def one_row(tables: Tables, table: str, fields: tuple[str, ...]) -> dict[str, Any] | None:
    """The fields of a one-row table that its files hold, typed as written (None: no such table)."""
    import pyarrow.parquet as pq

    if not tables.has(table):
        return None
    have = tables.columns(table)
    types = {}
    for f in tables.parts[table]:
        s = pq.read_schema(f)
        for name in fields:
            if name in s.names and name not in types:
                types[name] = s.field(name).type
    want = [f for f in fields if f in have]
    t = tables.table(table, {f: types[f] for f in want})
    if t is None or not t.num_rows:
        return {}
    return t.slice(0, 1).to_pylist()[0]


def summary(tables: Tables) -> dict[str, Any]:
    """Summary's metrics (numbers only)."""
    cols = tables.columns("Summary")
    fields = tuple(sorted(f for f in cols if f in SUMMARY_FIELDS or f.endswith("_active_time_percent")))
    row = one_row(tables, "Summary", fields) or {}
    return {k: v for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def opcodes(tables: Tables) -> list[dict[str, Any]]:
    """OpcodeSummary rows, most instruction time first (the top `TOP_OPCODES`)."""
    import pyarrow as pa

    if not tables.need("opcode summary", "OpcodeSummary", ("engine", "opcode", "instruction_time_ns")):
        return []
    i64 = pa.int64()
    t = tables.table("OpcodeSummary", {"engine": pa.string(), "opcode": pa.string(), "instruction_count": i64,
                                       "instruction_time_ns": i64, "active_time_ns": i64,
                                       "active_time_percent": pa.float64()})
    if t is None:
        return []
    rows = [{k: v for k, v in r.items() if v is not None} for r in t.to_pylist()]
    return sorted(rows, key=lambda r: -(r.get("instruction_time_ns") or 0))[:TOP_OPCODES]


def executions_per_neff(tables: Tables) -> dict[str, Any]:
    """Executions and their summed time per NEFF from ExecutionInfo (durations: the times are relative)."""
    import pyarrow as pa

    if not tables.need("executions per NEFF", "ExecutionInfo", ("execution_start_ts", "execution_end_ts")):
        return {}
    i64 = pa.int64()
    t = tables.table("ExecutionInfo", {"neff_name": pa.string(), "execution_start_ts": i64,
                                       "execution_end_ts": i64})
    if t is None or not t.num_rows:
        return {}
    out: dict[str, dict[str, int]] = {}
    start = t.column("execution_start_ts").fill_null(0).to_numpy(zero_copy_only=False)
    end = t.column("execution_end_ts").fill_null(0).to_numpy(zero_copy_only=False)
    for neff, d in zip(t.column("neff_name").fill_null("").to_pylist(), np.maximum(end - start, 0).tolist()):
        acc = out.setdefault(neff or "?", {"executions": 0, "time_ns": 0})
        acc["executions"] += 1
        acc["time_ns"] += int(d)
    return out
