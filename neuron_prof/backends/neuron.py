"""torch-neuronx adapter, written to the documented API (shared/design/torch-neuronx-facts.md).

The adapter receives a module object: the real ``torch_neuronx`` or a look-alike registered under the
same name in ``sys.modules``. It cannot tell them apart and never tries to; every call is probed with
``getattr`` because APIs differ between releases (see `_compat`).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

from neuron_prof.backends._adapter import ProbeBackend
from neuron_prof.backends.base import CaptureContext
from neuron_prof.backends.probes._probe import Probe

MODULE_NAME = "torch_neuronx"


def find_neuron_module() -> ModuleType | None:
    """The torch_neuronx module of this process: already imported (``import torch`` autoloads it), else importable.

    A look-alike (e.g. the emulated device) registers itself as ``sys.modules["torch_neuronx"]`` and is found
    the same way.
    """
    mod = sys.modules.get(MODULE_NAME)
    if mod is not None:
        return mod
    try:
        if importlib.util.find_spec(MODULE_NAME) is None:
            return None
        return importlib.import_module(MODULE_NAME)
    except Exception:  # noqa: BLE001  (a broken install is "not available", not a crash)
        return None


class NeuronBackend(ProbeBackend):
    """Adapter for tensors on a Neuron device."""

    name = "neuron"

    def __init__(self, module: Any | None = None, probes: list[Probe] | None = None) -> None:
        super().__init__(probes)
        self.module = module if module is not None else find_neuron_module()

    def default_probes(self, ctx: CaptureContext) -> list[Probe]:
        from neuron_prof.backends.probes import default_probes

        return default_probes("neuron")

    def profiler_options(self) -> dict[str, Any]:
        from torch.profiler import ProfilerActivity

        acts = [ProfilerActivity.CPU]
        try:
            from torch.profiler import supported_activities

            if ProfilerActivity.PrivateUse1 in supported_activities():
                acts.append(ProfilerActivity.PrivateUse1)
        except Exception:  # noqa: BLE001
            pass
        return {"activities": acts}
