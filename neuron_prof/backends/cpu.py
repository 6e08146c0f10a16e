"""CPU adapter: what a plain CPU run has (torch.compile records, collectives, host memory, sync points)."""

from __future__ import annotations

from neuron_prof.backends._adapter import ProbeBackend
from neuron_prof.backends.base import CaptureContext
from neuron_prof.backends.probes.probe import Probe


class CpuBackend(ProbeBackend):
    """The adapter for tensors on the host."""

    name = "cpu"

    def default_probes(self, ctx: CaptureContext) -> list[Probe]:
        from neuron_prof.backends.probes import default_probes

        return default_probes("cpu")
