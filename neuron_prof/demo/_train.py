"""The demo workload: TinyGPT trained with AdamW on bytes of text, under `neuron_prof.profile()`.

It carries the problems a Trainium user meets first, so the profiler has something to find:

* variable sequence lengths: every new length is a new shape, so a first-call compile stall on Neuron;
* `median` of the per-token loss: an op with no device kernel, a CPU fallback on Neuron;
* a float64 loss accumulator: Neuron computes float64 as float32;
* `loss.item()` every step: a sync point, the host waits for the device.

On the CPU they cost little; on the emulated neuron device each shows up as it would on Trainium.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch.nn import functional as F

from neuron_prof.demo._model import GPTConfig, TinyGPT
from neuron_prof.formats import DEFAULT_OUTPUT

if TYPE_CHECKING:
    from neuron_prof.model import Trace

CORPUS = (
    "Trainium runs PyTorch through TorchNeuron. Each new shape compiles once, then runs from the cache. "
    "Ops without a device kernel fall back to the host; float64 becomes float32; reading a value waits "
    "for the device. A profiler shows where the time goes: compile stalls, fallbacks, sync points. "
)
SEQ_LENS = (32, 48, 64, 40, 56)
"""Sequence lengths the batches cycle through (each new one is a new compile signature on Neuron)."""


@dataclass
class DemoResult:
    trace: Trace | None
    paths: list[Path]
    device: str
    steps: int
    losses: list[float] = field(default_factory=list)
    wall_s: float = 0.0


def emulator_available() -> bool:
    """Whether the emulated neuron device can be enabled in this install."""
    try:
        import neuron_prof.emulator as emu
    except ImportError:
        return False
    return callable(getattr(emu, "enable", None))


def real_neuron_available() -> bool:
    """Whether the real torch-neuronx is installed (then "neuron" is a real Trainium device)."""
    import importlib.util

    mod = sys.modules.get("torch_neuronx")
    if mod is not None:  # `import torch` autoloads the real one; the emulator publishes its look-alike here
        try:
            from neuron_prof.emulator import torch_neuronx_module
        except ImportError:
            return True
        return mod is not torch_neuronx_module()
    try:
        return importlib.util.find_spec("torch_neuronx") is not None
    except (ImportError, ValueError):
        return False


def default_device() -> str:
    return "neuron" if real_neuron_available() or emulator_available() else "cpu"


def batches(steps: int, batch: int = 8, seed: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(inputs, targets) byte batches on the CPU; the length cycles through SEQ_LENS."""
    data = torch.tensor(list(CORPUS.encode() * 4), dtype=torch.long)
    g = torch.Generator().manual_seed(seed)
    for i in range(steps):
        t = SEQ_LENS[i % len(SEQ_LENS)]
        starts = torch.randint(0, len(data) - t - 1, (batch,), generator=g)
        idx = starts[:, None] + torch.arange(t + 1)[None, :]
        chunk = data[idx]
        yield chunk[:, :-1], chunk[:, 1:]


def prepare_device(device: str) -> None:
    """Make device "neuron" exist: the real torch-neuronx when installed, else the emulated device."""
    if device != "neuron":
        return
    if real_neuron_available():  # on a Trainium host the demo runs on the real device
        import torch_neuronx  # noqa: F401

        return
    from neuron_prof.errors import UsageError

    if not emulator_available():
        raise UsageError("--device neuron needs the emulated neuron device (neuron_prof.emulator), not installed")
    import neuron_prof.emulator as emu

    emu.enable(emu.EmulatorConfig.from_env())  # NEURON_PROF_EMULATE_COMPILE_SCALE etc. tune it


def train(model: TinyGPT, device: str, steps: int, prof: object | None = None) -> list[float]:
    """Train `steps` steps; calls prof.step() after each when given. Returns the per-step losses."""
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)  # float64 on purpose (see module doc)
    losses: list[float] = []
    for x, y in batches(steps):
        x, y = x.to(device), y.to(device)
        logits = model(x)
        tok_loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
        loss = tok_loss.mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_sum += loss.detach()
        _median = tok_loss.detach().median()  # a CPU fallback on Neuron (no device kernel)
        losses.append(loss.item())  # a sync point every step
        step = getattr(prof, "step", None)
        if step is not None:
            step()
    return losses


def run_demo(output: str | Path | None = DEFAULT_OUTPUT, steps: int = 12, device: str | None = None,
             quiet: bool = True, seed: int = 0, with_stack: bool = True) -> DemoResult:
    """Train TinyGPT for `steps` steps under neuron_prof.profile(); returns the trace and the files written.

    `with_stack` (on, as profile()'s default) gives every finding the exact line of the statement. On the
    emulated device it costs more than on real Trainium: the emulator runs every op through Python, and
    torch.profiler's tracer records those frames before capture drops them (~2x the session time).
    """
    import neuron_prof

    device = device or default_device()
    prepare_device(device)
    torch.manual_seed(seed)
    model = TinyGPT(GPTConfig()).to(device)
    t0 = time.perf_counter()
    # the device timeline comes as on Trainium: the runtime's system profile, on by default on neuron
    with neuron_prof.profile(output, quiet=quiet, hint=model, with_stack=with_stack) as prof:
        losses = train(model, device, steps, prof)
    wall = time.perf_counter() - t0
    return DemoResult(trace=prof.trace, paths=prof.paths, device=device, steps=steps, losses=losses, wall_s=wall)
