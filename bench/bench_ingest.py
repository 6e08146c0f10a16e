"""Ingest benchmark: `neuron_prof.load` on a large Kineto trace beside plain `orjson.loads`, in one run.

    python -m bench.bench_ingest                       # generated 1.2M-event trace (bench.gen_trace)
    python -m bench.bench_ingest --events 1e6 --real   # plus a real trace repeated to ~1M events
    python -m bench.bench_ingest --trace big.json.gz   # any file

Each measurement runs in a fresh subprocess, so peak RSS (ru_maxrss) is that of the one job alone.
Rows: `orjson.loads` (read + parse the whole document: what any JSON tool pays before doing anything),
`neuron_prof.load` on a first open (index cache off; the compiled scanner, `neuron_prof/loaders/json/_jscan.c`, in
threads), the same on the Python path (NEURON_PROF_JSON_SCANNER=0: what runs when the extension is not built;
it parses large files in worker processes, see neuron_prof/loaders/json/_parallel.py), and a second open
(the columnar index beside the file); then first opens of the same trace as .json.gz and .pftrace. An event is one entry of `traceEvents`. Prints one table with the ratios to orjson.loads.
Targets (issue 9): 1.2M events / 284 MB in <= 5 s and <= 1 GB peak RSS; second open <= 1 s.
Issue 24: >= 177 MB/s (Perfetto's published JSON rate) and at most 0.2x `orjson.loads`' time in the same run
(read: the first open takes at most a fifth of the time orjson.loads takes on the same file, i.e. it is 5x
faster); `speed_lines` prints MB/s (wall, and per CPU second) and those ratios for every row.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_CHILD = r"""
import json, os, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
import orjson, numpy
import neuron_prof.loaders, neuron_prof.loaders.json.reader  # imports are not ingest
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0, c0 = time.perf_counter(), time.process_time()
if mode == "orjson":
    import gzip
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = orjson.loads(raw)
    n = len(doc["traceEvents"] if isinstance(doc, dict) else doc)
else:
    tr = neuron_prof.loaders.load(path)
    n = tr.n_events
t1, c1 = time.perf_counter(), time.process_time()
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": t1 - t0, "cpu": c1 - c0, "worker_cpu": kids.ru_utime + kids.ru_stime,
                  "path": neuron_prof.loaders.json_ingest_path(),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "worker_rss_mb": kids.ru_maxrss / 1024, "base_rss_mb": rss0 / 1024, "model_events": n}))
"""


def _run(mode: str, path: Path, env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, str(path)], capture_output=True, text=True, env=env,
                         check=False)
    if out.returncode != 0:
        raise SystemExit(f"{mode} on {path} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def generated(n: int, folder: Path) -> Path:
    """The generated trace of n events (made once, in a child process, kept in `folder`)."""
    p = folder / f"kineto_{n}.json"
    if not p.exists():
        subprocess.run([sys.executable, "-m", "bench.gen_trace", str(n), str(p)], check=True)
    return p


def real_repeated(n: int, folder: Path) -> Path:
    """The largest real trace in ../shared/traces/kineto, repeated with shifted times and ids to >= n entries."""
    src_dir = Path(__file__).resolve().parents[2] / "shared" / "traces" / "kineto"
    src = max(src_dir.glob("*.json*"), key=lambda p: p.stat().st_size)
    p = folder / f"real_{src.name.split('.')[0]}_{n}.json"
    if p.exists():
        return p
    doc = json.loads(gzip.open(src).read() if src.name.endswith(".gz") else src.read_bytes())
    evs = doc["traceEvents"]
    meta = [e for e in evs if e.get("ph") == "M"]
    body = [e for e in evs if e.get("ph") != "M"]
    ts = [e["ts"] for e in body if isinstance(e.get("ts"), (int, float))]
    span = max(ts) - min(ts) + 1000.0
    out = list(meta)
    k = 0
    while len(out) < n:
        for e in body:
            e2 = dict(e)
            if isinstance(e2.get("ts"), (int, float)):
                e2["ts"] = round(e2["ts"] + k * span, 3)
            if isinstance(e2.get("id"), int):
                e2["id"] = e2["id"] + k * 100_000_000
            out.append(e2)
        k += 1
    doc["traceEvents"] = out
    p.write_text(json.dumps(doc))
    return p


def measure(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every row, each in a fresh process. This process itself never parses the trace: a child inherits the
    parent's peak RSS through fork, so a big parent would inflate every child's number."""
    base_env = dict(os.environ)
    cache_dir = tempfile.mkdtemp(prefix="neuron-prof-bench-cache-")
    rows = [("orjson.loads (read + parse)", _run("orjson", path, base_env))]
    entries = rows[0][1]["model_events"]  # len(traceEvents)
    rows.append(("neuron_prof.load, first open", _run("load", path, {**base_env, "NEURON_PROF_CACHE": "0"})))
    rows.append(("first open, Python path (no scanner)",
                 _run("load", path, {**base_env, "NEURON_PROF_CACHE": "0", "NEURON_PROF_JSON_SCANNER": "0"})))
    cached_env = {**base_env, "NEURON_PROF_CACHE": "1", "NEURON_PROF_CACHE_DIR": cache_dir}
    _run("load", path, cached_env)  # writes the index
    rows.append(("neuron_prof.load, second open", _run("load", path, cached_env)))
    for _, r in rows:
        r["entries"] = entries
    return rows


