"""The CPU adapter through the real capture session (neuron_prof.profile): compile events, host memory."""

from __future__ import annotations

import torch
import torch._dynamo

import neuron_prof
from neuron_prof.model import Arg, Meta, TrackKind


def _f(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) * 3


def test_session_records_compiles_memory_and_accounting() -> None:
    torch._dynamo.reset()
    cf = torch.compile(_f, dynamic=False, backend="aot_eager")
    # stacks off: Dynamo's compile under the Python tracer makes a 10 MB trace we do not need here
    with neuron_prof.profile(output=None, quiet=True, backend="cpu", with_stack=False) as p:
        for n in range(1, 6):
            cf(torch.randn(n, 4))
            p.step()
        big = torch.empty(1 << 20, dtype=torch.float32)  # 4 MiB held at the peak
        big.fill_(1.0)
        del big
    trace = p.trace
    assert trace is not None
    assert trace.metadata[Meta.BACKEND] == "cpu"
    assert trace.metadata[Meta.PROBE_ERRORS] == []
    rows = trace.slices_on(TrackKind.COMPILE)
    args = [trace.slice_args(int(r)) for r in rows]
    assert [a[Arg.COMPILE_ID] for a in args] == ["0/0", "0/1", "0/2", "0/3", "0/4"]
    assert all(Arg.RECOMPILE_REASON in a for a in args[1:])
    assert [a[Arg.STEP] for a in args] == [0, 1, 2, 3, 4]  # each compile sits in the step that paid for it
    # host memory counters from Kineto's allocator events: the 4 MiB buffer is at or under the peak
    t = trace.find_track(TrackKind.MEMORY, "host allocated")
    assert t is not None
    vals = trace.counters.value[trace.counters.track == t]
    assert vals.max() >= 4 * (1 << 20)
    peak = [i for i in trace.instants_on(TrackKind.MEMORY) if int(trace.instants.track[i]) == t]
    assert len(peak) == 1 and trace.instant_args(int(peak[0]))["bytes"] == int(vals.max())
    assert isinstance(trace.metadata[Meta.OVERHEAD_NS], int)
    torch._dynamo.reset()
