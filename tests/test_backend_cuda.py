"""The CUDA adapter's trace-side logic on the real CUDA traces in ../shared/traces/kineto/.

Each trace goes into a builder the way a live capture does (the Kineto JSON parser), then the adapter
contributes. Expected numbers are counted from the raw JSON events, independently of the adapter.
"""

from __future__ import annotations

import gzip
from typing import Any

import orjson
import pytest

from neuron_prof.backends import CaptureContext
from neuron_prof.backends.cuda import CudaBackend
from neuron_prof.loaders.json.reader import parse_kineto_into
from neuron_prof.model import Arg, ProcessKind, TraceBuilder, TrackKind
from tests.conftest import KINETO_DIR

WAITS = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy"}
CUDA_TRACES = ["nccl_parser_config_nccl_data.json.gz", "critical_path_alexnet_trace.json.gz",
               "trace_filter_sampled_rank-0.json.gz"]


def _raw(name: str) -> dict[str, Any]:
    p = KINETO_DIR / name
    if not p.exists():
        pytest.skip(f"{p} absent")
    data = p.read_bytes()
    return orjson.loads(gzip.decompress(data) if name.endswith(".gz") else data)  # type: ignore[no-any-return]


def _contribute(data: dict[str, Any]) -> tuple[TraceBuilder, CaptureContext]:
    b = TraceBuilder()
    parse_kineto_into(b, data, "test")
    host = next(p.pid for p in b.processes if p.kind == ProcessKind.HOST and isinstance(p.pid, int))
    ctx = CaptureContext(host_pid=host)
    backend = CudaBackend()
    backend.start(ctx)
    backend.stop(ctx)
    backend.contribute(b, ctx)
    return b, ctx


@pytest.fixture(scope="module")
def nccl() -> tuple[dict[str, Any], TraceBuilder, CaptureContext]:
    data = _raw("nccl_parser_config_nccl_data.json.gz")
    b, ctx = _contribute(data)
    return data, b, ctx


def test_nccl_collectives_with_message_sizes(nccl: tuple[dict[str, Any], TraceBuilder, CaptureContext]) -> None:
    data, b, ctx = nccl
    assert ctx.errors == []
    rpc = [e for e in data["traceEvents"] if e.get("name") == "record_param_comms" and e.get("args", {}).get(
        "Collective name")]
    trace = b.build()
    rows = trace.slices_on(TrackKind.COLLECTIVE)
    assert trace.tracks[trace.find_track(TrackKind.COLLECTIVE)].name == "collectives"
    assert len(rows) == len(rpc) > 0
    ev = sorted((int(trace.slices.ts_ns[r]), trace.slice_args(int(r))) for r in rows)
    rpc.sort(key=lambda e: e["ts"])
    size = {"Float": 4, "BFloat16": 2, "Half": 2, "Long": 8, "Int": 4, "Byte": 1, "Char": 1, "Double": 8}
    for (_, a), e in zip(ev, rpc):
        ra = e["args"]
        assert a[Arg.BYTES_IN] == ra["In msg nelems"] * size[ra["dtype"]]
        assert a[Arg.BYTES_OUT] == ra["Out msg nelems"] * size[ra["dtype"]]
        assert a[Arg.RANKS] == orjson.loads(ra["Process Group Ranks"]) and a[Arg.WORLD_SIZE] == ra["Group size"]
        assert a.get(Arg.GROUP, "") == ra.get("Process Group Name", "")
    # every collective found its NCCL kernel: bandwidth is over the device span
    kernels = [e for e in data["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel")]
    with_dev = [a for _, a in ev if "device_dur_ns" in a]
    assert len(with_dev) == min(len(kernels), len(ev))
    a = with_dev[0]
    assert a[Arg.ALGBW] == pytest.approx(max(a[Arg.BYTES_IN], a[Arg.BYTES_OUT]) / a["device_dur_ns"], rel=1e-4)


def test_sync_points_from_runtime_waits(nccl: tuple[dict[str, Any], TraceBuilder, CaptureContext]) -> None:
    data, b, _ = nccl
    waits = [e for e in data["traceEvents"] if e.get("cat") == "cuda_runtime" and e.get("name") in WAITS]
    trace = b.build()
    rows = trace.slices_on(TrackKind.SYNC)
    assert len(rows) == len(waits) > 0
    durs = sorted(int(d) for d in trace.slices.dur_ns[rows])
    assert durs == sorted(round(float(e["dur"]) * 1000) for e in waits)
    kinds = {trace.slice_args(int(r))[Arg.SYNC_KIND] for r in rows}
    assert kinds <= {"item", "cpu", "synchronize", "cudaMemcpy"}


@pytest.mark.parametrize("name", CUDA_TRACES)
def test_every_kernel_and_memcpy_is_linked_to_its_launch(name: str) -> None:
    data = _raw(name)
    b, ctx = _contribute(data)
    assert ctx.errors == []
    trace = b.build()
    dev = trace.slices_on(TrackKind.DEVICE)
    corr_rt = {e["args"]["correlation"] for e in data["traceEvents"]
               if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    launchable = [int(r) for r in dev if trace.slice_args(int(r)).get("correlation") in corr_rt]
    import numpy as np

    assert len(launchable) > 0
    assert np.isin(launchable, trace.flows.dst).all()
