"""A trace bigger than memory (issue 35): `python -m bench big` (not in the default suite).

Generates a Kineto JSON of about --gb GB in /tmp (streamed by `bench.gen_trace.write`, never held), then times
its first open (streamed into the column cache; NEURON_PROF_STREAM=1 so the streamed path runs whatever this
machine's RAM), then `neuron-prof summary` and `check` from the memory-mapped cache (and with --tui the TUI's
first screen), each in its own process with its peak RSS, and removes the file and the cache. With --format
pftrace the file is a .pftrace of about --gb GB (`bench.big_pftrace`) and its load is also timed whole in memory. Targets: 20 GB in <= 3 min, <= 2 GB.
With --ranks R (R > 1), a job instead: R rank files of --gb GB each, `summary DIR` on a Dask LocalCluster of
--workers processes, the peak RSS of each worker and of the client (bench.big_ranks). Target: <= 2 GB per worker.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import _machine, big_pftrace, big_ranks
from bench.gen_trace import write
from neuron_prof.loaders.json.stream import MEMORY_LIMIT_ENV
from neuron_prof.loaders.kept import PREFIX as KEPT_PREFIX

BYTES_PER_EVENT = 275
"""What gen_trace writes per event (measured: 109.8 MB for 400k events)."""


def _timed(args: list[str], env: dict[str, str], module: bool = True, show: bool = False) -> tuple[float, float, int]:
    """(wall s, peak RSS MB, exit code) of `neuron-prof args` (or `python args`) in a child process."""
    t0 = time.perf_counter()
    cmd = [sys.executable, *(["-m", "neuron_prof"] if module else []), *args]
    p = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=None if show else subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        print(err[-2000:], file=sys.stderr)
    return wall, ru.ru_maxrss / 1024, p.returncode


def _drop_kept(cache: Path) -> None:
    """Remove the documents kept beside the cache's indexes (`neuron_prof.loaders.kept`): the next command
    computes them again."""
    for p in cache.glob(f"*.nprof/{KEPT_PREFIX}*"):
        p.unlink()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench big", description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=20.0, help="size of the generated JSON (default 20)")
    ap.add_argument("--gz", action="store_true", help="a .json.gz instead (its gunzipped size is --gb)")
    ap.add_argument("--format", choices=("json", "pftrace"), default="json",
                    help="pftrace: a .pftrace of --gb GB (rank files our exporter writes, joined), its load timed "
                         "whole in memory and streamed (bench.big_pftrace)")
    ap.add_argument("--tui", action="store_true", help="also time the TUI's first screen from the cache")
    ap.add_argument("--ranks", type=int, default=1, help="a job of this many rank files of --gb GB each (default 1)")
    ap.add_argument("--workers", type=int, default=2, help="with --ranks: Dask worker processes (default 2)")
    ap.add_argument("--memory-limit", type=float, default=None, metavar="MB",
                    help="with --ranks: NEURON_PROF_MEMORY_LIMIT of each worker (default: its share of the machine)")
    ap.add_argument("--dir", default="/tmp", help="where the files and the cache are written (default /tmp)")
    a = ap.parse_args(argv)
    n = int(a.gb * 1e9 / BYTES_PER_EVENT)
    folder = Path(tempfile.mkdtemp(prefix="neuron-prof-big-", dir=a.dir))
    try:
        if a.ranks > 1:
            return _job(a.ranks, a.gb, n, a.workers, folder, a.memory_limit)
        pf = a.format == "pftrace"
        path = folder / ("trace.pftrace" if pf else "trace.json.gz" if a.gz else "trace.json")
        print(f"load average before: {_machine.load()}", flush=True)
        t0 = time.perf_counter()
        if pf:
            n = big_pftrace.write_pftrace(a.gb, path, BYTES_PER_EVENT)
        else:
            write(n, path)
        gen = time.perf_counter() - t0
        size = path.stat().st_size
        print(f"generated {n:,} events, {size / 1e9:.2f} GB in {gen:.0f} s ({path})", flush=True)
        t0 = time.perf_counter()
        os.sync()  # the load is timed reading a file at rest, not beside the kernel writing the generator's pages
        print(f"written out to the disk (sync) in {time.perf_counter() - t0:.0f} s", flush=True)
        env = {"NEURON_PROF_CACHE_DIR": str(folder / "cache"), "NEURON_PROF_STREAM": "1"}
        load = ["-c", "import sys, neuron_prof; neuron_prof.load(sys.argv[1])", str(path)]
        whole = {"NEURON_PROF_CACHE": "0", "NEURON_PROF_STREAM": "0"}
        rows = [("load: whole file in memory", *_timed(load, whole, module=False))] if pf else []
        rows += [("load: streamed into the cache (first open)", *_timed(load, env, module=False)),
                ("summary (memory-mapped cache)", *_timed(["summary", str(path)], env)),
                ("summary again (the kept report)", *_timed(["summary", str(path)], env))]
        _drop_kept(folder / "cache")  # check computes its report again: the analyses' memory is what is measured
        rows.append(("check (memory-mapped cache)", *_timed(["check", str(path)], env)))
        if a.tui:
            tui = ["-m", "bench.bench_tui", "--trace", str(path), "--repeat", "1"]
            _drop_kept(folder / "cache")
            rows.append(("TUI, whole run, first pass (bench_tui)", *_timed(tui, env, module=False, show=True)))
            rows.append(("TUI, whole run, kept overview (bench_tui)", *_timed(tui, env, module=False, show=True)))
        cache = sum(f.stat().st_size for f in (folder / "cache").rglob("*") if f.is_file())
        print(f"\n{'':48} wall s  peak RSS MB  exit   ({n / 1e6:.1f}M events, {size / 1e9:.2f} GB file, "
              f"cache {cache / 1e9:.2f} GB)")
        for what, wall, rss, rc in rows:
            print(f"{what:48} {wall:6.1f} {rss:12.0f} {rc:5}")
        first = rows[int(pf)]
        wall, peak = first[1] + rows[int(pf) + 1][1], max(first[2], rows[int(pf) + 1][2])
        print(f"\nissue 35: {size / 1e9:.1f} GB loaded ({size / 1e6 / first[1]:.0f} MB/s, {first[2]:.0f} MB) and "
              f"summarised in {wall:.0f} s, peak RSS {peak:.0f} MB (targets for 20 GB: <= 180 s, <= 2048 MB)")
        print(f"load average after: {_machine.load()}")
        return max(r[3] for r in rows)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _job(ranks: int, gb: float, n: int, workers: int, folder: Path, limit_mb: float | None) -> int:
    """--ranks: the job of `ranks` generated files in `folder` (its `ranks/` and `cache/`), summarised on Dask,
    each worker's NEURON_PROF_MEMORY_LIMIT `limit_mb` (None: the share DaskRunner gives it)."""
    print(f"load average before: {_machine.load()}", flush=True)
    t0 = time.perf_counter()
    (folder / "ranks").mkdir()
    slow = ranks // 2 + 1
    paths = big_ranks.write_ranks(n, ranks, folder / "ranks", slow)
    size = sum(p.stat().st_size for p in paths)
    print(f"generated {ranks} ranks of {n:,} events, {size / 1e9:.2f} GB in all in {time.perf_counter() - t0:.0f} s "
          f"(slow rank {slow})", flush=True)
    env = {"NEURON_PROF_CACHE_DIR": str(folder / "cache")}
    if limit_mb:
        env[MEMORY_LIMIT_ENV] = str(int(limit_mb * 2**20))
    print(f"workers' memory budget (NEURON_PROF_MEMORY_LIMIT): {f'{limit_mb:,.0f} MB' if limit_mb else 'their share'}")
    res = big_ranks.summarise(folder / "ranks", workers, env)
    cache = sum(f.stat().st_size for f in (folder / "cache").rglob("*") if f.is_file())
    print(f"column cache {cache / 1e9:.2f} GB")
    rc = big_ranks.report(res, ranks, gb, n, slow, workers)
    print(f"load average after: {_machine.load()}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
