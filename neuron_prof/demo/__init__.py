"""The demo workload: a small GPT-style transformer trained for a few steps under the profiler.

    from neuron_prof.demo import run_demo
    result = run_demo("trace.json", steps=8)      # -> trace.json, trace.pftrace, result.trace

Used by `neuron-prof demo` and `make demo`. Imports torch.
"""

from neuron_prof.demo._model import GPTConfig, TinyGPT
from neuron_prof.demo._train import DemoResult, default_device, run_demo, train

__all__ = ["DemoResult", "GPTConfig", "TinyGPT", "default_device", "run_demo", "train"]
