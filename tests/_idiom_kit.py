"""The idiom registry and what idioms share: fixture module of tests/_idioms.py (see there)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn

IDIOMS: dict[str, Callable[[str], Any]] = {}


def idiom(fn: Callable[[str], Any]) -> Callable[[str], Any]:
    IDIOMS[fn.__name__] = fn
    return fn


def vals(t: torch.Tensor, nd: int = 4) -> Any:
    """A tensor's values as nested lists rounded to `nd` decimals (read on the host)."""
    v = t.detach().cpu().tolist()
    return _round(v, nd)


def _round(v: Any, nd: int) -> Any:
    if isinstance(v, float):
        return round(v, nd)
    if isinstance(v, list):
        return [_round(x, nd) for x in v]
    return v


def nodev(s: str, dev: str) -> str:
    """`s` without the device text a device tensor's repr/str adds (", device='neuron:0'")."""
    return s.replace(f", device='{dev}:0'", "")


def on(t: torch.Tensor, dev: str) -> bool:
    """The tensor lives on device `dev`."""
    return t.device.type == dev


def mlp(dev: str) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).to(dev)


BACKEND = "cpu"
"""What gives the device in this process: "cpu", "neuron" (the emulator, its C++ extension device) or
"neuron-subclass" (the emulator's fallback device for machines without a C++ compiler, a tensor subclass)."""


def enable_device(backend: str) -> str:
    """Register the device `backend` names in this process; returns the device name idioms get."""
    global BACKEND
    BACKEND = backend
    if backend in ("neuron", "neuron-subclass"):
        from dataclasses import replace

        from neuron_prof import emulator

        impl = "extension" if backend == "neuron" else "subclass"
        emulator.enable(replace(emulator.EmulatorConfig.fast(), device_impl=impl))
    return "cpu" if backend == "cpu" else "neuron"
