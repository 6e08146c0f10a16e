"""Merge benchmark: peak memory and time of `neuron-prof merge` as the number of ranks grows.

    python -m bench.bench_merge                                  # 2 and 4 ranks of 300k events each
    python -m bench.bench_merge --events 1e5 --ranks 2 4 8 --out merged.json

Each row runs in a fresh process (peak RSS, ru_maxrss, is that job's alone, workers included):
  load 1 rank          neuron_prof.load of one rank file: the floor any merge pays
  merge (streaming)    `neuron-prof merge` as shipped: two passes, one rank in memory at a time
  merge (in memory)    every rank loaded, merge_traces, annotate, write_trace: memory grows with the sum
Rank files are generated Kineto traces (bench.gen_trace, one seed per rank, NCCL collectives every 40 calls),
named trace.rank{R}.json. Target (issue 7): memory grows with the largest rank, not the sum.
"""

from __future__ import annotations

import argparse
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
import json, resource, sys, time
mode, out, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
import neuron_prof.loaders, neuron_prof.loaders.json.reader, neuron_prof.merge, neuron_prof.analysis
import neuron_prof.exporters.merged, neuron_prof.exporters.perfetto, neuron_prof.exporters.chrome_json
from neuron_prof.cli import main
t0 = time.perf_counter()
if mode == "load":
    neuron_prof.loaders.load(paths[0])
elif mode == "stream":
    assert main(["merge", *paths, "-o", out]) == 0
else:
    from neuron_prof.analysis import annotate
    from neuron_prof.exporters import write_trace
    merged, _ = neuron_prof.merge.merge_traces([neuron_prof.loaders.load(p) for p in paths])
    write_trace(annotate(merged), out)
wall = time.perf_counter() - t0
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"wall": wall, "rss_mb": max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, kids) / 1024}))
"""


def _run(mode: str, out: Path, paths: list[Path], env: dict[str, str]) -> dict[str, Any]:
    p = subprocess.run([sys.executable, "-c", _CHILD, mode, str(out), *map(str, paths)], capture_output=True,
                       text=True, env=env, check=False, cwd=Path(__file__).resolve().parents[1])
    if p.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def ranks(n_events: int, n_ranks: int, folder: Path) -> list[Path]:
    """Rank files trace.rank{R}.json of n_events each (generated once, in child processes)."""
    out = []
    for r in range(n_ranks):
        p = folder / f"{n_events}" / f"trace.rank{r}.json"
        if not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "bench.gen_trace", str(n_events), str(p), "--seed", str(r), "--rank", str(r)],
                           check=True, cwd=Path(__file__).resolve().parents[1])
        out.append(p)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_merge", description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=float, default=3e5, help="events per rank (default 3e5)")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4], help="rank counts to merge (default 2 4)")
    ap.add_argument("--out", default="merged.pftrace", help="output file name (.pftrace, .json, .json.gz)")
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "neuron-prof-bench",
                    help="where generated traces are kept between runs")
    a = ap.parse_args(argv)
    n = int(a.events)
    print(f"# merge, {time.strftime('%Y-%m-%d %H:%M')} on {platform.node()} ({os.cpu_count()} CPUs); "
          f"load avg {os.getloadavg()[0]:.1f}; {n:,} events per rank -> {a.out}")
    paths = ranks(n, max(a.ranks), a.dir)
    out = Path(tempfile.mkdtemp(prefix="neuron-prof-bench-merge-")) / a.out

    def env() -> dict[str, str]:
        """Each row starts with an empty index cache: files are opened for the first time. (A streaming
        merge's second pass then reads the columnar index its first pass wrote, as any second open does.)"""
        return {**os.environ, "NEURON_PROF_CACHE_DIR": tempfile.mkdtemp(prefix="neuron-prof-bench-cache-")}

    floor = _run("load", out, paths[:1], env())
    print(f"{'':28} {'wall s':>7} {'peak RSS MB':>12} {'x load 1 rank':>14}")
    print(f"{'load 1 rank':28} {floor['wall']:7.2f} {floor['rss_mb']:12,.0f} {1:14.2f}")
    for k in a.ranks:
        for mode, label in (("stream", "merge (streaming)"), ("memory", "merge (in memory)")):
            r = _run(mode, out, paths[:k], env())
            print(f"{f'{label}, {k} ranks':28} {r['wall']:7.2f} {r['rss_mb']:12,.0f} "
                  f"{r['rss_mb'] / floor['rss_mb']:14.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
