"""EXPERIMENTAL, not used by the emulator: device "neuron" as a real PrivateUse1 extension (a measurement).

The emulated device's tensor is a wrapper subclass (_tensor.NeuronTensor). This prototype tries torch's
open-registration pattern instead (pytorch test/cpp_extensions/open_registration_extension): a small C++
extension (_privateuse1_csrc.py), built by torch.utils.cpp_extension at first use into a cache folder, gives
PrivateUse1 an allocator over host memory, the kernels that only shape metadata or copy bytes (empty, views,
resize_, set_, _copy_from, _local_scalar_dense) and the PrivateUse1 hooks (device generators, pinned host
memory, the current device); every other op reaches a Python boxed fallback that runs the op's CPU kernel on
CPU aliases of the device memory (zero-copy) and hands the results back as device tensors. So a device
tensor is a plain `torch.Tensor` with storage, and views, in-place ops and autograd are torch's own. The
emulator's device parts that a subclass gets by unwrapping (convolution, the fused RNN cells, autocast,
collectives, torch.compile's backend) are registered by _privateuse1_ports.py.

There is no cost model, compile cache, fallback tracking or profiler data here: only what the measurement
needs (README "The emulated neuron device" has the numbers and the decision). `enable()` takes PrivateUse1
for the process, so it cannot share one with `neuron_prof.emulator.enable()`.
"""

from __future__ import annotations

import os
import time
import types
from pathlib import Path
from typing import Any

import torch


_ext: Any = None
_LIBS: list[torch.library.Library] = []
BUILD_SECONDS: float | None = None
"""Seconds the last enable() spent building or loading the extension (a cached build only loads)."""


def build_dir() -> Path:
    """Where the extension is built and cached (torch rebuilds only when the source changes):
    $NEURON_PROF_EXPERIMENTAL_BUILD_DIR, else the user cache ($XDG_CACHE_HOME or ~/.cache)/neuron-prof."""
    base = os.environ.get("NEURON_PROF_EXPERIMENTAL_BUILD_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
        "neuron-prof",
        "experimental-privateuse1",
    )
    d = Path(base) / torch.__version__.replace("+", "_")
    d.mkdir(parents=True, exist_ok=True)
    return d


def build() -> Any:
    """Build (or load the cached build of) the C++ extension; returns its module."""
    from torch.utils.cpp_extension import load_inline

    from neuron_prof.emulator._privateuse1_csrc import CPP

    return load_inline("neuron_prof_experimental_privateuse1", cpp_sources=[CPP],
                       build_directory=str(build_dir()), extra_cflags=["-O1"], verbose=False)


_Generators = list[tuple[torch.Generator, torch.Generator]]


def _unwrap(x: Any, aliases: dict[int, torch.Tensor], gens: _Generators) -> Any:
    if isinstance(x, torch.Tensor):
        if x.device.type == "neuron":
            h = _ext.host_alias(x)
            aliases[id(h)] = x
            return h
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, aliases, gens) for v in x)
    if isinstance(x, torch.device) and x.type == "neuron":
        return torch.device("cpu")
    if isinstance(x, torch.Generator) and x.device.type == "neuron":
        # a device generator holds a CPU generator's state (the C++ DeviceGenerator): the CPU kernel draws
        # from a CPU generator carrying it, and the state it leaves goes back to the device generator
        h = torch.Generator()
        h.set_state(x.get_state())
        gens.append((x, h))
        return h
    return x


def _wrap(x: Any, aliases: dict[int, torch.Tensor]) -> Any:
    if isinstance(x, torch.Tensor):
        orig = aliases.get(id(x))
        if orig is not None:  # an in-place / out= op hands back its operand
            return orig
        return _ext.device_alias(x) if x.device.type == "cpu" and x.layout is torch.strided else x
    if isinstance(x, (list, tuple)):
        return type(x)(_wrap(v, aliases) for v in x)
    return x


def execute(op: Any, *args: Any, **kwargs: Any) -> Any:
    """The Python executor every op without a C++ kernel reaches: the CPU kernel on host aliases. Random
    ops without a generator draw from the CPU's default generator (so torch.manual_seed gives the CPU's
    numbers)."""
    aliases: dict[int, torch.Tensor] = {}
    gens: _Generators = []
    hargs = _unwrap(args, aliases, gens)
    out = kwargs.get("out")
    dev_out = isinstance(out, torch.Tensor) and out.device.type == "neuron"
    hkwargs = {k: _unwrap(v, aliases, gens) for k, v in kwargs.items() if not (dev_out and k == "out")}
    on_device = dev_out or any(isinstance(v, torch.device) and v.type == "neuron" for v in kwargs.values())
    if gens and not aliases and not on_device:
        # only a device generator sent the op here (its keys join the dispatch), with host tensors
        raise RuntimeError("Expected a 'cpu' device type for generator but found 'neuron'")
    try:
        if dev_out:
            # out= may resize its tensor (arange, linspace fill through it): a host alias cannot grow, so the
            # op writes a host tensor, and the device tensor is resized and filled from it
            res = op(*hargs, **hkwargs, out=torch.empty(0, dtype=out.dtype))
            out.resize_(res.shape)
            out.copy_(res)
            return out
        return _wrap(op(*hargs, **hkwargs), aliases)
    finally:
        for dev_gen, host_gen in gens:
            dev_gen.set_state(host_gen.get_state())


class _DeviceContext:
    def __init__(self, device: Any) -> None:
        self.device = device

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _device_module() -> types.ModuleType:
    m = types.ModuleType("torch.neuron")
    fns: dict[str, Any] = dict(
        is_available=lambda: True, is_initialized=lambda: True, _is_in_bad_fork=lambda: False,
        _lazy_init=lambda: None, device_count=lambda: 1, current_device=lambda: 0,
        set_device=lambda d: None, synchronize=lambda device=None: None, manual_seed=lambda seed: None,
        manual_seed_all=lambda seed: None, get_amp_supported_dtype=lambda: [torch.bfloat16, torch.float16],
        is_bf16_supported=lambda: True, device=_DeviceContext,
    )
    for k, f in fns.items():
        setattr(m, k, f)
    return m


class _DeviceGuard(torch._C._acc.DeviceGuard):
    def type_(self) -> Any:
        return torch._C._autograd.DeviceType.PrivateUse1


def enable() -> None:
    """Build (or load the cached build of) the extension and register device "neuron" with it: the steps of
    torch.utils.backend_registration._setup_privateuseone_for_python_backend, with the extension's C++
    hooks in place of its Python ones (PrivateUse1 takes one set of hooks per process)."""
    global _ext, BUILD_SECONDS
    if _ext is not None:
        return
    from neuron_prof.emulator import _privateuse1_ports as ports

    t0 = time.perf_counter()
    _ext = build()
    BUILD_SECONDS = time.perf_counter() - t0
    _ext.install_allocator()
    torch.utils.rename_privateuse1_backend("neuron")
    torch.utils.generate_methods_for_privateuse1_backend()
    torch._register_device_module("neuron", _device_module())
    _ext.install_hooks()
    torch._C._acc.register_python_privateuseone_device_guard(_DeviceGuard())
    glob = torch.library.Library("_", "IMPL")
    glob.fallback(execute, "PrivateUse1")
    glob.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    lib = torch.library.Library("aten", "IMPL")
    ports.register_kernels(lib, execute)
    _LIBS.extend([glob, lib, ports.register_collectives(execute)])
    ports.register_compile_backend()
