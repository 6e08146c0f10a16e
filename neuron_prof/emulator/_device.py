"""Registering the emulated device with PyTorch (PrivateUse1 renamed "neuron") and the `torch.neuron` module.

Registration is process-global and cannot be undone (PyTorch allows one PrivateUse1 rename per process).
Facts behind each step: shared/design/torch-facts.md, "A pure-Python PrivateUse1 device".
"""

from __future__ import annotations

import types
from typing import Any

import torch

from neuron_prof.emulator import _state
from neuron_prof.emulator._dispatch import copy_from_host, execute
from neuron_prof.emulator._state import sync_point
from neuron_prof.emulator._tensor import NeuronTensor, set_devices, set_executor

_LIBS: list[torch.library.Library] = []  # keep registrations alive for the life of the process


def _index(device: Any = None) -> int:
    if device is None:
        return _state.RUNTIME.current_device if _state.RUNTIME else 0
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "neuron":
        raise ValueError(f"Expected neuron device, got {d.type}")
    return d.index if d.index is not None else 0


def _rt() -> _state.Runtime:
    assert _state.RUNTIME is not None, "neuron_prof.emulator.enable() was not called"
    return _state.RUNTIME


class _DeviceProperties:
    def __init__(self, index: int, total: int) -> None:
        self.name = "Trainium2 (emulated NeuronCore, LNC=2)"
        self.total_memory = total
        self.index = index

    def __repr__(self) -> str:
        return f"_NeuronDeviceProperties(name='{self.name}', total_memory={self.total_memory // (1 << 20)}MB)"


def build_device_module() -> types.ModuleType:
    """The `torch.neuron` module, with TorchNeuron's function names."""
    m = types.ModuleType("torch.neuron")

    def synchronize(device: Any = None) -> None:
        """Wait for all work queued on a Neuron device (all devices when None)."""
        sync_point(-1 if device is None else _index(device), "synchronize")

    def memory_stats(device: Any = None) -> dict[str, Any]:
        return _rt().memory[_index(device)].stats()

    # As in the source, each of these reads memory_stats() in full (issue 33): none is cheaper than the stats.
    def memory_allocated(device: Any = None) -> int:
        return int(memory_stats(device)["allocated_bytes"]["current"])

    def max_memory_allocated(device: Any = None) -> int:
        return int(memory_stats(device)["allocated_bytes"]["peak"])

    def memory_reserved(device: Any = None) -> int:
        return int(memory_stats(device)["reserved_bytes"]["current"])

    def max_memory_reserved(device: Any = None) -> int:
        return int(memory_stats(device)["reserved_bytes"]["peak"])

    def reset_peak_memory_stats(device: Any = None) -> None:
        _rt().memory[_index(device)].reset_peak()

    def reset_accumulated_memory_stats(device: Any = None) -> None:
        _rt().memory[_index(device)].reset_accumulated()

    def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
        from neuron_prof.emulator._memory import format_bytes

        s = memory_stats(device)
        lines = [f"Neuron memory summary, device {_index(device)}"]
        for k in ("allocated_bytes", "reserved_bytes", "active_bytes"):
            v = s[k]
            lines.append(
                f"  {k:<16} current {format_bytes(v['current']):>12}  peak {format_bytes(v['peak']):>12}"
            )
        return "\n".join(lines)

    def empty_cache() -> None:
        for mem in _rt().memory:
            mem.empty_cache()

    def device_count() -> int:
        return _rt().cfg.num_devices

    def current_device() -> int:
        return _rt().current_device

    def set_device(device: Any) -> None:
        i = _index(device)
        if not 0 <= i < device_count():
            raise ValueError(f"Invalid device id: {i}. Valid range is 0 to {device_count() - 1}")
        _rt().current_device = i

    def get_device_properties(device: Any = None) -> _DeviceProperties:
        i = _index(device)
        return _DeviceProperties(i, _rt().cfg.memory_capacity_bytes)

    def get_fallback_ops() -> list[str]:
        return list(_rt().fallback_names)

    def get_executed_ops() -> list[str]:
        return list(_rt().executed_names)

    def clear_op_tracking() -> None:
        _rt().fallback_names.clear()
        _rt().executed_names.clear()

    def get_amp_supported_dtype() -> list[torch.dtype]:
        return [torch.bfloat16, torch.float16]

    def manual_seed(seed: int) -> None:
        """Nothing to seed: device random values come from the CPU generator, which torch.manual_seed seeds
        (torch.manual_seed calls this, so calling it back would recurse)."""

    fns = dict(
        synchronize=synchronize,
        memory_stats=memory_stats,
        memory_allocated=memory_allocated,
        max_memory_allocated=max_memory_allocated,
        memory_reserved=memory_reserved,
        max_memory_reserved=max_memory_reserved,
        reset_peak_memory_stats=reset_peak_memory_stats,
        reset_accumulated_memory_stats=reset_accumulated_memory_stats,
        memory_summary=memory_summary,
        empty_cache=empty_cache,
        device_count=device_count,
        current_device=current_device,
        set_device=set_device,
        get_device_properties=get_device_properties,
        get_fallback_ops=get_fallback_ops,
        get_executed_ops=get_executed_ops,
        clear_op_tracking=clear_op_tracking,
        get_amp_supported_dtype=get_amp_supported_dtype,
        manual_seed=manual_seed,
        manual_seed_all=manual_seed,
        is_available=lambda: True,
        is_initialized=lambda: True,
        _is_in_bad_fork=lambda: False,
        _lazy_init=lambda: None,
        is_bf16_supported=lambda: True,
    )
    for k, f in fns.items():
        setattr(m, k, f)
    return m