def table(title: str, path: Path, rows: list[tuple[str, dict[str, Any]]]) -> str:
    ref = rows[0][1]
    size = path.stat().st_size / 1e6
    lines = [f"{title}: {path.name}, {rows[0][1]['entries']:,} events, {size:,.0f} MB",
             f"{'':40} {'wall s':>7} {'cpu s':>7} {'+workers':>8} {'events/s':>10} {'peak RSS MB':>12} "
             f"{'worker RSS':>10} {'x time':>7} {'x RSS':>6}"]
    for name, r in rows:
        lines.append(f"{name:40} {r['wall']:7.2f} {r['cpu']:7.2f} {r['worker_cpu']:8.2f} {r['entries'] / r['wall']:10,.0f} "
                     f"{r['rss_mb']:12,.0f} {r['worker_rss_mb']:10,.0f} {r['wall'] / ref['wall']:7.2f} "
                     f"{r['rss_mb'] / ref['rss_mb']:6.2f}")
    lines.append("(cpu s: the loading process; +workers: CPU of the loader's worker processes, which run beside it;\n"
                 " worker RSS: the largest worker's peak. On a busy machine wall s >> cpu s: compare cpu s.)")
    return "\n".join(lines)


PERFETTO_MB_S = 177.0
"""Perfetto trace processor's published JSON parse rate (issue 24)."""
MAX_X_ORJSON = 0.2


def speed_lines(rows: list[tuple[str, dict[str, Any]]], size: int) -> str:
    """MB/s and the ratio to orjson.loads (time, wall and CPU) of every row, and issue 24's verdict on the
    first open. CPU counts the loader's worker processes too: on a shared machine wall time is mostly waiting."""
    mb = size / 1e6
    ref = rows[0][1]
    ref_cpu = ref["cpu"] + ref["worker_cpu"]
    lines = [f"{'':40} {'MB/s':>7} {'MB/CPU s':>9} {'x orjson':>8} {'x orjson CPU':>12}"]
    for name, r in rows:
        cpu = r["cpu"] + r["worker_cpu"]
        lines.append(f"{name:40} {mb / r['wall']:7.1f} {mb / cpu:9.1f} {r['wall'] / ref['wall']:8.2f} "
                     f"{cpu / ref_cpu:12.2f}")
    first = dict(rows).get("neuron_prof.load, first open")
    if first is not None:
        lines.append(f"JSON path of the first open: {first['path']}")
        cpu = first["cpu"] + first["worker_cpu"]
        ok = lambda b: "met" if b else "MISSED"  # noqa: E731
        lines.append(f"issue 24: first open {mb / first['wall']:.0f} MB/s wall, {mb / cpu:.0f} MB per CPU s "
                     f"(>= {PERFETTO_MB_S:.0f}: {ok(mb / first['wall'] >= PERFETTO_MB_S)}); "
                     f"{first['wall'] / ref['wall']:.2f}x orjson.loads wall, {cpu / ref_cpu:.2f}x CPU "
                     f"(<= {MAX_X_ORJSON}x: {ok(first['wall'] / ref['wall'] <= MAX_X_ORJSON)}); "
                     f"peak RSS {first['rss_mb']:.0f} MB loader + {first['worker_rss_mb']:.0f} MB worker")
    return "\n".join(lines)


