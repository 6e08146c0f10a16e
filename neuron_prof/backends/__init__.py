"""Backend adapters: one per device kind, chosen from where the model's tensors live.

    backend = get_backend()                 # from what is available: neuron, then cuda, then cpu
    backend = get_backend(hint=model)       # from where the model's parameters live
    backend = get_backend("cpu")            # forced by name

Adapters follow `neuron_prof.backends.base.Backend`. The neuron adapter talks to whatever module
`neuron_prof.backends.neuron.find_neuron_module()` finds (real torch_neuronx or a look-alike).
"""

from __future__ import annotations

import importlib
from typing import Any

from neuron_prof.backends.base import Backend, CaptureContext
from neuron_prof.errors import UsageError

__all__ = ["Backend", "CaptureContext", "available_backends", "device_type_of", "get_backend", "register_backend"]

_REGISTRY: dict[str, str] = {
    "cpu": "neuron_prof.backends.cpu:CpuBackend",
    "cuda": "neuron_prof.backends.cuda:CudaBackend",
    "neuron": "neuron_prof.backends.neuron:NeuronBackend",
}
# Device types that mean "a Neuron device" (PrivateUse1 before and after rename_privateuse1_backend).
_NEURON_TYPES = ("neuron", "privateuseone", "xla")


def register_backend(name: str, spec: str) -> None:
    """Register an adapter class by import path, e.g. ``register_backend("mtia", "pkg.mod:MtiaBackend")``."""
    _REGISTRY[name] = spec


def available_backends() -> list[str]:
    """Registered adapter names."""
    return list(_REGISTRY)


def device_type_of(hint: object) -> str | None:
    """Device type ("cpu", "cuda", "neuron", ...) of a module, tensor, device, device string or list of them."""
    if hint is None:
        return None
    if isinstance(hint, str):
        return hint.split(":", 1)[0] or None
    dev = getattr(hint, "device", None)
    if dev is not None and not callable(dev):
        return str(getattr(dev, "type", dev)).split(":", 1)[0]
    t = getattr(hint, "type", None)
    if isinstance(t, str) and hint.__class__.__name__ == "device":
        return t
    params = getattr(hint, "parameters", None)
    if callable(params):
        types = [p.device.type for p in params()]
        buffers = getattr(hint, "buffers", None)
        if not types and callable(buffers):
            types = [b.device.type for b in buffers()]
        non_cpu = [x for x in types if x != "cpu"]
        return non_cpu[0] if non_cpu else (types[0] if types else None)
    if isinstance(hint, (list, tuple)):
        types = [device_type_of(h) for h in hint]
        non_cpu = [x for x in types if x and x != "cpu"]
        return non_cpu[0] if non_cpu else next((x for x in types if x), None)
    return None


def _auto() -> str:
    """The backend available in this process: neuron, then cuda, then cpu."""
    from neuron_prof.backends.neuron import find_neuron_module

    if find_neuron_module() is not None:
        return "neuron"
    try:
        import torch

        if torch.cuda.is_available():
            return "cuda"
    except Exception:  # noqa: BLE001  (a broken CUDA install must not stop a CPU profile)
        pass
    return "cpu"


def get_backend(name: str | None = None, hint: object | None = None, **kwargs: Any) -> Backend:
    """A fresh adapter: by `name` when given, else from where `hint`'s tensors live, else what is available.

    Raises:
        UsageError: `name` is not a registered adapter.
    """
    if name is None:
        dev = device_type_of(hint)
        if dev in _NEURON_TYPES:
            name = "neuron"
        elif dev in _REGISTRY:
            name = dev
        elif dev is None:
            name = _auto()
        else:
            name = "cpu"  # e.g. "meta", "mps": nothing device-specific we can read, keep host probes
    spec = _REGISTRY.get(name)
    if spec is None:
        raise UsageError(f"unknown backend {name!r}; choose one of: {', '.join(_REGISTRY)}")
    mod_name, cls_name = spec.split(":")
    cls = getattr(importlib.import_module(mod_name), cls_name)
    return cls(**kwargs)  # type: ignore[no-any-return]
