"""Overhead of the backend's default probes versus bare torch.profiler with the same options.

    python -m bench.bench_probes                      # CPU adapter, 5 rounds x 20 steps
    python -m bench.bench_probes --backend neuron     # the neuron adapter on the emulated device

Each round runs the same training steps twice, interleaved: under torch.profiler alone, and under
torch.profiler plus the adapter's probes (start before the profiler, stop and contribute after it, as a
session does). Reported: median step time of each mode, the difference per step, and what the probes cost
after the region (stop + contribute into a builder holding the Kineto events).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any


def _workload(device: str) -> Callable[[], None]:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256),
                                torch.nn.LayerNorm(256), torch.nn.Linear(256, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, 256).to(device)
    y = torch.randint(0, 10, (64,)).to(device)

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()  # a sync point, as real loops log the loss

    return step


def _profiler_kwargs(extra: dict[str, Any]) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity

    kw: dict[str, Any] = {"activities": [ProfilerActivity.CPU], "record_shapes": True, "with_stack": True,
                          "with_modules": True, "profile_memory": True,
                          "experimental_config": torch._C._profiler._ExperimentalConfig(verbose=True)}
    kw.update(extra)
    return kw


def _round(step: Callable[[], None], steps: int, backend_name: str | None,
           accounting: dict[str, list[int]] | None = None) -> tuple[list[float], float]:
    """Step times (s) under the profiler, and the post-region probe cost (s) when a backend is given."""
    import torch.profiler as tp

    from neuron_prof.backends import CaptureContext, get_backend
    from neuron_prof.loaders.json.reader import parse_kineto_into
    from neuron_prof.model import TraceBuilder

    backend = get_backend(backend_name) if backend_name else None
    ctx = CaptureContext(host_pid=os.getpid(), main_tid=threading.get_native_id())
    kw = _profiler_kwargs(backend.profiler_options() if backend else {})
    if backend:
        backend.start(ctx)
    times = []
    with tp.profile(**kw) as prof:
        ctx.start_ns = time.time_ns()
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        ctx.end_ns = time.time_ns()
    post = 0.0
    if backend:
        import orjson

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            prof.export_chrome_trace(path)
            with open(path, "rb") as f:
                raw = f.read()
            try:
                data = orjson.loads(raw)
            except orjson.JSONDecodeError:
                import json

                data = json.loads(raw.decode("utf-8", errors="replace"), strict=False)
        b = TraceBuilder()
        parse_kineto_into(b, data, "bench")
        t0 = time.perf_counter()
        backend.stop(ctx)
        backend.contribute(b, ctx)
        post = time.perf_counter() - t0
        if ctx.errors:
            raise RuntimeError(f"probe errors: {ctx.errors}")
        if accounting is not None:
            for name, ns in b.metadata.get("probe_hook_ns", {}).items():
                accounting.setdefault(name, []).append(int(ns))
    return times, post


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cpu", choices=["cpu", "neuron"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args(argv)
    device = "cpu"
    if args.backend == "neuron":
        from neuron_prof.emulator import EmulatorConfig, enable

        enable(EmulatorConfig.fast())
        device = "neuron"
    step = _workload(device)
    for _ in range(3):
        step()  # warm up: first-call compiles and allocations are not what we measure
    bare: list[float] = []
    probes: list[float] = []
    posts: list[float] = []
    acct: dict[str, list[int]] = {}
    for _ in range(args.rounds):
        t, _ = _round(step, args.steps, None)
        bare += t[1:]
        t, post = _round(step, args.steps, args.backend, acct)
        probes += t[1:]
        posts.append(post)
    mb, mp = statistics.median(bare), statistics.median(probes)
    nb, np_ = min(bare), min(probes)
    print(f"backend={args.backend} device={device} rounds={args.rounds} steps={args.steps}")
    print(f"  bare torch.profiler      median step {mb * 1e3:8.3f} ms")
    print(f"  + default probes         median step {mp * 1e3:8.3f} ms   "
          f"({(mp - mb) * 1e6:+.0f} us/step, {100 * (mp - mb) / mb:+.1f}%)")
    print(f"  fastest step             bare {nb * 1e3:.3f} ms, probes {np_ * 1e3:.3f} ms ({(np_ - nb) * 1e6:+.0f} us)")
    print(f"  probes after the region  stop+contribute median {statistics.median(posts) * 1e3:.1f} ms")
    # The probes' own accounting of time inside their hooks while the steps ran (less sensitive to load).
    total = sum(statistics.median(v) for v in acct.values())
    per_step = total / max(args.steps, 1)
    print(f"  self-accounted hook time per round {total / 1e6:.2f} ms = {per_step / 1e3:.1f} us/step: "
          + ", ".join(f"{k} {statistics.median(v) / 1e3:.0f} us" for k, v in sorted(acct.items())))


if __name__ == "__main__":
    main()
