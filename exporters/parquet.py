"""Parquet export of the columnar model, for fleet-scale queries (DuckDB, Spark, pandas).

`write_parquet(trace, out_dir)` writes one file per table into `out_dir`:

  slices.parquet    ts_ns int64, dur_ns int64, name, cat (dictionary strings), track int32, args (JSON string)
  instants.parquet  ts_ns int64, name, cat, track int32, args
  counters.parquet  ts_ns int64, track int32, value float64
  flows.parquet     flow_id int64, src int64, dst int64 (row numbers in slices.parquet), name, cat
  tracks.parquet    track int32, name, kind, tid (string), process int32, pid (string), process_name, rank, unit
  metadata.parquet  key, value (JSON string): trace metadata, plus one row "findings" holding the findings list

Timestamps are Unix nanoseconds. Rows keep the model's order, so `src`/`dst` are row numbers of slices.parquet.
A job of many ranks is one dataset partitioned by rank (`neuron-prof export run/ -o job.parquet`):
`job.parquet/rank=R/<table>.parquet`, written by `write_parquet(trace, root / f"rank={R}", rank=R)`; DuckDB,
Spark and Athena read `rank` from the folder names (hive partitioning), e.g.
`SELECT rank, sum(dur_ns) FROM 'job.parquet/*/slices.parquet' GROUP BY rank`; join tables on (rank, track):
track ids are per rank.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from neuron_prof.errors import ExportError

if TYPE_CHECKING:
    from neuron_prof.model import Trace

SCHEMA_VERSION = 1


def _pa() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the environment
        raise ExportError("Parquet export needs pyarrow: pip install 'neuron-prof[parquet]'") from None
    return pa, pq


def _dict_strings(pa: Any, ids: np.ndarray, strings: list[str]) -> Any:
    """A dictionary-encoded string column straight from interned ids (no per-row Python strings)."""
    return pa.DictionaryArray.from_arrays(pa.array(ids, type=pa.int32()), pa.array(strings, type=pa.string()))


def _args_column(pa: Any, trace: Trace, idx: np.ndarray) -> Any:
    return pa.array([None if i < 0 else trace.args.raw(int(i)).decode("utf-8", "replace") for i in idx],
                    type=pa.string())


def write_parquet(trace: Trace, out_dir: str | Path, rank: int | None = None) -> Path:
    """Write the trace's tables as Parquet files into `out_dir` (created). Returns the folder.

    `rank`: the partition's rank (a job's dataset): tracks whose process names no rank get it."""
    pa, pq = _pa()
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ExportError(f"{out}: cannot create folder: {e.strerror or e}") from None
    strings = trace.strings.as_list()
    s, i, c, f = trace.slices, trace.instants, trace.counters, trace.flows
    tables = {
        "slices": pa.table({"ts_ns": s.ts_ns, "dur_ns": s.dur_ns, "name": _dict_strings(pa, s.name, strings),
                            "cat": _dict_strings(pa, s.cat, strings), "track": s.track,
                            "args": _args_column(pa, trace, s.args)}),
        "instants": pa.table({"ts_ns": i.ts_ns, "name": _dict_strings(pa, i.name, strings),
                              "cat": _dict_strings(pa, i.cat, strings), "track": i.track,
                              "args": _args_column(pa, trace, i.args)}),
        "counters": pa.table({"ts_ns": c.ts_ns, "track": c.track, "value": c.value}),
        "flows": pa.table({"flow_id": f.flow_id, "src": f.src, "dst": f.dst,
                           "name": _dict_strings(pa, f.name, strings), "cat": _dict_strings(pa, f.cat, strings)}),
        "tracks": pa.table({
            "track": pa.array(range(len(trace.tracks)), type=pa.int32()),
            "name": [t.name for t in trace.tracks], "kind": [t.kind for t in trace.tracks],
            "tid": [None if t.tid is None else str(t.tid) for t in trace.tracks],
            "process": pa.array([t.process for t in trace.tracks], type=pa.int32()),
            "pid": [str(trace.processes[t.process].pid) for t in trace.tracks],
            "process_name": [trace.processes[t.process].name for t in trace.tracks],
            "rank": pa.array([rank if (r := trace.processes[t.process].rank) is None else r for t in trace.tracks],
                             type=pa.int32()),
            "unit": [t.unit for t in trace.tracks]}),
        "metadata": pa.table({
            "key": ["schema_version", *trace.metadata.keys(), "findings"],
            "value": [orjson.dumps(SCHEMA_VERSION).decode(),
                      *(orjson.dumps(v, default=str).decode() for v in trace.metadata.values()),
                      orjson.dumps(list(trace.findings), default=str).decode()]}),
    }
    try:
        for name, table in tables.items():
            pq.write_table(table, out / f"{name}.parquet", compression="zstd")
    except OSError as e:
        raise ExportError(f"{out}: cannot write Parquet: {e.strerror or e}") from None
    return out
