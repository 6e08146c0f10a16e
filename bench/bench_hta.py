"""Ingest beside Holistic Trace Analysis: the 1.2M-event trace opened by `orjson.loads`, `neuron_prof.load`
(first and second open) and HTA's `TraceAnalysis(trace_dir=...)`, in one run, each in a fresh process.

    python -m bench.bench_hta                         # generated 1.2M-event trace (bench.gen_trace), ~284 MB
    python -m bench.bench_hta --events 1e6 --real     # plus a real trace repeated to ~1M events
    python -m bench.bench_hta --trace big.json        # any file
    python -m bench.bench_hta --no-hta                # without HTA (no bench venv needed)

The neuron_prof and orjson rows are bench.bench_ingest's measurements (its child script and environment);
this adds HTA, run by the python of its own venv (bench/.venv-hta, made by bench.hta_venv on first use).
Peak RSS is per process (ru_maxrss); HTA parses one file in its own process (multiprocessing only spreads
ranks). Targets (issue 9): <= 5 s, <= 1 GB peak RSS, >= 9x faster than HTA; second open <= 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import _machine, bench_ingest, hta_venv

_HTA_CHILD = r"""
import json, logging, resource, sys, time
from hta.trace_analysis import TraceAnalysis  # imports are not ingest
logging.disable(logging.WARNING)
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0, c0 = time.perf_counter(), time.process_time()
a = TraceAnalysis(trace_dir=sys.argv[1])
t1, c1 = time.perf_counter(), time.process_time()
n = sum(len(a.t.get_trace(r)) for r in a.t.traces)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": t1 - t0, "cpu": c1 - c0, "worker_cpu": kids.ru_utime + kids.ru_stime,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "worker_rss_mb": kids.ru_maxrss / 1024, "base_rss_mb": rss0 / 1024, "model_events": n}))
"""


def run_hta(path: Path) -> dict[str, Any]:
    """HTA's TraceAnalysis on `path` alone (a folder holding only a link to it), in the HTA venv's python."""
    py = hta_venv.ensure()
    with tempfile.TemporaryDirectory(prefix="bench-hta-") as d:
        link = Path(d) / path.name
        link.symlink_to(path.resolve())
        out = subprocess.run([str(py), "-c", _HTA_CHILD, d], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"HTA on {path} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def table(title: str, path: Path, rows: list[tuple[str, dict[str, Any]]]) -> str:
    """One table: every row against orjson.loads (x orjson) and, when HTA ran, HTA's time over the row's."""
    ref = rows[0][1]
    hta = next((r for name, r in rows if name.startswith("HTA")), None)
    lines = [
        f"{title}: {path.name}, {ref['entries']:,} events, {path.stat().st_size / 1e6:,.0f} MB",
        (
            f"{'':40} {'wall s':>7} {'cpu s':>7} {'+workers':>8} {'events/s':>10} {'peak RSS MB':>11} "
            f"{'worker RSS':>10} {'x orjson':>8} {'HTA / row':>9}"
        ),
    ]
    for name, r in rows:
        vs_hta = f"{hta['wall'] / r['wall']:9.1f}" if hta else f"{'':>9}"
        lines.append(
            f"{name:40} {r['wall']:7.2f} {r['cpu']:7.2f} {r['worker_cpu']:8.2f} "
            f"{r['entries'] / r['wall']:10,.0f} {r['rss_mb']:11,.0f} {r['worker_rss_mb']:10,.0f} "
            f"{r['wall'] / ref['wall']:8.2f} {vs_hta}"
        )
    lines.append(
        "(wall s on a shared machine; cpu s is the loading process alone, +workers the CPU of its worker\n"
        " processes; worker RSS is the largest worker's peak. HTA / row: how many times faster than HTA.)"
    )
    return "\n".join(lines)


def verdict(rows: list[tuple[str, dict[str, Any]]], size: int) -> str:
    """The issue's ingest targets against this run's rows (`size`: the file's bytes)."""
    from neuron_prof.loaders.json._parallel import workers_wanted

    r = dict(rows)
    first, second = r["neuron_prof.load, first open"], r["neuron_prof.load, second open"]
    hta = next((v for k, v in rows if k.startswith("HTA")), None)
    # The loader parses one range itself and starts workers_wanted - 1 worker processes beside it; the sum of
    # the peaks is an upper bound on the memory the open needs at once.
    n_workers = 0 if first["worker_rss_mb"] == 0 else workers_wanted(size) - 1
    rss = first["rss_mb"] + n_workers * first["worker_rss_mb"]

    def ok(b: bool) -> str:
        return "met" if b else "MISSED"

    parts = [
        (
            f"first open {first['wall']:.2f} s wall, {first['cpu'] + first['worker_cpu']:.2f} s CPU "
            f"(<= 5 s: {ok(first['wall'] <= 5)})"
        ),
        f"peak RSS {rss:,.0f} MB incl. workers (<= 1024 MB: {ok(rss <= 1024)})",
        (
            f"second open {second['wall']:.2f} s wall, {second['cpu']:.2f} s CPU "
            f"(<= 1 s: {ok(second['wall'] <= 1)})"
        ),
    ]
    if hta:
        parts.append(
            f"HTA / first open {hta['wall'] / first['wall']:.1f}x wall, "
            f"{hta['cpu'] / (first['cpu'] + first['worker_cpu']):.1f}x CPU (>= 9x: "
            f"{ok(hta['wall'] / first['wall'] >= 9)})"
        )
    n = first["entries"]
    scale = "" if n >= 1_000_000 else f" [the targets are for 1.2M events; this trace has {n:,}]"
    return "targets: " + "; ".join(parts) + scale


def measure(path: Path, hta: bool) -> list[tuple[str, dict[str, Any]]]:
    """bench_ingest's rows (it counts the entries in its orjson child: this process never parses the trace,
    so children do not start from its peak RSS) and HTA's."""
    rows = bench_ingest.measure(path)
    if hta:
        r = run_hta(path)
        r["entries"] = rows[0][1]["entries"]
        rows.append((f"HTA TraceAnalysis ({r['model_events']:,} rows)", r))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_hta", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--events", type=float, default=1.2e6, help="events in the generated trace (default 1.2e6)"
    )
    ap.add_argument("--trace", type=Path, help="benchmark this file instead of a generated one")
    ap.add_argument("--real", action="store_true", help="also a real trace repeated to --events (no HTA row)")
    ap.add_argument("--hta-real", action="store_true", help="with --real: run HTA on the real trace too")
    ap.add_argument("--no-hta", action="store_true", help="leave HTA out")
    ap.add_argument("--no-formats", action="store_true", help="leave out the .json.gz and .pftrace rows")
    ap.add_argument(
        "--dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "neuron-prof-bench",
        help="where generated traces are kept between runs",
    )
    a = ap.parse_args(argv)
    a.dir.mkdir(parents=True, exist_ok=True)
    n = int(a.events)
    print(f"# ingest vs HTA: {_machine.describe()}", flush=True)
    t0 = time.perf_counter()
    path = a.trace or bench_ingest.generated(n, a.dir)
    print(f"(trace ready in {time.perf_counter() - t0:.0f} s)", flush=True)
    rows = measure(path, not a.no_hta)
    print(table("file" if a.trace else "generated", path, rows), flush=True)
    print(bench_ingest.speed_lines(rows, path.stat().st_size), flush=True)
    print(verdict(rows, path.stat().st_size), flush=True)
    if not a.no_formats:
        print(bench_ingest.format_lines(path, a.dir, rows[0][1]), flush=True)
    if a.real:
        path = bench_ingest.real_repeated(n, a.dir)
        print(
            table("real, repeated with shifted times", path, measure(path, a.hta_real and not a.no_hta)),
            flush=True,
        )
    print(f"# {_machine.load()}; cores {os.cpu_count()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
