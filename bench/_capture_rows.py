"""One row of `bench capture`'s tiny-op table, measured in this process (its own: the emulated device is
enabled once per process, and a launch mode is read from the environment when it is).

    python -m bench._capture_rows --device cpu --style ops --rounds 5 --steps 8     # prints one JSON line

The workload is a real device's regime: many microsecond ops per step, 4 per iteration (``(a * b + c).relu()
- d``, or the same as calls, ``torch.sub(torch.relu(torch.add(torch.mul(a, b), c)), d)``) on tiny tensors.
A step's time is its wall-clock time in the loop (what the user feels), ending with a device synchronize where
there is a device. The three modes (no profiler; bare torch.profiler with the options neuron-prof gives it;
``neuron_prof.profile()`` with its defaults) alternate within each round, in an order rotated each round and
reversed every other three rounds (each mode follows each other mode about equally often), so that the machine's
load hits them alike. A stopped session's garbage is collected before the next mode starts: measured on this
machine, a mode that followed a stopped torch.profiler session ran 5-20% slower than one that followed a
neuron_prof session, and the plain rotation put neuron_prof after torch.profiler in two rounds of three.

``--fresh`` measures one session per process instead (the user's regime: one capture in a new process), each
round starting the three modes' processes in the rotated order; `fresh_row` runs it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

MODES = ("none", "torch.profiler", "neuron_prof")


def workload(device: str, style: str, iters: int) -> tuple[Callable[[], None], Callable[[], None]]:
    """(one step, synchronize the device)."""
    import torch

    if device == "neuron":
        import neuron_prof.emulator as emu

        # NEURON_LAUNCH_BLOCKING picks the launch mode, NEURON_PROF_EMULATE_HOST_COST what an op costs the host
        emu.enable(emu.EmulatorConfig.from_env())
    a, b, c, d = (torch.randn(8).to(device) for _ in range(4))
    sync: Callable[[], None] = (lambda: None) if device == "cpu" else getattr(torch, device).synchronize

    def ops() -> None:
        for _ in range(iters):
            (a * b + c).relu() - d

    def calls() -> None:
        for _ in range(iters):
            torch.sub(torch.relu(torch.add(torch.mul(a, b), c)), d)

    return (ops if style == "ops" else calls), sync


def bare_profiler(device: str) -> Any:
    """torch.profiler with the options neuron_prof.profile() gives it (capture/_kineto.profiler_kwargs), and the
    device's activity where torch has one."""
    import torch
    from torch.profiler import ProfilerAction, ProfilerActivity

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    return torch.profiler.profile(activities=acts, record_shapes=True, with_stack=True, with_modules=True,
                                  profile_memory=True, schedule=lambda _s: ProfilerAction.RECORD)


def _steps(step: Callable[[], None], sync: Callable[[], None], n: int,
           mark: Callable[[], None] | None) -> tuple[list[float], list[float]]:
    """Each step's wall time and the process's CPU time in it (`time.process_time`: every thread's, the
    profiler's and its samplers' included; less sensitive than wall time to other processes on the machine)."""
    out, cpu = [], []
    for _ in range(n):
        c0 = time.process_time()
        t0 = time.perf_counter()
        step()
        sync()
        if mark is not None:
            mark()
        out.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return out[1:], cpu[1:]  # the first step of a mode follows the previous mode's start or end


def session_steps(device: str, mode: str, step: Callable[[], None], sync: Callable[[], None],
                  steps: int) -> tuple[list[float], list[float], float | None]:
    """One session of `mode` over `steps` steps: each step's wall and CPU time (`_steps`), and for neuron_prof the
    memory sampler's CPU time during the steps over their wall time (None when no polling probe ran)."""
    if mode == "none":
        return (*_steps(step, sync, steps, None), None)
    if mode == "torch.profiler":
        p = bare_profiler(device)
        p.start()
        times, cpu = _steps(step, sync, steps, p.step)
        p.stop()
        return times, cpu, None
    import neuron_prof

    s = neuron_prof.profile(None, quiet=True).start()
    probes = getattr(getattr(s, "_backend", None), "probes", [])
    mem = [p for p in probes if getattr(p, "name", "") == "memory" and getattr(p, "_thread", None)]
    o0 = sum(p.overhead_ns for p in mem)
    t0 = time.perf_counter_ns()
    times, cpu = _steps(step, sync, steps, s.step)
    wall = time.perf_counter_ns() - t0
    o1 = sum(p.overhead_ns for p in mem)  # the sampler runs on through the session's stop: not a step's
    s.stop()
    return times, cpu, ((o1 - o0) / max(wall, 1) if mem else None)


