"""Findings from what plain torch.profiler traces carry (no probes): Kineto [memory] instants, NCCL
kernels with "Collective name", gloo annotations, and a device trace's idle gaps."""

from __future__ import annotations

import pytest

from neuron_prof.analysis import analyze, report
from neuron_prof.model import KinetoCat, ProcessKind, Trace, TraceBuilder, TrackKind
from tests._builders import one, stack

MS = 1_000_000
T0 = 1_700_000_000_000_000_000
MIB = 1 << 20


def cuda_trace() -> Trace:
    b = TraceBuilder()
    main = b.thread_track(10, 10, "pt_main_thread")
    gpu = b.process(0, "GPU 0", ProcessKind.DEVICE, labels="GPU 0")
    s7 = b.track(gpu, "stream 7", TrackKind.DEVICE, tid=7)
    s40 = b.track(gpu, "stream 40", TrackKind.DEVICE, tid=40)
    b.metadata["kineto"] = {"deviceProperties": [{"id": 0, "totalGlobalMem": 256 * MIB}]}
    total = 0
    for step in range(3):
        s = T0 + step * 10 * MS
        # compute 0..4 ms on stream 7; all-reduce 3..6 ms on stream 40 (1 ms overlapped)
        b.add_slice(s7, s, 4 * MS, "volta_sgemm_128x64_nn", KinetoCat.KERNEL)
        dur = 3 * MS if step < 2 else 9 * MS  # the last one is slow (a late peer)
        b.add_slice(
            s40,
            s + 3 * MS,
            dur,
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, ...)",
            KinetoCat.KERNEL,
            {"Collective name": "allreduce", "In msg nelems": 4 * MIB, "dtype": "Float", "Group size": 8},
        )
        # host: a linear that allocates, then frees
        b.add_slice(
            main,
            s + 100_000,
            500_000,
            "aten::linear",
            KinetoCat.CPU_OP,
            {"Call stack": stack("/srv/model.py(88): forward")},
        )
        grow = (64 if step == 1 else 16) * MIB
        total += grow
        b.add_instant(
            main,
            s + 200_000,
            "[memory]",
            KinetoCat.CPU_INSTANT,
            {
                "Bytes": grow,
                "Total Allocated": total,
                "Total Reserved": 200 * MIB,
                "Device Type": 1,
                "Device Id": 0,
                "Addr": 1234,
            },
        )
        total -= grow
        b.add_instant(
            main,
            s + 9 * MS,
            "[memory]",
            KinetoCat.CPU_INSTANT,
            {
                "Bytes": -grow,
                "Total Allocated": total,
                "Total Reserved": 200 * MIB,
                "Device Type": 1,
                "Device Id": 0,
                "Addr": 1234,
            },
        )
    return b.build()


def test_memory_peak_from_kineto_memory_events() -> None:
    f = one(analyze(cuda_trace()), "memory_peak")
    assert f.evidence["series"] == "cuda:0 allocated"
    assert f.evidence["peak_bytes"] == 64 * MIB and f.ts_ns == T0 + 10 * MS + 200_000
    assert f.evidence["largest_allocations"][0] == {
        "bytes": 64 * MIB,
        "ts_ns": T0 + 10 * MS + 200_000,
        "op": "aten::linear",
        "call_site": "",  # torch.profiler's own stacks give function entry lines: never a call site
    }
    assert f.evidence["function"] == "/srv/model.py forward"
    assert f.evidence["capacity_bytes"] == 256 * MIB and f.severity == "info"


def test_nccl_kernels_are_collectives() -> None:
    found = analyze(cuda_trace())
    f = one(found, "collective")
    assert f.evidence["op"] == "allreduce" and f.count == 3
    assert f.evidence["total_ns"] == (3 + 3 + 9) * MS
    # the first 1 ms of each overlaps the sgemm on stream 7
    assert f.evidence["exposed_ns"] == f.cost_ns == (2 + 2 + 8) * MS
    assert f.evidence["bytes_median"] == 4 * MIB * 4
    assert f.evidence["algbw_gbps_median"] == pytest.approx(16 * MIB / (3 * MS))
    assert f.evidence["slow"] == [] and f.evidence["max_ns"] == 9 * MS  # 9 ms is 3x the 3 ms median, not more


def test_device_totals_and_idle_on_two_streams() -> None:
    rep = report(cuda_trace())
    # busy per step: 0..6 ms (stream 7 0..4, stream 40 3..6), last step 0..12 ms
    assert rep.totals["device_busy_ns"] == (6 + 6 + 12) * MS
    assert rep.totals["devices"][0]["name"] == "GPU 0"
    f = one(rep.findings, "device_idle")
    assert f.count == 2 and f.cost_ns == 2 * 4 * MS  # 6 -> 10 ms in steps 0 and 1
    assert f.evidence["device"] == "GPU 0"


def test_gloo_annotations_are_collectives() -> None:
    b = TraceBuilder()
    main = b.thread_track(1, 1, "main")
    worker = b.thread_track(1, 2, "gloo worker")
    for i in range(4):
        b.add_slice(main, T0 + i * MS, 10_000, "c10d::allreduce_", KinetoCat.CPU_OP)
        b.add_slice(worker, T0 + i * MS + 5_000, 300_000, "gloo:all_reduce", KinetoCat.USER_ANNOTATION)
    f = one(analyze(b.build()), "collective")
    assert f.evidence["op"] == "allreduce" and f.count == 4 and f.cost_ns == 4 * 300_000


def test_memory_series_per_device_from_kineto_memory_events() -> None:
    """One series per (Device Type, Device Id) name, in the order of their first event, each in time order:
    True names the device 1 does (cuda) and joins its series, 1.0 is no device-type number, a missing key
    is "?", an event without "Total Allocated" is no point, a list as id (unhashable) is named as it is."""
    from neuron_prof.analysis.context import Context
    from neuron_prof.analysis.device.memory import memory_series as _series

    events = [  # (ts, Total Allocated, Device Type, Device Id); None: the key is absent
        (50, 5, 1, 0),
        (40, 4, 1.0, 0),
        (10, 1, True, 0),
        (30, None, 1, 0),
        (20, 2, None, 3),
        (5, 7, 1, 0),
        (60, 6, 20, [1, 2]),
    ]
    want = [
        ("cuda:0 allocated", [5, 10, 50], [7.0, 1.0, 5.0]),
        ("1.0:0 allocated", [40], [4.0]),
        ("?:3 allocated", [20], [2.0]),
        ("privateuse1:[1, 2] allocated", [60], [6.0]),
    ]
    for n in (len(events) - 1, len(events)):  # without, then with the unhashable id
        b = TraceBuilder()
        main = b.thread_track(1, 1, "main")
        for ts, total, dt, dev in events[:n]:
            args = {k: v for k, v in (("Total Allocated", total), ("Device Type", dt), ("Device Id", dev))
                    if v is not None}
            b.add_instant(main, T0 + ts, "[memory]", KinetoCat.CPU_INSTANT, args)
        trace = b.build()
        got = [(name, (ts - T0).tolist(), v.tolist()) for name, ts, v in _series(trace, Context(trace))]
        assert got == want[: n - 3]
