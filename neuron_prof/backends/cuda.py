"""CUDA adapter: device kernels, memcpy and NCCL from Kineto's CUDA activities, torch.cuda memory stats.

Kineto already records kernels, memcpys and their launch flows; this adapter adds what they imply: sync
points (host waits in the CUDA runtime), NCCL collectives with sizes and device spans (from
``record_param_comms`` and the kernels' "Collective name" args), polled ``torch.cuda`` memory counters, and the
torch.compile and torch.distributed probes every adapter has.
"""

from __future__ import annotations

from typing import Any

from neuron_prof.backends._adapter import ProbeBackend
from neuron_prof.backends.base import CaptureContext
from neuron_prof.backends.probes.probe import Probe


def _cuda_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _cuda_memory(d: int) -> tuple[int | None, ...]:
    import torch

    return (torch.cuda.memory_allocated(d), torch.cuda.memory_reserved(d), torch.cuda.max_memory_allocated(d))


class CudaBackend(ProbeBackend):
    """Adapter for tensors on a CUDA device."""

    name = "cuda"

    def default_probes(self, ctx: CaptureContext) -> list[Probe]:
        from neuron_prof.backends.probes.collectives import CollectivesProbe
        from neuron_prof.backends.probes.compile import CompileProbe
        from neuron_prof.backends.probes.cuda_trace import CudaTraceProbe
        from neuron_prof.backends.probes.device import KinetoDeviceLinkProbe
        from neuron_prof.backends.probes.memory import KinetoMemoryProbe, MemoryProbe

        # Kineto's exact allocator events first; the polled counters fill in only devices it did not report.
        return [CompileProbe(), CollectivesProbe(), CudaTraceProbe(), KinetoDeviceLinkProbe(),
                KinetoMemoryProbe(),
                MemoryProbe("cuda", _cuda_count, _cuda_memory)]

    def profiler_options(self) -> dict[str, Any]:
        from torch.profiler import ProfilerActivity

        return {"activities": [ProfilerActivity.CPU, ProfilerActivity.CUDA]}
