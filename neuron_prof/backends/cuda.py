"""CUDA adapter: device kernels, memcpy and NCCL from Kineto's CUDA activities, torch.cuda memory stats."""

from __future__ import annotations

from typing import Any

from neuron_prof.backends._adapter import ProbeBackend
from neuron_prof.backends.base import CaptureContext
from neuron_prof.backends.probes._probe import Probe


class CudaBackend(ProbeBackend):
    """Adapter for tensors on a CUDA device."""

    name = "cuda"

    def default_probes(self, ctx: CaptureContext) -> list[Probe]:
        from neuron_prof.backends.probes import default_probes

        return default_probes("cuda")

    def profiler_options(self) -> dict[str, Any]:
        from torch.profiler import ProfilerActivity

        return {"activities": [ProfilerActivity.CPU, ProfilerActivity.CUDA]}
