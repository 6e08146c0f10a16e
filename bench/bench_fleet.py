"""Fleet benchmark: the job summary of many generated ranks on Dask against one rank after another in one process.

    python -m bench.bench_fleet                         # 64 ranks of 100k events
    python -m bench.bench_fleet --ranks 16 --events 2e4 --workers 2

Rank files are generated Kineto traces (bench.gen_trace, one seed per rank, NCCL collectives every 40 calls),
trace.rank{R}.json. Each row runs in a fresh process with an empty index cache (every rank opened for the
first time):
  one by one       `summary --workers 0`: every rank loaded and analysed in the client process
  Dask             `summary` as shipped: a LocalCluster of --workers processes, one task per rank
  Dask defaults    the same with Dask's own worker settings (spawned workers, MALLOC_TRIM_THRESHOLD_=65536,
                   the profiler on)
Measured: wall time, the client's peak RSS (its own, not the workers'), the pieces the workers send back
(largest, median) and the time of one task. From those, a projection of 1,024 ranks on 16 workers.
Then a simulated job of --simulate ranks (default 1,024; generated small .pftrace ranks, one a straggler, not
captured) summarised in one process: its per-rank cost and the client's cross-rank findings at that size,
and its projection on 16 workers.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_merge import ranks as rank_files

_CHILD = r"""
import json, resource, sys, time
mode, workers, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
from neuron_prof.job import DaskRunner, InProcessRunner, job_summary
if mode == "dask-defaults":  # the LocalCluster as Dask sets up its workers (before issue 24); spawned: _run
    import neuron_prof.job._cluster as cluster
    cluster.LOCAL_WORKER_CONFIG = {}
t0 = time.perf_counter()
runner = InProcessRunner() if mode == "serial" else DaskRunner(workers=workers)
with runner:
    t_up = time.perf_counter() - t0
    doc = job_summary(paths, runner, args=["run/"]).to_dict()
    wall = time.perf_counter() - t0
    t1 = time.perf_counter()
    runner.map(int, [(0,)] * 1000)  # tasks that do nothing: what the scheduler costs per task
    sched = (time.perf_counter() - t1) / 1000
rows = [r for r in doc["ranks"] if r["status"] == "ok"]
med = lambda xs: sorted(xs)[len(xs) // 2]
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": wall, "startup": t_up, "rss_mb": usage.ru_maxrss / 1024, "sched_s": sched,
                  "ok": len(rows), "task_s": med([r["load_s"] + r["analyse_s"] for r in rows]),
                  "cpu_s": med([r["cpu_s"] for r in rows]), "cpu_total": sum(r["cpu_s"] for r in rows),
                  "client_cpu": usage.ru_utime + usage.ru_stime, "run": doc["run"],
                  "findings": sorted({f["kind"] for f in doc["findings"]})}))
