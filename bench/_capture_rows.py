"""One row of `bench capture`'s tiny-op table, measured in this process (its own: the emulated device is
enabled once per process, and a launch mode is read from the environment when it is).

    python -m bench._capture_rows --device cpu --style ops --rounds 5 --steps 8     # prints one JSON line

The workload is a real device's regime: many microsecond ops per step, 4 per iteration (``(a * b + c).relu()
- d``, or the same as calls, ``torch.sub(torch.relu(torch.add(torch.mul(a, b), c)), d)``) on tiny tensors.
A step's time is its wall-clock time in the loop (what the user feels), ending with a device synchronize where
there is a device. The three modes (no profiler; bare torch.profiler with the options neuron-prof gives it;
``neuron_prof.profile()`` with its defaults) alternate within each round, in an order rotated each round, so
that the machine's load hits them alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
        if mode == "none":
            times, cpu = _steps(step, sync, steps, None)
        elif mode == "torch.profiler":
            p = bare_profiler(device)
            p.start()
            times, cpu = _steps(step, sync, steps, p.step)
            p.stop()
        else:
            s = neuron_prof.profile(None, quiet=True).start()
            probes = getattr(getattr(s, "_backend", None), "probes", [])
            mem = [p for p in probes if getattr(p, "name", "") == "memory" and getattr(p, "_thread", None)]
            o0 = sum(p.overhead_ns for p in mem)
            t0 = time.perf_counter_ns()
            times, cpu = _steps(step, sync, steps, s.step)
            wall = time.perf_counter_ns() - t0
            o1 = sum(p.overhead_ns for p in mem)  # the sampler runs on through the session's stop: not a step's
            s.stop()
            if mem:  # a polling probe ran: its thread's CPU time during the steps over their wall time
                probe_share.append((o1 - o0) / max(wall, 1))
        per_round[mode].append(statistics.median(times))
        per_round_cpu[mode].append(statistics.median(cpu))

    for r in range(rounds):
        order = list(MODES[r % 3:] + MODES[:r % 3])
        for mode in order:
            run(mode)
    return {"device": device, "style": style, "launch": os.environ.get("NEURON_LAUNCH_BLOCKING", ""),
            "host_cost": os.environ.get("NEURON_PROF_EMULATE_HOST_COST", ""),
            "iters": iters, "ops_per_step": 4 * iters, "rounds": rounds, "steps": steps - 1,
            "per_round_s": per_round, "per_round_cpu_s": per_round_cpu, "memory_probe_share": probe_share,
            "load": [load0, os.getloadavg()[0]], "torch": torch.__version__}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--style", choices=["ops", "calls"], default="ops")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--iters", type=int, default=100, help="iterations of 4 ops per step")
    a = ap.parse_args(argv)
    print(json.dumps(measure(a.device, a.style, a.rounds, a.steps, a.iters)))


if __name__ == "__main__":
    main()
