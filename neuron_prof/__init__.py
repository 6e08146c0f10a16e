"""neuron-prof: profiling and debugging for PyTorch on AWS Trainium (TorchNeuron).

    import neuron_prof
    with neuron_prof.profile("trace.json") as prof:
        for batch in data:
            train_step(batch)
            prof.step()
    trace = neuron_prof.load("trace.json")
    neuron_prof.plan("trace.json", "warmup.py")   # a warm-up plan: compile what the run compiled, before training

Importing this package is cheap: torch is imported only when a capture starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from neuron_prof.version import __version__

if TYPE_CHECKING:
    from neuron_prof.capture import Session, profile
    from neuron_prof.loaders import load
    from neuron_prof.model import Trace
    from neuron_prof.warmup import plan

__all__ = ["Session", "Trace", "__version__", "load", "plan", "profile"]

_LAZY = {
    "profile": "neuron_prof.capture",
    "Session": "neuron_prof.capture",
    "load": "neuron_prof.loaders",
    "Trace": "neuron_prof.model",
    "plan": "neuron_prof.warmup",
}


def __getattr__(name: str) -> Any:
    # Lazy so that `import neuron_prof` (and `neuron-prof --help`) never imports torch.
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'neuron_prof' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod), name)