"""


_SIM = r"""
import json, sys, tempfile, time
from pathlib import Path
from bench.bench_fleet import write_simulated
from neuron_prof.job import InProcessRunner, job_summary
n = int(sys.argv[1])
d = Path(tempfile.mkdtemp(prefix="neuron-prof-bench-sim-"))
t0 = time.perf_counter()
paths = write_simulated(n, d)
t_gen = time.perf_counter() - t0
t0, c0 = time.perf_counter(), time.process_time()
doc = job_summary([str(p) for p in paths], InProcessRunner(), args=[str(d)]).to_dict()
rows = [r for r in doc["ranks"] if r["status"] == "ok"]
print(json.dumps({"gen_s": t_gen, "wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "ok": len(rows), "events": sum(r["events"] for r in rows),
                  "cpu_s": sorted(r["cpu_s"] for r in rows)[len(rows) // 2], "run": doc["run"],
                  "findings": sorted({f["kind"] for f in doc["findings"]}),
                  "stragglers": sorted(f["rank"] for f in doc["findings"] if f["kind"] == "straggler")}))
"""


def write_simulated(n_ranks: int, folder: Path, steps: int = 8, late: int = 3) -> list[Path]:
    """A DDP-like job of `n_ranks` generated ranks (trace.rank{R}.pftrace): `steps` marked steps of an op, a
    data-loading span and one all_reduce each; rank `late` loads its data 9 ms longer (a straggler)."""
    from neuron_prof.exporters import write_trace
    from neuron_prof.model import Meta, TraceBuilder, TrackKind

    ms, t0 = 1_000_000, 1_700_000_000_000_000_000
    out = []
    for r in range(n_ranks):
        b = TraceBuilder()
        pid = 1000 + r
        p = b.process(pid, name="python", rank=r)
        main = b.thread_track(pid, 1, "main")
        coll = b.track(p, "collectives", TrackKind.COLLECTIVE)
        load = (12 if r == late else 3) * ms
        rows = []
        for k in range(steps):
            s = t0 + k * 40 * ms
            b.add_slice(main, s, load, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "user_annotation")
            b.add_slice(main, s + load, 12 * ms, "aten::mm", "cpu_op")
            # each rank arrives after its data and its op; the all_reduce ends when the last one is in
            b.add_slice(coll, s + load + 12 * ms, 28 * ms - load - 12 * ms, "all_reduce",
                        args={"group": "0", "bytes_in": 4096, "bytes_out": 4096})
            rows.append([k, s, s + 40 * ms])
        b.metadata[Meta.RANK] = r
        b.metadata[Meta.WORLD_SIZE] = n_ranks
        b.metadata[Meta.STEPS] = rows
        b.metadata[Meta.WALL] = [t0, t0 + steps * 40 * ms]
        out.append(folder / f"trace.rank{r}.pftrace")
        write_trace(b.build(), out[-1])
    return out


def _simulate(n: int) -> dict[str, Any]:
    env = {**os.environ, "NEURON_PROF_CACHE_DIR": tempfile.mkdtemp(prefix="neuron-prof-bench-cache-")}
    p = subprocess.run([sys.executable, "-c", _SIM, str(n)], capture_output=True, text=True, env=env, check=False,
                       cwd=Path(__file__).resolve().parents[1])
    if p.returncode != 0:
        raise SystemExit(f"simulated job failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _run(mode: str, workers: int, paths: list[Path]) -> dict[str, Any]:
    env = {**os.environ, "NEURON_PROF_CACHE_DIR": tempfile.mkdtemp(prefix="neuron-prof-bench-cache-")}
    if mode == "dask-defaults":  # Dask's own start method too: a fresh interpreter per worker
        env["DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD"] = "spawn"
    p = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(workers), *map(str, paths)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=Path(__file__).resolve().parents[1],
    )
    if p.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def project(n_ranks: int, n_workers: int, measured: dict[str, Any], measured_ranks: int) -> dict[str, float]:
    """Estimates for `n_ranks` like the measured ones on `n_workers` dedicated cores: the cluster's start, waves
    of tasks each taking the CPU time one task took, the scheduler's cost per task (measured on no-op tasks),
    the client's cross-rank findings (linear in ranks), and the pieces the client holds."""
    run = measured["run"]
    findings = run["findings_s"] * n_ranks / measured_ranks
    wall = (
        measured["startup"]
        + math.ceil(n_ranks / n_workers) * measured["cpu_s"]
        + n_ranks * measured["sched_s"]
        + findings
    )
    return {
        "wall_s": wall,
        "findings_s": findings,
        "client_pieces_mb": n_ranks * run["piece_bytes_median"] / 2**20,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_fleet", description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=64, help="generated ranks (default 64)")
    ap.add_argument("--events", type=float, default=1e5, help="events per rank (default 1e5)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="Dask workers (default: CPUs)")
    ap.add_argument(
        "--dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "neuron-prof-bench-fleet",
        help="where generated traces are kept between runs",
    )
    ap.add_argument("--no-defaults", dest="defaults", action="store_false",
                    help="skip the row of a LocalCluster with Dask's default worker settings")
    ap.add_argument("--simulate", type=int, default=1024,
                    help="also summarise a simulated job of this many generated ranks in one process (0: skip)")
    a = ap.parse_args(argv)
    n = int(a.events)
    print(
        f"# fleet, {time.strftime('%Y-%m-%d %H:%M')} on {platform.node()} ({os.cpu_count()} CPUs); "
        f"load avg {os.getloadavg()[0]:.1f}; {a.ranks} ranks of {n:,} events"
    )
    t0 = time.perf_counter()
    paths = rank_files(n, a.ranks, a.dir)
    size = sum(p.stat().st_size for p in paths)
    print(
        f"generated/kept {a.ranks} rank files, {size / 2**20:,.0f} MB in all ({time.perf_counter() - t0:.0f} s)"
    )
    serial = _run("serial", 0, paths)
    dask = _run("dask", a.workers, paths)
    dask["workers"] = a.workers
    before = _run("dask-defaults", a.workers, paths) if a.defaults else None
    print(f"{'':34} {'wall s':>7} {'client peak RSS MB':>19} {'x one by one':>13}")
    print(f"{'one by one, in one process':34} {serial['wall']:7.2f} {serial['rss_mb']:19,.0f} {1:13.2f}")
    print(
        f"{f'Dask LocalCluster, {a.workers} workers':34} {dask['wall']:7.2f} {dask['rss_mb']:19,.0f} "
        f"{dask['wall'] / serial['wall']:13.2f}"
    )
    if before is not None:
        print(
            f"{'  the same, Dask default workers':34} {before['wall']:7.2f} {before['rss_mb']:19,.0f} "
            f"{before['wall'] / serial['wall']:13.2f}   (spawned, MALLOC_TRIM_THRESHOLD_=65536, profiler on: start "
            f"{before['startup']:.2f} s; CPU per rank "
            f"median {before['cpu_s']:.2f} s, all ranks {before['cpu_total']:.1f} s)"
        )
    run = dask["run"]
    print(
        f"CPU per rank (load + analyse): median {serial['cpu_s']:.2f} s in one process, {dask['cpu_s']:.2f} s in a "
        f"worker; all ranks {serial['cpu_total']:.1f} s vs {dask['cpu_total']:.1f} s "
        f"({dask['cpu_total'] / max(serial['cpu_total'], 1e-9) - 1:+.0%} in workers, over {a.workers} processes); "
        f"client CPU {serial['client_cpu']:.1f} s vs {dask['client_cpu']:.1f} s"
    )
    print(
        f"cluster start {dask['startup']:.2f} s; scheduler {dask['sched_s'] * 1e3:.2f} ms per task (1,000 no-op "
        f"tasks); pieces back: largest {run['piece_bytes_max'] / 1024:.1f} KiB, median "
        f"{run['piece_bytes_median'] / 1024:.1f} KiB; client findings {run['findings_s']:.2f} s; ranks ok "
        f"{dask['ok']}/{a.ranks}; finding kinds {dask['findings']}"
    )
    p = project(1024, 16, dask, a.ranks)
    print(
        f"projection, 1,024 ranks like these on 16 workers (a core each): {p['wall_s']:.0f} s = start "
        f"{dask['startup']:.1f} s + 64 waves x {dask['cpu_s']:.2f} s + 1,024 x {dask['sched_s'] * 1e3:.2f} ms "
        f"scheduling + {p['findings_s']:.1f} s client findings; the client holds {p['client_pieces_mb']:.1f} MB "
        f"of pieces; one by one in one process: {1024 * serial['cpu_s'] / 60:.0f} min of CPU"
    )
    if a.simulate:
        sim = _simulate(a.simulate)
        sr = sim["run"]
        sp = project(a.simulate, 16, {**dask, "cpu_s": sim["cpu_s"], "run": sr}, a.simulate)
        print(
            f"simulated job, {a.simulate:,} generated ranks ({sim['events']:,} events, written in "
            f"{sim['gen_s']:.1f} s), summarised in one process: {sim['wall']:.1f} s wall, {sim['cpu']:.1f} s CPU "
            f"(median {sim['cpu_s'] * 1e3:.0f} ms per rank); client findings {sr['findings_s']:.2f} s for "
            f"{a.simulate:,} ranks ({sr['findings_s'] / max(run['findings_s'], 1e-9):.1f}x the {a.ranks} ranks' "
            f"above); ranks ok {sim['ok']:,}; stragglers {sim['stragglers']}; finding kinds {sim['findings']}"
        )
        print(
            f"projection of this job on 16 workers: {sp['wall_s']:.0f} s = start {dask['startup']:.1f} s + "
            f"{math.ceil(a.simulate / 16)} waves x {sim['cpu_s'] * 1e3:.0f} ms + {a.simulate:,} x "
            f"{dask['sched_s'] * 1e3:.2f} ms scheduling + {sr['findings_s']:.1f} s client findings (measured)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
