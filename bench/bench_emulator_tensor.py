"""What a device tensor costs per op: the emulator on its C++ extension device, the emulator on its
tensor-subclass fallback device, a bare subclass and plain CPU (docs/emulator.md, "Why the extension").

    .venv/bin/python bench/bench_emulator_tensor.py           # each mode in a process of its own

CPU time per call (time.process_time, so a loaded machine changes it less than wall time), median of 5, torch
on 1 thread: `a + b` and `a.add_(b)` on 64x64, `a.view(-1)`, and one nn.Linear(64, 64) forward+backward.
The first run builds the extension if `make` has not (30 s to 2 minutes on 2 cores).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable

MODES = ("cpu", "emulator", "emulator-subclass", "subclass-bare")


def _setup(mode: str) -> str:
    import torch

    if mode == "cpu":
        return "cpu"
    from neuron_prof import emulator

    impl = "extension" if mode == "emulator" else "subclass"
    emulator.enable(emulator.EmulatorConfig.fast(ground_truth=False, device_impl=impl))
    if mode == "subclass-bare":  # the least a subclass does: unwrap, run the CPU op, rewrap
        from neuron_prof.emulator import _tensor

        nt = _tensor.NeuronTensor

        def bare(func, args, kwargs):  # type: ignore[no-untyped-def]
            out = func(*[a._elem if isinstance(a, nt) else a for a in args], **kwargs)
            return nt(out, 0) if isinstance(out, torch.Tensor) else out

        _tensor.set_executor(bare)
    return "neuron"


def _us(fn: Callable[[], object], n: int) -> float:
    fn()
    runs = []
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        runs.append((time.process_time() - t0) / n * 1e6)
    return statistics.median(runs)


def _one(mode: str) -> None:
    import torch

    torch.set_num_threads(1)
    dev = _setup(mode)
    a, b = torch.ones(64, 64, device=dev), torch.ones(64, 64, device=dev)
    lin, x = torch.nn.Linear(64, 64).to(dev), torch.ones(32, 64, device=dev)

    def step() -> None:
        lin.zero_grad()
        lin(x).sum().backward()

    cols = (_us(lambda: a + b, 3000), _us(lambda: a.add_(b), 3000), _us(lambda: a.view(-1), 3000),
            _us(step, 300))
    print(f"| {mode} | " + " | ".join(f"{c:.1f}" for c in cols) + " |")


def main() -> None:
    print("| mode | a + b µs | a.add_(b) µs | a.view(-1) µs | Linear fwd+bwd µs |\n|---|---|---|---|---|")
    for mode in MODES:
        out = subprocess.run([sys.executable, __file__, mode], capture_output=True, text=True, timeout=900)
        failed = f"| {mode} | failed: {out.stderr.strip().splitlines()[-1:]} |"
        print(out.stdout.strip() or failed, flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        _one(sys.argv[1])
    else:
        main()
