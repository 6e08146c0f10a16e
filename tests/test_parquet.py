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


def _docs_query() -> str:
    """The DuckDB query docs/formats.md shows over a job's dataset (its folder as DATASET)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "formats.md").read_text()
    start = text.index('duckdb -c "SELECT rank, ') + len('duckdb -c "')
    return text[start:text.index('"', start)].replace("job.parquet", "DATASET")


DOCS_QUERY = _docs_query()


def test_many_ranks_are_one_dataset_partitioned_by_rank(tmp_path, capsys) -> None:
    from neuron_prof.cli import main
    from neuron_prof.exporters import write_trace

    run = tmp_path / "run"
    run.mkdir()
    trace, durs = _trace()
    for r in (0, 1, 2):
        t = trace.replace(metadata={**trace.metadata, "rank": r})
        write_trace(t, run / f"trace.rank{r}.pftrace")
        if r == 1:  # a capture writes both formats: one of them is read
            write_trace(t, run / f"trace.rank{r}.json")
    (run / "trace.rank3.json").write_text('{"traceEvents": [')  # a rank killed while writing
    out = tmp_path / "job.parquet"
    assert main(["export", str(run), "-o", str(out), "--workers", "0"]) == 1  # a rank failed: exit 1
    cap = capsys.readouterr()
    assert "dataset of 3 rank(s)" in cap.out and cap.err.count("\n") == 1 and "trace.rank3.json" in cap.err
    assert sorted(p.name for p in out.iterdir()) == ["rank=0", "rank=1", "rank=2"]  # nothing half-written left
    assert sorted(p.name for p in (out / "rank=1").iterdir()) == [
        "counters.parquet", "flows.parquet", "instants.parquet", "metadata.parquet", "slices.parquet", "tracks.parquet"]
    con = duckdb.connect()
    # the files carry their rank too (a reader without hive partitioning, a file copied elsewhere)
    assert con.execute(f"SELECT DISTINCT rank FROM read_parquet('{out}/rank=1/tracks.parquet', "
                       "hive_partitioning=false)").fetchall() == [(1,)]
    rows = con.execute(DOCS_QUERY.replace("DATASET", str(out))).fetchall()
    per_name = {n: int(durs[k::3].sum()) for k, n in enumerate(("aten::mm", "aten::add", "[bold]x[/]"))}
    top = max(per_name, key=per_name.__getitem__)
    assert sorted(rows) == [(r, top, per_name[top] / 1e6) for r in (0, 1, 2)]
    # a dataset is never written over, and several ranks go to Parquet only
    assert main(["export", str(run / "trace.rank0.pftrace"), str(run / "trace.rank2.pftrace"), "-o", str(out)]) == 2
    assert main(["export", str(run), "-o", str(tmp_path / "m.pftrace")]) == 2
    err = capsys.readouterr().err
    assert "already holds a dataset" in err and "Parquet dataset only" in err


def test_rows_are_written_a_row_group_at_a_time_with_the_same_values(tmp_path, monkeypatch) -> None:
    """A big trace's tables go out a window of rows at a time (bounded memory): many row groups, each row's
    values, names and args text as in the trace; rows without args are null; args that are no UTF-8 text are
    written with the bad bytes replaced."""
    import pyarrow.parquet as pq

    from neuron_prof.exporters import parquet
    from neuron_prof.model import windows

    b = TraceBuilder()
    main = b.thread_track(10, 1, "main")
    name, cat = b.strings.intern("op"), b.strings.intern("cpu_op")
    for k in range(300):
        raw = b'{"k":"\xff\xfe"}' if k == 123 else None if k % 7 == 0 else b'{"k":%d,"s":"%s"}' % (k, b"x" * (k % 50))
        b.add_slice_ids(main, 1_000 * k, 10 + k, name if k % 2 else cat, cat, -1 if raw is None else b.args.add_raw(raw))
    trace = b.build()
    monkeypatch.setattr(windows, "ROW_WINDOW", 64)
    monkeypatch.setattr(parquet, "ARGS_WINDOW_BYTES", 500)
    out = write_parquet(trace, tmp_path / "pq")
    f = pq.ParquetFile(out / "slices.parquet")
    sizes = [f.metadata.row_group(g).num_rows for g in range(f.metadata.num_row_groups)]
    off = trace.args.buffers[1]
    text = [0 if i < 0 else int(off[i + 1] - off[i]) for i in trace.slices.args.tolist()]
    bounds = np.cumsum([0, *sizes])
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        assert hi - lo <= 64 and (hi - lo == 1 or sum(text[lo:hi]) <= 500)  # a window's rows, its args' bytes
        assert hi == len(text) or hi % 64 == 0 or sum(text[lo:hi + 1]) > 500  # cut only where the next row exceeds
    got = f.read().to_pydict()
    s = trace.slices
    assert got["ts_ns"] == s.ts_ns.tolist() and got["dur_ns"] == s.dur_ns.tolist()
    assert got["track"] == s.track.tolist() and got["name"] == [trace.s(int(i)) for i in s.name]
    want = [None if i < 0 else trace.args.raw(int(i)).decode("utf-8", "replace") for i in s.args.tolist()]
    assert got["args"] == want and want[123] == '{"k":"\ufffd\ufffd"}' and want[7] is None
