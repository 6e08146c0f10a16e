"""Run a small workload on the emulated device under the neuron adapter; print the trace and the emulator's
ground-truth log as JSON (run in a subprocess: the emulated device is registered once per process)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

import orjson
import torch


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    from neuron_prof.emulator import EmulatorConfig, enable, ground_truth

    enable(EmulatorConfig(eager_compile_base_ms=4.0, eager_compile_ms_per_operand=0.0, eager_compile_ms_per_gflop=0.0,
                          graph_compile_base_ms=8.0, graph_compile_ms_per_node=0.0))
    import torch.distributed as dist

    from neuron_prof.backends import get_backend
    from neuron_prof.model import TrackKind
    from tests.fakes.kineto import profile_with

    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to("neuron")
    compiled = torch.compile(lambda t: (t * 2 + 1).sum(dim=-1), backend="neuron", dynamic=False)
    x = torch.randn(16, 32).to("neuron")
    torch.neuron.synchronize()

    def step() -> None:
        with torch.no_grad():
            y = model(x)
            torch.sort(y, dim=-1)            # reported fallback
            torch.linalg.qr(y[:, :8])        # silent fallback (not in get_fallback_ops)
            compiled(y)                      # torch.compile graph: compiled once
            g = y.clone()
            dist.all_reduce(g)               # collective: 16*8*4 bytes
            y.sum().item()                   # sync point
            torch.neuron.synchronize()       # sync point
        torch.randn(4, 4, dtype=torch.float64).to("neuron")  # float64 demoted to float32 on the device

    gt = ground_truth()
    gt.clear()
    backend = get_backend(hint=model)
    # the device timeline comes as on Trainium: the runtime's system profile, processed by neuron-explorer
    backend.enable_runtime_profile(Path(sys.argv[1] if len(sys.argv) > 1 else ".") / "neuron_profile")
    b, ctx = profile_with(backend, lambda: [step() for _ in range(3)], options={"memory_interval_ms": 1},
                          export=backend.export_trace)
    trace = b.build()
    out: dict[str, Any] = {"backend": backend.name, "errors": ctx.errors, "window": [ctx.start_ns, ctx.end_ns],
                           "gt": [{**r, "detail": r["detail"] if not isinstance(r["detail"], set) else None}
                                  for r in gt.records()],
                           "flows": len(trace.flows), "max_allocated": torch.neuron.max_memory_allocated(),
                           "allocated_now": torch.neuron.memory_allocated()}
    for kind in (TrackKind.DEVICE, TrackKind.COMPILE, TrackKind.FALLBACK, TrackKind.SYNC, TrackKind.COLLECTIVE):
        rows = trace.slices_on(kind)
        out[kind] = [{"name": trace.slice_name(int(r)), "ts": int(trace.slices.ts_ns[r]),
                      "dur": int(trace.slices.dur_ns[r]), "track": trace.tracks[int(trace.slices.track[r])].name,
                      **{k: v for k, v in trace.slice_args(int(r)).items() if k != "stack"}} for r in rows]
        out[kind + "_flows_in"] = int(sum(int(d) in set(rows.tolist()) for d in trace.flows.dst))
    out["dtype"] = [trace.instant_args(int(i)) for i in trace.instants_on(TrackKind.DTYPE)]
    out["roundtrip"] = _roundtrip(trace, out_dir=sys.argv[1] if len(sys.argv) > 1 else None)
    mem = trace.track_ids(TrackKind.MEMORY)
    out["memory"] = {trace.tracks[int(t)].name: trace.counters.value[trace.counters.track == t].tolist() for t in mem}
    out["memory_peak"] = [trace.instant_args(int(i)) for i in trace.instants_on(TrackKind.MEMORY)]
    # opt-in deep (dispatch-level) fallback mode, on its own, for one step
    def deep_step() -> None:
        with torch.no_grad():
            y = model(x)
            torch.sort(y, dim=-1)
            torch.neuron.synchronize()

    b2, ctx2 = profile_with(get_backend("neuron"), deep_step,
                            options={"deep_fallback": True, "probes": ["deep_fallback"]}, with_stack=False)
    t2 = b2.build()
    out["deep"] = {"errors": ctx2.errors, "meta": t2.metadata.get("deep_fallback"),
                   "events": [{"name": t2.slice_name(int(r)), **t2.slice_args(int(r))}
                              for r in t2.slices_on(TrackKind.FALLBACK)]}
    dist.destroy_process_group()
    sys.stdout.write("\n@@JSON@@" + orjson.dumps(out).decode())


def _roundtrip(trace: Any, out_dir: str | None) -> dict[str, Any]:
    """Write the trace as .json and .pftrace, load both back: per format, {track kind: [track names]} and counts."""
    if out_dir is None:
        return {}
    import neuron_prof
    from neuron_prof.exporters import write_trace

    got: dict[str, Any] = {}
    for ext in ("json", "pftrace"):
        path = os.path.join(out_dir, f"emulated.{ext}")
        write_trace(trace, path)
        t = neuron_prof.load(path)
        kinds: dict[str, list[str]] = {}
        for tr in t.tracks:
            kinds.setdefault(tr.kind, []).append(tr.name)
        got[ext] = {"kinds": kinds, "path": path,
                    "counts": {k: int(len(t.slices_on(k))) for k in ("device", "compile", "fallback", "sync",
                                                                      "collective")}}
    return got


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())
    main()
