"""`python -m bench big --format pftrace`: a .pftrace of about --gb GB, made as a job's rank files joined with
`cat` (a form the loader reads as one trace): each rank a generated Kineto JSON of at most RANK_JSON bytes
(`bench.gen_trace.write`, streamed) exported by `neuron-prof export --format pftrace` in its own process, appended,
and its JSON removed, so neither the JSON nor the .pftrace is ever held whole here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.gen_trace import write

PFTRACE_PER_JSON = 0.281
"""Bytes of .pftrace our exporter writes per byte of gen_trace's JSON (measured: 32.1 MB for 114.3 MB)."""
RANK_JSON = 1e9
"""JSON bytes of one rank at most (its export loads it in memory: about 2 GB)."""


def write_pftrace(gb: float, path: Path, bytes_per_event: int) -> int:
    """Write the file; returns its events (as generated JSON events)."""
    json_bytes = gb * 1e9 / PFTRACE_PER_JSON
    ranks = max(1, int(-(-json_bytes // RANK_JSON)))
    n = int(json_bytes / ranks / bytes_per_event)
    env = {**os.environ, "NEURON_PROF_CACHE": "0", "NEURON_PROF_STREAM": "0"}
    with open(path, "wb") as out:
        for r in range(ranks):
            src, part = path.with_name(f"rank{r}.json"), path.with_name(f"rank{r}.pftrace")
            try:
                write(n, src, seed=r, rank=r, world_size=ranks)
                subprocess.run([sys.executable, "-m", "neuron_prof", "export", "--format", "pftrace", "-o", str(part),
                                str(src)], env=env, check=True, stdout=subprocess.DEVNULL)
                with open(part, "rb") as f:
                    while block := f.read(64 << 20):
                        out.write(block)
            finally:
                src.unlink(missing_ok=True)
                part.unlink(missing_ok=True)
            print(f"  rank {r + 1}/{ranks}: {n:,} events, {path.stat().st_size / 1e9:.2f} GB so far", flush=True)
    return n * ranks
