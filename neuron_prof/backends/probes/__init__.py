"""Probes: one signal source each (compile, collectives, sync, memory, fallback, stalls, dtype).

`default_probes(kind)` returns fresh instances of the probes that make sense for a backend kind.
"""

from __future__ import annotations

from neuron_prof.backends.probes._probe import Probe

__all__ = ["Probe", "default_probes"]


def default_probes(kind: str) -> list[Probe]:
    """Fresh default probes for backend `kind` ("cpu", "cuda", "neuron")."""
    from neuron_prof.backends.probes.collectives import CollectivesProbe
    from neuron_prof.backends.probes.compile import CompileProbe

    probes: list[Probe] = [CompileProbe(), CollectivesProbe()]
    return probes