def order(r: int) -> list[str]:
    """Round `r`'s order of the modes: rotated each round, reversed every other three rounds."""
    rot = list(MODES[r % 3:] + MODES[:r % 3])
    return rot[::-1] if (r // 3) % 2 else rot


def measure(device: str, style: str, rounds: int, steps: int, iters: int) -> dict[str, Any]:
    """Per-round medians of each mode's step time, the memory probe's CPU share, and the load average."""
    import torch

    import neuron_prof

    torch.set_num_threads(1)
    step, sync = workload(device, style, iters)
    for _ in range(3):
        step()
    sync()
    with neuron_prof.profile(None, quiet=True) as warm:  # one-time imports and Kineto's init, not measured
        step()
        warm.step()
    per_round: dict[str, list[float]] = {m: [] for m in MODES}
    per_round_cpu: dict[str, list[float]] = {m: [] for m in MODES}
    probe_share: list[float] = []
    load0 = os.getloadavg()[0]

    def run(mode: str) -> None:
        times, cpu, share = session_steps(device, mode, step, sync, steps)
        if share is not None:
            probe_share.append(share)
        per_round[mode].append(statistics.median(times))
        per_round_cpu[mode].append(statistics.median(cpu))

    for r in range(rounds):
        for mode in order(r):
            run(mode)
            gc.collect()  # outside the steps: the stopped session's garbage, not the next mode's cost
    return {"device": device, "style": style, "launch": os.environ.get("NEURON_LAUNCH_BLOCKING", ""),
            "host_cost": os.environ.get("NEURON_PROF_EMULATE_HOST_COST", ""),
            "iters": iters, "ops_per_step": 4 * iters, "rounds": rounds, "steps": steps - 1,
            "per_round_s": per_round, "per_round_cpu_s": per_round_cpu, "memory_probe_share": probe_share,
            "load": [load0, os.getloadavg()[0]], "torch": torch.__version__}


def one_session(device: str, style: str, mode: str, steps: int, iters: int) -> dict[str, Any]:
    """One mode's step times in this process, its only session (after 3 unprofiled steps: the first calls'
    one-time costs)."""
    import torch

    torch.set_num_threads(1)
    step, sync = workload(device, style, iters)
    for _ in range(3):
        step()
    sync()
    times, cpu, _ = session_steps(device, mode, step, sync, steps)
    return {"mode": mode, "s": statistics.median(times), "cpu_s": statistics.median(cpu)}


def fresh_row(device: str, style: str, env: dict[str, str], rounds: int, steps: int, iters: int) -> dict[str, Any]:
    """`measure`'s result with each session in a new process of its own (`--fresh`), the modes alternating."""
    per_round: dict[str, list[float]] = {m: [] for m in MODES}
    per_round_cpu: dict[str, list[float]] = {m: [] for m in MODES}
    load0 = os.getloadavg()[0]
    for r in range(rounds):
        for mode in order(r):
            cmd = [sys.executable, "-m", "bench._capture_rows", "--device", device, "--style", style, "--fresh",
                   mode, "--steps", str(steps), "--iters", str(iters)]
            out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=600)
            if out.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)}: {out.stderr[-2000:]}")
            d = json.loads(out.stdout.strip().splitlines()[-1])
            per_round[mode].append(d["s"])
            per_round_cpu[mode].append(d["cpu_s"])
    return {"device": device, "style": style, "iters": iters, "ops_per_step": 4 * iters, "rounds": rounds,
            "steps": steps - 1, "per_round_s": per_round, "per_round_cpu_s": per_round_cpu,
            "memory_probe_share": [], "load": [load0, os.getloadavg()[0]], "fresh": True}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--fresh", choices=MODES, help="one session of this mode, this process's only one")
    ap.add_argument("--style", choices=["ops", "calls"], default="ops")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--iters", type=int, default=100, help="iterations of 4 ops per step")
    a = ap.parse_args(argv)
    if a.fresh:
        print(json.dumps(one_session(a.device, a.style, a.fresh, a.steps, a.iters)))
    else:
        print(json.dumps(measure(a.device, a.style, a.rounds, a.steps, a.iters)))


if __name__ == "__main__":
    main()