def other_formats(path: Path, folder: Path) -> list[tuple[str, Path]]:
    """The same trace as .json.gz (gzip level 6) and .pftrace, made once in child processes, kept in `folder`."""
    gz = folder / (path.name + ".gz")
    if not gz.exists():
        code = ("import gzip, shutil, sys\nwith open(sys.argv[1], 'rb') as f, gzip.open(sys.argv[2], 'wb', 6) as g: "
                "shutil.copyfileobj(f, g, 1 << 22)")
        subprocess.run([sys.executable, "-c", code, str(path), str(gz) + ".tmp"], check=True)
        Path(str(gz) + ".tmp").rename(gz)
    pf = folder / (path.name.removesuffix(".json") + ".pftrace")
    if not pf.exists():
        subprocess.run([sys.executable, "-m", "neuron_prof", "convert", "-q", str(path), str(pf) + ".tmp.pftrace"],
                       check=True, env={**os.environ, "NEURON_PROF_CACHE": "0"})
        Path(str(pf) + ".tmp.pftrace").rename(pf)
    return [(".json.gz", gz), (".pftrace", pf)]


def format_lines(path: Path, folder: Path, ref: dict[str, Any]) -> str:
    """First opens of the same trace as .json.gz and .pftrace, against `ref` (orjson.loads of the .json, same
    run): MB/s of the file itself and of the JSON it stands for (issue 24 asks for all three formats)."""
    json_mb = path.stat().st_size / 1e6
    env = {**os.environ, "NEURON_PROF_CACHE": "0"}
    lines = [f"{'other formats, first open':40} {'file MB':>8} {'wall s':>7} {'cpu s':>7} {'+workers':>8} "
             f"{'MB/s':>6} {'JSON MB/s':>9} {'x orjson':>8} {'peak RSS MB':>11}"]
    for label, p in other_formats(path, folder):
        rows = [("orjson.loads (gunzip + parse)", _run("orjson", p, env))] if label == ".json.gz" else []
        rows.append((f"neuron_prof.load {label}", _run("load", p, env)))
        for name, r in rows:
            mb = p.stat().st_size / 1e6
            lines.append(f"{name:40} {mb:8.0f} {r['wall']:7.2f} {r['cpu']:7.2f} {r['worker_cpu']:8.2f} "
                         f"{mb / r['wall']:6.1f} {json_mb / r['wall']:9.1f} {r['wall'] / ref['wall']:8.2f} "
                         f"{r['rss_mb']:11,.0f}")
    lines.append("(x orjson: wall time over orjson.loads of the plain .json in the same run; JSON MB/s: the .json's "
                 "size over this wall time)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_ingest", description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=float, default=1.2e6, help="events in the generated trace (default 1.2e6)")
    ap.add_argument("--trace", type=Path, help="benchmark this file instead of a generated one")
    ap.add_argument("--real", action="store_true", help="also a real trace repeated to --events")
    ap.add_argument("--no-formats", action="store_true", help="leave out the .json.gz and .pftrace rows")
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "neuron-prof-bench",
                    help="where generated traces are kept between runs")
    a = ap.parse_args(argv)
    a.dir.mkdir(parents=True, exist_ok=True)
    n = int(a.events)
    print(f"# ingest, {time.strftime('%Y-%m-%d %H:%M')} on {platform.node()} ({os.cpu_count()} CPUs, "
          f"{platform.python_implementation()} {platform.python_version()}); load avg {os.getloadavg()[0]:.1f}")
    path = a.trace or generated(n, a.dir)
    rows = measure(path)
    print(table("file" if a.trace else "generated", path, rows))
    print(speed_lines(rows, path.stat().st_size))
    if not a.no_formats:
        print(format_lines(path, a.dir, rows[0][1]))
    if a.real:
        # built in a child: this process must stay small (see measure)
        code = f"from pathlib import Path; from bench.bench_ingest import real_repeated; print(real_repeated({n}, Path({str(a.dir)!r})))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        path = Path(out.stdout.strip().splitlines()[-1])
        print(table("real, repeated", path, measure(path)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