def _factory(op: Any, *args: Any, **kwargs: Any) -> Any:
    """PrivateUse1 fallback: ops sent to "neuron" with no device operand (factories like empty, full)."""
    return execute(op, args, kwargs)


def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    if isinstance(dst, NeuronTensor) and not isinstance(src, NeuronTensor):
        return copy_from_host(dst, src)
    return dst.copy_(src)


def _composite_factory(name: str) -> Any:
    op = getattr(torch.ops.aten, name.split(".")[0])
    overload = getattr(op, name.split(".")[1] if "." in name else "default")

    def kernel(*args: Any, **kwargs: Any) -> Any:
        return execute(overload, args, kwargs)

    return kernel


def _allow_pageable_pin_memory() -> None:
    """Tensor.pin_memory() needs a pinned-memory allocator that only C++ hooks can give, and the emulated
    accelerator makes DataLoader(pin_memory=True) call it: return the tensor unpinned instead (pinning only
    speeds up copies; the emulator's host->device copies are modelled anyway)."""
    original = torch.Tensor.pin_memory
    if getattr(original, "_neuron_pageable", False):
        return

    def pin_memory(self: torch.Tensor, device: Any = None) -> torch.Tensor:
        try:
            return original(self) if device is None else original(self, device)
        except NotImplementedError:
            return self

    pin_memory._neuron_pageable = True  # type: ignore[attr-defined]
    torch.Tensor.pin_memory = pin_memory  # type: ignore[method-assign,assignment]


def _refuse_device_storage(obj: Any, location: str) -> None:
    """torch.load's deserializer for storages mapped to "neuron" (map_location="neuron"): torch would build a
    storage on the device, which a Python backend cannot hold (a crash, torch-facts): refuse it plainly."""
    if location == "neuron" or location.startswith("neuron:"):
        raise RuntimeError(
            "neuron (emulated): torch.load(map_location='neuron') needs device storages, which the emulated "
            "device has none of: load with map_location='cpu', then .to('neuron') (tensors saved from the "
            "device come back on it without map_location)"
        )


def register(module: types.ModuleType, num_devices: int) -> None:
    """Rename PrivateUse1 to "neuron" and install the kernels a Python backend needs."""
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    _setup_privateuseone_for_python_backend(rename="neuron", backend_module=module)
    set_devices(num_devices)
    set_executor(execute)
    glob = torch.library.Library("_", "IMPL")
    glob.fallback(_factory, "PrivateUse1")
    glob.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("_copy_from", _copy_from, "PrivateUse1")
    # Composite factories fill through out= and get wrong shapes without their own kernels (torch-facts).
    for name in ("arange", "arange.start", "arange.start_step", "linspace", "randperm", "eye", "eye.m"):
        lib.impl(name, _composite_factory(name), "PrivateUse1")
    from neuron_prof.emulator import _autocast

    _autocast.register(lib)
    _allow_pageable_pin_memory()
    # Ahead of torch's PrivateUse1 deserializer (priority 23; 19 is free), which builds device storages.
    torch.serialization.register_package(19, lambda obj: None, _refuse_device_storage)
    _LIBS.extend([glob, lib])
