"""Many big ranks on Dask (issue 35 item 5): `python -m bench big --ranks 16 --gb 1`.

Writes --ranks Kineto JSON files of about --gb GB each in /tmp (trace.rank{R}.json, each naming its rank in
distributedInfo as torch.profiler does; one rank's host work 1.5x longer: the slow rank), runs the shipped
`neuron-prof summary DIR --workers W --json` in a child process and measures, every 0.2 s, the peak RSS
(VmHWM: the kernel's own high-water mark, so a peak between samples still counts) of that client process
and of each Dask worker process it starts; then whether the job summary names the slow rank, and removes the
files and the column cache. Target: every worker <= 2 GB.

Rank files after the first two are the first one's bytes with the rank in its header changed (kernel copy),
so generation costs two generated files whatever --ranks is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bench.gen_trace import write

TARGET_MB = 2048
"""Peak RSS each worker must stay under."""
SLOW = 1.5
"""How much longer the slow rank's host work lasts."""
_RANK_FIELD = b'"rank": 0, "world_size": '


def write_ranks(n_events: int, ranks: int, folder: Path, slow_rank: int) -> list[Path]:
    """`ranks` files of `n_events` events each: rank 0 and `slow_rank` generated, the others copies of rank 0
    with their rank written in the header. Returns them in rank order."""
    base = write(n_events, folder / "trace.rank0.json", rank=0, world_size=ranks)
    if ranks > 1:
        write(n_events, folder / f"trace.rank{slow_rank}.json", seed=slow_rank, rank=slow_rank, world_size=ranks,
              slow=SLOW)
    with base.open("rb") as src:
        head = src.read(4096)
        cut = head.index(_RANK_FIELD)
        size = base.stat().st_size
        for r in range(1, ranks):
            if r == slow_rank:
                continue
            new_head = head[:cut] + head[cut:].replace(b'"rank": 0,', f'"rank": {r},'.encode(), 1)
            with (folder / f"trace.rank{r}.json").open("wb") as out:
                out.write(new_head)
                out.flush()
                offset = len(head)
                while offset < size:
                    offset += os.sendfile(out.fileno(), src.fileno(), offset, min(size - offset, 1 << 30))
    return [folder / f"trace.rank{r}.json" for r in range(ranks)]


def _hwm_mb(pid: int) -> float | None:
    """The peak RSS of process `pid` so far (VmHWM), MB; None once it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass
class Peaks:
    """Peak RSS (MB) of a client process and of every process under it, sampled until `stop`; the processes
    that run the client's own program (its Dask workers, forked or spawned) apart from the others it starts
    (`git` for the history, say)."""

    client: int
    every_s: float = 0.2
    peak: dict[int, float] = field(default_factory=dict)
    exe: dict[int, str] = field(default_factory=dict)
    """The program each process ran when last seen (a child forked to run another program has run it since)."""
    seen_s: dict[int, float] = field(default_factory=dict)
    """When each process was last seen alive (seconds since the start)."""
    _stop: threading.Event = field(default_factory=threading.Event)

    def sample(self) -> None:
        try:
            procs = [psutil.Process(self.client)]
            procs += procs[0].children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for proc in procs:
            pid = proc.pid
            try:
                exe = proc.exe()  # "" once the process has exited: its program is the one last seen
            except psutil.Error:
                continue
            if exe:
                self.exe[pid] = exe
            mb = _hwm_mb(pid)
            if mb is not None:
                self.peak[pid] = max(mb, self.peak.get(pid, 0.0))
                self.seen_s[pid] = time.perf_counter()

    def run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    def __enter__(self) -> Peaks:
        self._thread = threading.Thread(target=self.run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def workers(self) -> dict[int, float]:
        """Peak MB of each process under the client that runs the client's program."""
        own = self.exe.get(self.client)
        return {pid: mb for pid, mb in self.peak.items() if pid != self.client and self.exe.get(pid) == own}


def summarise(folder: Path, workers: int, env: dict[str, str]) -> dict[str, Any]:
    """`neuron-prof summary folder --workers W --json` in a child process: its document, wall time, exit code
    and the peak RSS of the client and of each of its worker processes."""
    cmd = [sys.executable, "-m", "neuron_prof", "summary", str(folder), "--workers", str(workers), "--json"]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with Peaks(p.pid) as peaks:
        out, err = p.communicate()
    wall = time.perf_counter() - t0
    doc = json.loads(out) if p.returncode == 0 and out.strip() else None
    if p.returncode:
        print(err.decode(errors="replace")[-3000:], file=sys.stderr)
    return {"wall_s": wall, "rc": p.returncode, "doc": doc, "client_mb": peaks.peak.get(p.pid, 0.0),
            "workers_mb": sorted(peaks.workers.values(), reverse=True)}


def named_slow(doc: dict[str, Any] | None, slow_rank: int) -> list[str]:
    """The job findings that name `slow_rank` (its kind and title)."""
    if doc is None:
        return []
    return [f"{f['kind']}: {f['title']}" for f in doc["findings"] if f.get("rank") == slow_rank]


def report(res: dict[str, Any], ranks: int, gb: float, n_events: int, slow_rank: int, workers: int) -> int:
    """Print the figures against the target; exit code 1 when the summary failed or a worker went over."""
    doc = res["doc"]
    run = doc["run"] if doc else {}
    ok = sum(r["status"] == "ok" for r in doc["ranks"]) if doc else 0
    print(f"\n{ranks} ranks x {gb:g} GB ({n_events / 1e6:.1f}M events each) on {workers} Dask workers: "
          f"`summary DIR --workers {workers}` exit {res['rc']}, wall {res['wall_s']:.0f} s, ranks ok {ok}/{ranks}")
    wk = res["workers_mb"]
    print(f"peak RSS per worker process (VmHWM) MB: {', '.join(f'{m:,.0f}' for m in wk) or 'none seen'} "
          f"(target <= {TARGET_MB:,} each); client {res['client_mb']:,.0f} MB")
    if run:
        print(f"pieces back: largest {run['piece_bytes_max'] / 1024:.1f} KiB, median "
              f"{run['piece_bytes_median'] / 1024:.1f} KiB ({ranks} held by the client at once: "
              f"~{ranks * run['piece_bytes_median'] / 2**20:.2f} MB); pieces {run['pieces_s']:.0f} s, "
              f"client findings {run['findings_s']:.2f} s")
        print(f"job findings: {sorted({f['kind'] for f in doc['findings']})}")
    named = named_slow(doc, slow_rank)
    print(f"slow rank {slow_rank} named: {'yes' if named else 'NO'}" + "".join(f"\n  {t}" for t in named))
    over = [m for m in wk if m > TARGET_MB]
    return 1 if res["rc"] or not wk or over or ok != ranks else 0
