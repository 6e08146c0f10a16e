"""Parquet export, queried back with DuckDB."""

from __future__ import annotations

import duckdb
import numpy as np

from neuron_prof.exporters.parquet import write_parquet
from neuron_prof.model import ProcessKind, TraceBuilder, TrackKind


def _trace():
    b = TraceBuilder()
    main = b.thread_track(10, 1, "main")
    dev = b.track(b.process("neuron:0", "neuron:0", ProcessKind.DEVICE), "neuron:0 device", TrackKind.DEVICE)
    mem = b.track(1, "neuron:0 allocated", TrackKind.MEMORY, unit="bytes")
    rng = np.random.default_rng(0)
    durs = rng.integers(1, 1000, 500)
    for k, d in enumerate(durs):
        op = b.add_slice(main, 10_000 * k, int(d), ["aten::mm", "aten::add", "[bold]x[/]"][k % 3], "cpu_op",
                         {"k": int(k)})
        if k % 5 == 0:
            b.add_flow(op, b.add_slice(dev, 10_000 * k + 5, int(d), "mm_kernel"))
    b.add_counter(mem, 5, 1024.0)
    b.metadata["rank"] = 3
    b.findings.append({"kind": "sync_point", "cost_ns": 7})
    return b.build(), durs


def test_duckdb_reads_what_was_written(tmp_path) -> None:
    trace, durs = _trace()
    out = write_parquet(trace, tmp_path / "pq")
    con = duckdb.connect()
    got = dict(con.execute(
        f"SELECT s.name, sum(s.dur_ns) FROM '{out}/slices.parquet' s JOIN '{out}/tracks.parquet' t USING (track) "
        "WHERE t.kind = 'thread' GROUP BY 1").fetchall())
    assert got == {"aten::mm": int(durs[0::3].sum()), "aten::add": int(durs[1::3].sum()),
                   "[bold]x[/]": int(durs[2::3].sum())}
    # flows point at slice row numbers
    n_flows, bad = con.execute(
        f"WITH s AS (SELECT row_number() OVER () - 1 AS row, name FROM '{out}/slices.parquet') "
        f"SELECT count(*), count(*) FILTER (WHERE d.name <> 'mm_kernel') FROM '{out}/flows.parquet' f "
        "JOIN s d ON d.row = f.dst").fetchone()
    assert (n_flows, bad) == (100, 0)
    assert con.execute(f"SELECT value FROM '{out}/counters.parquet'").fetchone()[0] == 1024.0
    meta = dict(con.execute(f"SELECT key, value FROM '{out}/metadata.parquet'").fetchall())
    assert meta["rank"] == "3" and '"sync_point"' in meta["findings"]
    assert con.execute(f"SELECT name FROM '{out}/slices.parquet' WHERE CAST(json_extract(args, '$.k') AS INT) = 7"
                       ).fetchall() == [("aten::add",)]
