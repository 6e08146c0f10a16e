"""Which part of `neuron_prof.profile()` costs a step (issue 32 item 1): bare torch.profiler against the session with
its parts turned off one by one, in one process, alternating, with a second bare torch.profiler as the control
(its ratio to the first is the noise floor of the run: a part whose ratio does not stand out of it costs nothing
that this machine can measure).

    python -m bench._capture_variants --style calls --rounds 40 --steps 16
    python -m bench._capture_variants --variants bare,np,bare2,np_noprobes,np_nooperators,np_noquiet

Variants: ``bare``/``bare2`` (torch.profiler with the options neuron_prof gives it), ``np`` (the defaults),
``np_noprobes`` (``probes=[]``), ``np_nooperators`` (the conversions' forwarders not installed),
``np_noquiet`` (Dynamo's compile pause not installed). Prints each variant's median step time (wall, and the
thread's CPU time) and the median of its per-round ratios to the first variant, then the same ratio by step
index (a cost that fades after the first steps of a session shows there).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench._capture_rows import bare_profiler, workload


def _session(variant: str) -> tuple[Callable[[], None], Callable[[], Any]]:
    """(step, stop) of a started session of `variant`."""
    import neuron_prof
    from neuron_prof.capture import _compile_quiet, _operators

    if variant.startswith("bare"):
        p = bare_profiler("cpu")
        p.start()
        return p.step, p.stop
    s = neuron_prof.profile(None, quiet=True, pftrace=False, **({"probes": []} if variant == "np_noprobes" else {}))
    off = {"np_nooperators": (_operators.OperatorRecorder, "install", lambda self: None),
           "np_noquiet": (_compile_quiet.CompileQuiet, "install", lambda self: False)}.get(variant)
    if off is None:
        s.start()
    else:
        cls, name, stub = off
        orig = getattr(cls, name)
        setattr(cls, name, stub)
        try:
            s.start()
        finally:
            setattr(cls, name, orig)
    return s.step, s.stop


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--style", choices=["ops", "calls"], default="calls")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--steps", type=int, default=16, help="steps per variant per round (the first is not counted)")
    ap.add_argument("--iters", type=int, default=100, help="iterations of 4 tiny ops per step")
    ap.add_argument("--variants", default="bare,np,bare2,np_noprobes,np_nooperators,np_noquiet")
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    work, _ = workload("cpu", a.style, a.iters)
    variants = a.variants.split(",")
    for v in variants:  # imports, Kineto's init
        step, stop = _session(v)
        work()
        step()
        stop()
    wall: dict[str, list[float]] = {v: [] for v in variants}
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    by_index: dict[str, list[list[float]]] = {v: [] for v in variants}
    load0 = os.getloadavg()[0]
    for r in range(a.rounds):
        for v in variants[r % len(variants):] + variants[:r % len(variants)]:
            step, stop = _session(v)
            w, c = [], []
            for _ in range(a.steps):
                c0, t0 = time.thread_time(), time.perf_counter()
                work()
                step()
                w.append(time.perf_counter() - t0)
                c.append(time.thread_time() - c0)
            stop()
            wall[v].append(statistics.median(w[1:]))
            cpu[v].append(statistics.median(c[1:]))
            by_index[v].append(c[1:])
    base = variants[0]
    print(f"{a.style}, {4 * a.iters} tiny ops a step, {a.rounds} rounds x {a.steps - 1} steps, "
          f"load {load0:.1f}-{os.getloadavg()[0]:.1f}; ratios: median of the rounds' ratios to {base}")
    for v in variants:
        rw = statistics.median(x / y for x, y in zip(wall[v], wall[base], strict=True))
        rc = statistics.median(x / y for x, y in zip(cpu[v], cpu[base], strict=True))
        print(f"  {v:15s} wall {statistics.median(wall[v]) * 1e3:.3f} ms {rw:.3f}x   "
              f"CPU {statistics.median(cpu[v]) * 1e3:.3f} ms {rc:.3f}x")
    for v in variants[1:]:
        cols, bcols = zip(*by_index[v], strict=True), zip(*by_index[base], strict=True)
        print(f"  {v:15s} CPU by step index: " + " ".join(
            f"{statistics.median(x) / statistics.median(y):.3f}" for x, y in zip(cols, bcols, strict=True)))


if __name__ == "__main__":
    main()
