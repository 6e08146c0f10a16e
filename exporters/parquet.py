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

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from neuron_prof.errors import ExportError
from neuron_prof.model.order import searchsorted
from neuron_prof.model.windows import row_windows

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


ARGS_WINDOW_BYTES = 1 << 24
"""Bytes of args text a row group holds at most: what a window of rows costs in memory beyond its columns."""


def _dict_strings(pa: Any, ids: np.ndarray, strings: Any) -> Any:
    """A dictionary-encoded string column straight from interned ids (no per-row Python strings)."""
    return pa.DictionaryArray.from_arrays(pa.array(ids, type=pa.int32()), strings)


def _args_column(pa: Any, trace: Trace, idx: np.ndarray) -> Any:
    """The JSON text of each row's args (null for -1), gathered by Arrow from a string array over the part of the
    store's blob these rows use (no copy: a cached trace's blob stays memory-mapped); row by row, bad bytes
    replaced, where the text is not UTF-8 (Arrow's strings must be) or the part is too big for 32-bit offsets."""
    blob, off = trace.args.buffers
    have = idx[idx >= 0]
    if len(have):
        lo, hi = int(have.min()), int(have.max()) + 1
        base = int(off[lo])
        if int(off[hi]) - base < 1 << 31:
            import pyarrow.compute as pc

            local = np.asarray(off[lo:hi + 1], dtype=np.int64) - base
            part = pa.StringArray.from_buffers(hi - lo, pa.py_buffer(local.astype(np.int32)),
                                               pa.py_buffer(memoryview(blob)[base:int(off[hi])]))
            col = pc.take(part, pa.array(idx - lo, type=pa.int64(), mask=idx < 0))
            try:
                col.validate(full=True)
                return col
            except pa.ArrowInvalid:
                pass
    return pa.array([None if i < 0 else trace.args.raw(int(i)).decode("utf-8", "replace") for i in idx.tolist()],
                    type=pa.string())


def _row_groups(trace: Trace, idx: np.ndarray) -> Iterator[tuple[int, int]]:
    """[a, z) windows of the rows whose args are `idx`: `ROW_WINDOW` rows at most and at most `ARGS_WINDOW_BYTES`
    of args text (one row at least). Each is one row group, built and written before the next, and the pages of
    the trace's mapped columns read for it are handed back after it (`row_windows`)."""
    off = trace.args.buffers[1]
    for a, z in row_windows(trace, len(idx)):
        part = np.asarray(idx[a:z], dtype=np.int64)
        safe = np.maximum(part, 0)
        size = np.where(part >= 0, off[safe + 1] - off[safe], 0) if len(off) > 1 else np.zeros(len(part), np.int64)
        cum = np.cumsum(size)
        lo, base = a, 0
        while lo < z:
            hi = min(z, max(lo + 1, a + int(searchsorted(cum, base + ARGS_WINDOW_BYTES, "right"))))
            yield lo, hi
            trace.drop_pages()  # the args text read for it: not held through the next group
            base = int(cum[hi - a - 1])
            lo = hi


def _write_rows(pa: Any, pq: Any, path: Path, n: int, groups: Iterable[tuple[int, int]], table: Callable[[int, int], Any],
                empty: Any) -> None:
    """A Parquet file of `n` rows written a row group at a time: `table(a, z)` builds rows [a, z)."""
    writer = None
    try:
        for a, z in groups:
            t = table(a, z)
            if writer is None:
                writer = pq.ParquetWriter(path, t.schema, compression="zstd")
            writer.write_table(t)
            del t
            pa.default_memory_pool().release_unused()  # the row group's buffers back to the system
        if writer is None:  # no rows: the schema alone
            pq.write_table(empty, path, compression="zstd")
    finally:
        if writer is not None:
            writer.close()


def write_parquet(trace: Trace, out_dir: str | Path, rank: int | None = None) -> Path:
    """Write the trace's tables as Parquet files into `out_dir` (created). Returns the folder.

    `rank`: the partition's rank (a job's dataset): tracks whose process names no rank get it."""
    pa, pq = _pa()
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ExportError(f"{out}: cannot create folder: {e.strerror or e}") from None
    strings = pa.array(trace.strings.as_list(), type=pa.string())
    s, i, c, f = trace.slices, trace.instants, trace.counters, trace.flows

    def named(t: Any, a: int, z: int, **cols: Any) -> Any:  # a table's rows [a, z) with its name and cat
        return pa.table({**cols, "name": _dict_strings(pa, t.name[a:z], strings),
                         "cat": _dict_strings(pa, t.cat[a:z], strings)})

    def events(t: Any, a: int, z: int, **cols: Any) -> Any:
        part = named(t, a, z, ts_ns=t.ts_ns[a:z], **cols)
        return part.append_column("track", pa.array(t.track[a:z])).append_column(
            "args", _args_column(pa, trace, np.asarray(t.args[a:z], dtype=np.int64)))

    big: dict[str, tuple[int, Iterable[tuple[int, int]], Callable[[int, int], Any]]] = {
        "slices": (len(s), _row_groups(trace, s.args), lambda a, z: events(s, a, z, dur_ns=s.dur_ns[a:z])),
        "instants": (len(i), _row_groups(trace, i.args), lambda a, z: events(i, a, z)),
        "counters": (len(c), row_windows(trace, len(c)),
                     lambda a, z: pa.table({"ts_ns": c.ts_ns[a:z], "track": c.track[a:z], "value": c.value[a:z]})),
        "flows": (len(f), row_windows(trace, len(f)),
                  lambda a, z: named(f, a, z, flow_id=f.flow_id[a:z], src=f.src[a:z], dst=f.dst[a:z])),
    }
    tables = {
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
        for name, (n, groups, table) in big.items():
            _write_rows(pa, pq, out / f"{name}.parquet", n, groups, table, table(0, 0))
        for name, small in tables.items():
            pq.write_table(small, out / f"{name}.parquet", compression="zstd")
    except OSError as e:
        raise ExportError(f"{out}: cannot write Parquet: {e.strerror or e}") from None
    return out
