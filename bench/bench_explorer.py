"""Neuron Explorer import: load time and peak memory of a processed profile folder, against reading its
tables whole with pyarrow (the floor any importer pays) in the same run.

    python -m bench.bench_explorer --events 1000000 --instructions 10000000

The last row loads the runtime output folder as one trace (its trace.json of one cpu_op per framework row,
the tables beside it in ``<ts>_parquet``): the join of the framework events to trace.json's ops included.

The folder is written to the documented schema (tests/fakes/explorer_profile.py shapes, shared/design/
neuron-explorer-facts.md): `--events` SystemProfileEvents rows (a third each framework / neuron_rt / neuron_hw,
every framework row with a flow id), split in 4 files; `--instructions` Instruction rows (7 columns) in 8 files,
of which the loader reads 3 columns batch by batch. Each measurement runs in a fresh process (its own peak RSS).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

T0 = 1_764_000_000_000_000_000


def write(folder: Path, events: int, instructions: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"profile_schema_version": ["7.4.0"]}), folder / "Metadata.parquet")
    n = events - events % 3
    k = np.arange(n, dtype=np.int64)
    op = k // 3
    src = np.array(["framework", "neuron_rt", "neuron_hw"], dtype=object)[k % 3]
    start = T0 + op * 10_000 + (k % 3) * 1_000
    flow = pa.array([[str(o)] if s != "neuron_hw" else None for o, s in zip(op.tolist(), src.tolist())],
                    type=pa.list_(pa.string()))
    t = pa.table({"id": k, "name": pa.array(np.where(k % 3 == 0, "aten::mm", "nrt_execute").astype(object)),
                  "start_ts": start, "end_ts": start + 900, "duration_ns": np.full(n, 900),
                  "trace_event_source": pa.array(src), "instance_id": pa.array(["i-0"] * n),
                  "process_id": np.full(n, 4242), "thread_id": np.full(n, 7), "nc_idx": (op % 2),
                  "pcore_idx": (op % 2), "worker_gid": np.zeros(n, np.int64), "flow_id": flow,
                  "framework_stream_id": pa.nulls(n, pa.string())})
    step = -(-n // 4)
    for i in range(4):
        pq.write_table(t.slice(i * step, step), folder / f"SystemProfileEvents_{i}.parquet")
    step = -(-instructions // 8)
    for i in range(8):
        m = min(step, instructions - i * step)
        j = np.arange(m, dtype=np.int64)
        pq.write_table(pa.table({"start_ts": T0 + j, "end_ts": T0 + j + 5, "duration_ns": 5 + j % 3,
                                 "engine": pa.array(np.array(["tensor", "vector", "scalar"], dtype=object)[j % 3]),
                                 "opcode": pa.array(np.array(["MATMUL", "ACT"], dtype=object)[j % 2]),
                                 "hlo_name": pa.array([f"dot.{x}" for x in (j % 1000).tolist()]),
                                 "layer": pa.array(["layer[1]"] * m)}), folder / f"Instruction_{i}.parquet")


def write_host(folder: Path, events: int) -> None:
    """trace.json of the capture: one Kineto cpu_op per framework row (what a runtime output folder holds;
    the tables then sit beside it in ``<folder>_parquet``), each at its row's start."""
    import orjson

    op = np.arange(events // 3, dtype=np.int64)
    ts = ((T0 + op * 10_000) // 1000).tolist()  # Unix µs (no baseTimeNanoseconds), exact: 10 µs apart
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 4242, "tid": 7, "ts": t, "dur": 0.9,
           "args": {"Sequence number": i}} for i, t in enumerate(ts)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trace.json").write_bytes(orjson.dumps({"traceEvents": ev}))
    for raw in ("ntrace.pb", "trace_info.pb"):  # the runtime's own files: what makes it a capture folder
        (folder / raw).write_bytes(b"\0")


_CHILD = {
    "load": "from neuron_prof.loaders.explorer.reader import load_explorer as f; t = f(p); n = len(t.slices)",
    "host": "from neuron_prof.loaders import load; t = load(p.removesuffix('_parquet') + '/trace.json'); "
            "n = len(t.slices)",
    "capture": "from neuron_prof.loaders import load; t = load(p); "
               "n = t.metadata['neuron_explorer']['framework_join']['joined']",
    "read_whole": ("import pyarrow.parquet as pq, glob; n = sum(pq.read_table(x).num_rows for x in "
                   "glob.glob(p + '/*.parquet'))"),
}


def measure(what: str, folder: Path) -> dict[str, float]:
    code = ("import json, resource, sys, time; p = sys.argv[1]; t0 = time.perf_counter(); "
            f"{_CHILD[what]}; print(json.dumps({{'s': time.perf_counter() - t0, "
            "'rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 'rows': n}))")
    out = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=float, default=1e6)
    ap.add_argument("--instructions", type=float, default=1e7)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "capture_parquet"
        write(folder, int(a.events), int(a.instructions))
        write_host(Path(tmp) / "capture", int(a.events))
        size = sum(f.stat().st_size for f in folder.iterdir()) / 1e6
        print(f"Explorer folder: {int(a.events):,} SystemProfileEvents, {int(a.instructions):,} Instruction rows, "
              f"{size:.0f} MB of Parquet")
        print(f"{'':32}{'seconds':>10}{'peak RSS MB':>14}")
        labels = (("read_whole", "pyarrow read_table, every table"), ("load", "neuron_prof load_explorer"),
                  ("host", "its trace.json alone"), ("capture", "capture: trace.json + tables"))
        rows = {w: measure(w, folder) for w, _ in labels}
        for w, label in labels:
            print(f"{label:32}{rows[w]['s']:>10.2f}{rows[w]['rss_mb']:>14.0f}")
        print(f"ratio load / read whole: {rows['load']['s'] / rows['read_whole']['s']:.2f}x time, "
              f"{rows['load']['rss_mb'] / rows['read_whole']['rss_mb']:.2f}x memory")
        both = rows["load"]["s"] + rows["host"]["s"]
        print(f"ratio capture / (tables + trace.json loaded apart): {rows['capture']['s'] / both:.2f}x time "
              f"({int(rows['capture']['rows']):,} of {int(a.events) // 3:,} framework events joined to "
              f"trace.json's ops)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
