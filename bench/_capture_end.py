"""The end of a capture, whole process: from the last step to the process's exit, under
``neuron_prof.profile("t.json")`` (defaults: JSON, .pftrace, findings) against bare torch.profiler's own
``stop()`` + ``export_chrome_trace`` of the same loop (issue 32 item 3: at most that plus 1 s per 100k events).

    python -m bench._capture_end --iters 6000            # both, alternating, 2 rounds; prints one JSON line
    python -m bench._capture_end --child np OUT ITERS    # one process (what the parent runs)

Each run is its own process (a script as a user runs it); the child prints the wall clock when its loop ends,
the parent notes when the process has exited: the difference is what the user waits for after the last step.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def child(mode: str, out: str, iters: int) -> None:
    import torch

    import neuron_prof
    from bench._capture_rows import bare_profiler, workload

    torch.set_num_threads(1)
    step, _ = workload("cpu", "calls", iters)
    if mode == "np":
        s = neuron_prof.profile(out, quiet=True).start()
        for _ in range(10):
            step()
            s.step()
        print(json.dumps({"loop_end": time.time(), "loop_cpu": time.process_time()}), flush=True)
        s.stop()
        tm = s.trace.metadata.get("capture_timings_ns", {}) if s.trace is not None else {}
        n = s.trace.n_events if s.trace is not None else 0
        print(json.dumps({"events": n, "timings_ns": tm}), flush=True)
    else:
        p = bare_profiler("cpu")
        p.start()
        for _ in range(10):
            step()
            p.step()
        print(json.dumps({"loop_end": time.time(), "loop_cpu": time.process_time()}), flush=True)
        p.stop()
        p.export_chrome_trace(out)


def _run(mode: str, out: Path, iters: int) -> dict[str, Any]:
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, "-m", "bench._capture_end", "--child", mode, str(out), str(iters)],
                       capture_output=True, text=True, timeout=900)
    exited = time.time()
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    got: dict[str, Any] = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            got.update(json.loads(line))
    got["end_s"] = exited - got["loop_end"]
    # CPU time of the end: the child's whole CPU time less what it had spent when its loop ended (the machine is
    # shared: wall time waits for other processes, CPU time much less)
    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    got["end_cpu_s"] = cpu - got["loop_cpu"]
    return got


def measure(iters: int, rounds: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-capture-end-"))
    res: dict[str, list[Any]] = {"np": [], "bare": []}
    load0 = os.getloadavg()[0]
    for r in range(rounds):
        for mode in (["np", "bare"] if r % 2 == 0 else ["bare", "np"]):
            res[mode].append(_run(mode, tmp / f"{mode}.json", iters))
    return {"np": res["np"], "bare": res["bare"], "load": [load0, os.getloadavg()[0]]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=3, metavar=("MODE", "OUT", "ITERS"))
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args(argv)
    if a.child:
        child(a.child[0], a.child[1], int(a.child[2]))
        return
    print(json.dumps(measure(a.iters, a.rounds)))


if __name__ == "__main__":
    main()
