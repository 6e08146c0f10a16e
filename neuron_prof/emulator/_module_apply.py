"""Module.to("neuron") under a running profiler: move parameters like a C++ device does, not by swapping.

torch 2.13's `nn.Module._apply` swaps a parameter's TensorImpl (`torch.utils.swap_tensors`) whenever the
converted tensor is a traceable wrapper subclass, which our NeuronTensor is. A swap refuses tensors that
have weak references, and torch.profiler with record_shapes/profile_memory holds some on every tensor it
saw, so `model.to("neuron")` inside a profiled region failed with "Couldn't swap Linear.weight". The real
TorchNeuron tensor is a plain C++ TensorImpl and never takes that path. We make `_apply` see NeuronTensor as
what it stands for: not a wrapper, so the parameter is replaced by a new Parameter (as for any device
whose tensor type differs), leaving every other subclass's behaviour unchanged.
"""

from __future__ import annotations

from typing import Any

import torch.nn.modules.module as _module_mod

_patched = False


def install(tensor_cls: type) -> None:
    """Once per process: `_apply` no longer swaps NeuronTensor parameters."""
    global _patched
    if _patched:
        return
    original = _module_mod.is_traceable_wrapper_subclass

    def is_traceable_wrapper_subclass(t: Any) -> bool:
        if isinstance(t, tensor_cls):
            return False
        return bool(original(t))

    _module_mod.is_traceable_wrapper_subclass = is_traceable_wrapper_subclass  # type: ignore[assignment]
    _patched = True
