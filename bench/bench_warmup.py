"""The warm-up plan's cure on the emulated device (issue 36 item 1): time from process start to the end of the
first steady step, three ways, in alternating rounds:

    cold      the script's first run (empty compile cache)
    inproc    the plan applied in the training process before the first step (no persistent cache)
    cache     `python warmup.py` filled the persistent NEFF cache first (TORCH_NEURONX_NEFF_CACHE_DIR), then
              the script runs on it (the fill is timed on its own: a one-off step before training)

    python -m bench.bench_warmup                  # 3 rounds at the emulator's default compile costs
    python -m bench.bench_warmup --scale 4        # compile costs x4 (NEURON_PROF_EMULATE_COMPILE_SCALE)

"The first steady step" is the cold run's (the step after its warm-up steps); every way is read at that step.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCRIPT = """\
import os
import sys

import torch

if os.environ.get("WARMUP_DIR"):  # the plan, applied in-process before the first step
    sys.path.insert(0, os.environ["WARMUP_DIR"])
    import warmup

    warmup.run("neuron")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(12):
    n = (8, 16, 24, 32)[step % 4]  # a batch size that changes: each new size compiles every op again
    x = torch.randn(n, 16, device="neuron")
    y = torch.randint(0, 4, (n,), device="neuron")
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
"""A training script whose batch size changes: every new size compiles every op again, in later steps."""
CACHE_ENVS = ("TORCH_NEURONX_NEFF_CACHE_DIR", "NEURON_PROF_EMULATE_CACHE_DIR")
EXE = str(Path(sys.executable).with_name("neuron-prof"))


def run(d: Path, out: str, **env: str) -> tuple[Path, int, float, str]:
    """Run train.py in `d` under `neuron-prof run --emulate-neuron` (no compile cache unless `env` names one):
    (trace, Unix ns just before the process started, the process's seconds, stdout)."""
    e = {k: v for k, v in os.environ.items() if k not in CACHE_ENVS}
    t0 = time.time_ns()
    r = subprocess.run([EXE, "run", "--emulate-neuron", "-q", "--no-pftrace", "-o", out, "train.py"], check=False,
                       capture_output=True, text=True, timeout=600, cwd=d, env={**e, **env})
    if r.returncode != 0:
        raise RuntimeError(r.stdout + r.stderr)
    return d / out, t0, (time.time_ns() - t0) / 1e9, r.stdout


def fill_cache(d: Path, cache: str, **env: str) -> tuple[float, str]:
    """`python warmup.py` in `d` on the emulated device, filling `cache`: (seconds, stdout)."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "warmup.py"], check=False, capture_output=True, text=True, timeout=600, cwd=d,
                       env={**os.environ, **env, "NEURON_PROF_EMULATE": "1", "TORCH_NEURONX_NEFF_CACHE_DIR": cache})
    if r.returncode != 0:
        raise RuntimeError(r.stdout + r.stderr)
    return time.perf_counter() - t0, r.stdout


def first_steady(path: Path, t0: int, step: int | None = None) -> dict[str, float]:
    """At the end of step `step` (default: the trace's first steady step): seconds from the process start `t0`
    and from the profile's start, and the compiles (cache misses, their seconds) before it."""
    from neuron_prof.analysis import Context, compiles, compute_totals
    from neuron_prof.loaders import load

    trace = load(path)
    ctx = Context(trace)
    st = ctx.steps
    k = min(st.warmup, len(st) - 1) if step is None else step
    end = int(st.end_ns[k])
    miss = [c for c in compiles(trace, ctx) if c.cache == "miss" and c.ts < end]
    return {"step": k, "from_process": (end - t0) / 1e9,
            "from_profile": (end - int(compute_totals(trace)["start_ns"])) / 1e9,
            "compiles": len(miss), "compile_s": sum(c.dur for c in miss) / 1e9}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", default="1", help="NEURON_PROF_EMULATE_COMPILE_SCALE for every run")
    a = ap.parse_args(argv)
    from neuron_prof.cli import main as cli

    scale = {"NEURON_PROF_EMULATE_COMPILE_SCALE": a.scale}
    d = Path(tempfile.mkdtemp(prefix="bench_warmup_"))
    os.environ.setdefault("NEURON_PROF_DATA_DIR", str(d / "data"))  # the runs' history, not the user's
    try:
        (d / "train.py").write_text(SCRIPT)
        rows: dict[str, list[dict[str, Any]]] = {"cold": [], "inproc": [], "cache": []}
        fills: list[float] = []
        step: int | None = None
        for i in range(a.rounds):
            cold, t0, wall, _ = run(d, "cold.json", **scale)
            if step is None:
                step = int(first_steady(cold, t0)["step"])
                cli(["plan", str(cold), "-o", str(d / "warmup.py")])
            rows["cold"].append({**first_steady(cold, t0, step), "wall": wall})
            p, t0, wall, _ = run(d, "inproc.json", WARMUP_DIR=str(d), **scale)
            rows["inproc"].append({**first_steady(p, t0, step), "wall": wall})
            cache = str(d / f"neff_cache_{i}")
            secs, _ = fill_cache(d, cache, **scale)
            fills.append(secs)
            p, t0, wall, _ = run(d, "cache.json", TORCH_NEURONX_NEFF_CACHE_DIR=cache, **scale)
            rows["cache"].append({**first_steady(p, t0, step), "wall": wall})
        med = {w: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for w, rs in rows.items()}
        print(f"warm-up plan, {a.rounds} rounds (median), compile scale {a.scale}, read at step {step} "
              f"(the cold run's first steady step); load {os.getloadavg()[0]:.1f}")
        print(f"  {'way':8} {'from process start':>19} {'from profile start':>19} {'compiles before':>16} "
              f"{'process wall':>13}")
        for w, m in med.items():
            print(f"  {w:8} {m['from_process']:>17.2f} s {m['from_profile']:>17.3f} s "
                  f"{int(m['compiles']):>4} ({m['compile_s']:5.2f} s) {m['wall']:>11.2f} s")
        print(f"  python warmup.py (fills the cache, once before training): {statistics.median(fills):.2f} s")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
