"""Probes: one signal source each (compile, collectives, sync, memory, fallback, stalls, dtype, device).

`default_probes(kind)` returns fresh instances of the backend-independent probes for a backend kind;
adapters add the ones that need their backend's API (see neuron.py, cuda.py).
"""

from __future__ import annotations

from neuron_prof.backends.probes.probe import Probe

__all__ = ["Probe", "default_probes"]


def default_probes(kind: str) -> list[Probe]:
    """Fresh default probes for backend `kind` ("cpu", "cuda", "neuron")."""
    from neuron_prof.backends.probes.collectives import CollectivesProbe
    from neuron_prof.backends.probes.compile import CompileProbe
    from neuron_prof.backends.probes.memory import KinetoMemoryProbe

    probes: list[Probe] = [CompileProbe(), CollectivesProbe(), KinetoMemoryProbe()]
    if kind != "cpu":
        from neuron_prof.backends.probes.sync import SyncProbe

        probes.append(SyncProbe(kind))
    return probes
