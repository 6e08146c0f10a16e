"""Per-op overhead of the emulated neuron device: µs per op on "neuron" minus µs per op on plain CPU.

    .venv/bin/python bench/bench_emulator.py [--ops 10000]

Compile costs are zeroed and every signature is warmed first, so the number is the steady-state cost of the
emulation itself (unwrap, signature lookup, CPU op, rewrap, memory accounting, device-clock record).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from neuron_prof import emulator


def _per_op_us(fn: Callable[[], object], n: int, repeats: int = 5) -> float:
    fn()
    best = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(best)


class _Bare(torch.Tensor):
    """The least a Python device tensor can do: unwrap, run on CPU, rewrap. The emulator's floor."""

    @staticmethod
    def __new__(cls, elem: torch.Tensor) -> _Bare:
        r = torch.Tensor._make_wrapper_subclass(cls, elem.size(), dtype=elem.dtype, device="neuron:0")
        r.elem = elem
        return r

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*[a.elem if isinstance(a, _Bare) else a for a in args], **(kwargs or {}))
        return _Bare(out) if isinstance(out, torch.Tensor) else out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ops", type=int, default=10_000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    emulator.enable(emulator.EmulatorConfig.fast(ground_truth=False))
    rows = []
    for label, shape in (("add 64x64", (64, 64)), ("add 1x1", (1, 1))):
        a, b = torch.randn(*shape), torch.randn(*shape)
        da, db = a.to("neuron"), b.to("neuron")
        cpu = _per_op_us(lambda a=a, b=b: a + b, args.ops)
        dev = _per_op_us(lambda da=da, db=db: da + db, args.ops)
        ba, bb = _Bare(a), _Bare(b)
        bare = _per_op_us(lambda ba=ba, bb=bb: ba + bb, args.ops)
        rows.append((label, cpu, dev, bare))
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    da, db = a.to("neuron"), b.to("neuron")
    ba, bb = _Bare(a), _Bare(b)
    rows.append(
        (
            "mm 64x64",
            _per_op_us(lambda: a @ b, args.ops // 2),
            _per_op_us(lambda: da @ db, args.ops // 2),
            _per_op_us(lambda: ba @ bb, args.ops // 2),
        )
    )
    torch.neuron.synchronize()
    print(f"{'op':<12}{'cpu µs/op':>11}{'neuron µs/op':>14}{'overhead µs/op':>16}{'bare wrapper':>14}")
    for label, cpu, dev, bare in rows:
        print(f"{label:<12}{cpu:>11.2f}{dev:>14.2f}{dev - cpu:>16.2f}{bare - cpu:>14.2f}")
    print("overhead = neuron - cpu; bare wrapper = the same for a minimal unwrap/rewrap subclass (the floor)")


if __name__ == "__main__":
    main()
