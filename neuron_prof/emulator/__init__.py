"""An emulated Trainium device: a PrivateUse1 "neuron" backend that behaves like TorchNeuron.

    from neuron_prof.emulator import enable, EmulatorConfig
    torch_neuronx = enable()                      # or enable(EmulatorConfig.fast()) in tests
    model.to("neuron"); torch.compile(model, backend="neuron"); torch.neuron.synchronize()

Call enable() once per process (PyTorch cannot undo a PrivateUse1 registration); later calls return the
same module. `neuron-prof run` calls enable_from_env() when NEURON_PROF_EMULATE=1. Other variables:
NEURON_PROF_EMULATE_CACHE_DIR or TORCH_NEURONX_NEFF_CACHE_DIR (on-disk NEFF cache, persistent as TorchNeuron's;
unset, the cache is in memory only, so a demo shows its compiles every run), NEURON_PROF_EMULATE_COMPILE_SCALE
(multiplies compile costs; 0 disables them), NEURON_PROF_EMULATE_DEVICE_SCALE (multiplies modelled device
durations), NEURON_PROF_EMULATE_BUILD ("release": a stock release build, NEURON_LAUNCH_BLOCKING=1 by default;
"dev", the default), NEURON_LAUNCH_BLOCKING ("1": every op synchronous and an empty framework mapping),
NEURON_PROF_EMULATE_HOST_COST ("launch": an op whose signature already ran costs the host a launch, made by the
C++ extension; "python", the default: every op runs the Python executor; EmulatorConfig.host_cost). enable()
without a config reads them too. The emulated process gets a stand-in ``neuron-explorer`` on its PATH
(`neuron_explorer`), which processes the runtime's captures (`_runtime_capture`) into Parquet tables.

What the profiler may use is only the torch_neuronx-shaped module enable() returns (also published as
sys.modules["torch_neuronx"]) and torch.neuron; ground_truth() is for tests. See _api.py for the module.

The device is a C++ PrivateUse1 extension (`_ext_build` compiles it once per machine into the user cache,
`_ext_device` registers it; device tensors are plain torch.Tensors); without a C++ compiler, or with
NEURON_PROF_EMULATE_DEVICE=subclass, it is the tensor subclass `_tensor.NeuronTensor` (docs/emulator.md has
the four idioms that then differ).

Limits: one device per process (as TorchNeuron runs); sparse and nested tensors stay on the host (ops on
them fall back); mixing non-scalar CPU tensors into device ops is not rejected as on real devices; host
[memory] events in a profile include the host memory that holds device values.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import types
from typing import Any

from neuron_prof.emulator._config import EmulatorConfig
from neuron_prof.errors import EmulatorError

__all__ = [
    "EmulatorConfig",
    "config",
    "device_impl",
    "enable",
    "enable_from_env",
    "ground_truth",
    "is_enabled",
    "reconfigure",
    "torch_neuronx_module",
]

_lock = threading.Lock()
_module: types.ModuleType | None = None
_impl: str | None = None


def is_enabled() -> bool:
    """True once enable() has registered the emulated device in this process."""
    return _module is not None


def torch_neuronx_module() -> types.ModuleType | None:
    """The torch_neuronx-shaped module, or None before enable()."""
    return _module


def enable(config: EmulatorConfig | None = None) -> types.ModuleType:
    """Register device "neuron" (emulated) and return the torch_neuronx-shaped module.

    `config` defaults to EmulatorConfig.from_env(): the defaults, adjusted by NEURON_PROF_EMULATE_* variables.

    Raises EmulatorError when the real torch-neuronx is loaded or installed, or when PrivateUse1 is already
    taken by another backend. Idempotent: a second call returns the first module (its config is ignored).
    """
    global _module
    with _lock:
        if _module is not None:
            return _module
        real = sys.modules.get("torch_neuronx")
        if real is not None:
            raise EmulatorError("the real torch_neuronx is loaded: use the real device, not the emulator")
        try:
            spec = importlib.util.find_spec("torch_neuronx")
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            raise EmulatorError(
                f"torch_neuronx is installed ({spec.origin}): use the real device, not the emulator"
            )
        cfg = config or EmulatorConfig.from_env()
        if cfg.num_devices != 1:
            # PyTorch's Python device guard reports one device, and autograd sizes its device queues by it:
            # backward on neuron:1 would abort. TorchNeuron runs one process per NeuronCore anyway.
            raise EmulatorError("the emulator supports num_devices=1 (one NeuronCore per process)")
        import torch

        taken = torch._C._get_privateuse1_backend_name()
        if taken != "privateuseone":
            raise EmulatorError(f"PrivateUse1 is already registered as {taken!r} in this process")
        _module = _install(cfg)
        return _module


def enable_from_env() -> types.ModuleType | None:
    """enable(EmulatorConfig.from_env()) when NEURON_PROF_EMULATE=1; otherwise None."""
    if os.environ.get("NEURON_PROF_EMULATE", "") not in ("1", "true", "yes"):
        return None
    return enable(EmulatorConfig.from_env())


def ground_truth() -> Any:
    """The emulator's own event log (GroundTruth). Tests only: the profiler must never read it."""
    from neuron_prof.emulator import _state

    if _state.RUNTIME is None:
        raise EmulatorError("the emulator is not enabled")
    return _state.RUNTIME.gt


def device_impl() -> str | None:
    """How the running emulator's device is built: "extension" or "subclass" (EmulatorConfig.device_impl);
    None before enable()."""
    return _impl


def _load_extension(cfg: EmulatorConfig) -> Any:
    """The built C++ extension, or None for the subclass device (no compiler, or a failed build under
    "auto": a warning says why)."""
    from neuron_prof.emulator import _ext_build

    impl = cfg.device_impl
    env = os.environ.get("NEURON_PROF_EMULATE_DEVICE", "").strip().lower()
    if env in ("auto", "extension", "subclass"):  # a config built in code (EmulatorConfig.fast()) too
        impl = env
    if impl == "subclass":
        return None
    if impl == "auto" and _ext_build.compiler() is None:
        import warnings

        warnings.warn("neuron (emulated): no C++ compiler (c++ or $CXX), so device tensors are a Python subclass "
                      "(docs/emulator.md)", RuntimeWarning, stacklevel=3)
        return None
    try:
        return _ext_build.load()
    except Exception as e:  # a compiler or build failure of any kind
        if impl == "extension":
            raise EmulatorError(f"the emulated device's C++ extension could not be built: {e}") from e
        import warnings

        warnings.warn(f"neuron (emulated): the device extension could not be built ({e}); device tensors are "
                      "a Python subclass (docs/emulator.md)", RuntimeWarning, stacklevel=3)
        return None


def _install(cfg: EmulatorConfig) -> types.ModuleType:
    global _impl
    from dataclasses import replace

    from neuron_prof.emulator import _state
    from neuron_prof.emulator._api import build_module
    from neuron_prof.emulator._config import HOST_COST_ENV, HOST_COSTS
    from neuron_prof.emulator._device import build_device_module, register

    host_cost = os.environ.get(HOST_COST_ENV, "").strip().lower()
    if host_cost in HOST_COSTS:  # a config built in code (EmulatorConfig.fast()) too, as the device's build
        cfg = replace(cfg, host_cost=host_cost)
    ext = _load_extension(cfg)
    _state.RUNTIME = _state.Runtime(cfg)
    device_module = build_device_module()
    if ext is not None:
        from neuron_prof.emulator import _ext_device

        _ext_device.register(device_module, ext)
        _impl = "extension"
    else:
        from neuron_prof.emulator import _module_apply
        from neuron_prof.emulator._tensor import NeuronTensor

        register(device_module, cfg.num_devices)
        _module_apply.install(NeuronTensor)
        _impl = "subclass"
    mod = build_module(device_module)
    from neuron_prof.emulator import _c10d, _dynamo_backend

    _dynamo_backend.register()
    _c10d.register()
    from neuron_prof.emulator import _runtime_capture

    _runtime_capture.install()  # the runtime's capture starts with a profiler cycle that asks for it
    if cfg.explorer_on_path:
        _explorer_on_path()
    # The first op PyTorch sends to a Python tensor subclass imports torch.distributed.tensor (seconds).
    # Pay it here, so the user's first device op does not look like a multi-second stall in a profile.
    import torch

    torch.empty(0, device="neuron").view(0)
    _state.RUNTIME.executed_names.clear()
    if cfg.install_torch_neuronx:
        sys.modules["torch_neuronx"] = mod
        for sub in ("_C", "profiling", "metrics"):
            sys.modules[f"torch_neuronx.{sub}"] = getattr(mod, sub)
    return mod


def _explorer_on_path() -> None:
    """The stand-in ``neuron-explorer`` on this process's PATH, as an install of the Neuron tools puts the real
    one: a launcher in neuron-prof's cache folder (or a temporary one), for this interpreter."""
    import hashlib
    import tempfile
    from pathlib import Path

    from neuron_prof import userdirs
    from neuron_prof.emulator.neuron_explorer import install_on_path

    key = hashlib.sha1(sys.executable.encode()).hexdigest()[:12]
    base = userdirs.cache_dir() or Path(tempfile.gettempdir()) / f"neuron-prof-{os.getuid()}"
    try:
        install_on_path(base / "emulator-bin" / key)
    except OSError:
        install_on_path(Path(tempfile.mkdtemp(prefix="neuron-prof-emulator-bin-")))


def reconfigure(config: EmulatorConfig) -> None:
    """Swap the running emulator's cost model, capacities and fallback sets (tests and demos).

    `num_devices` cannot change after enable(). A new cache_dir starts a new (empty) in-memory cache.
    """
    from neuron_prof.emulator import _dispatch, _state
    from neuron_prof.emulator._compile_cache import CompileCache

    rt = _state.RUNTIME
    if rt is None:
        raise EmulatorError("the emulator is not enabled")
    if config.num_devices != rt.cfg.num_devices:
        raise EmulatorError("num_devices cannot change after enable()")
    if rt.activity.queue is not None:
        rt.activity.drain()  # launches so far count in the cache they hit
    if config.cache_dir != rt.cfg.cache_dir:
        old = rt.cache
        rt.cache = CompileCache(config.cache_dir, config.disk_load_ms, rt.gt)
        rt.cache.pull, rt.cache.on_clear = old.pull, old.on_clear
    rt.cache.disk_load_ms = config.disk_load_ms
    for mem in rt.memory:
        mem.capacity = config.memory_capacity_bytes
    rt.activity.max_events = config.max_device_events
    for clock in rt.clocks:
        clock.blocking = config.blocking_execution
    rt.gt.enabled = config.ground_truth
    if rt.activity.queue is not None:  # launch mode (fixed at enable()): launches take the new cost model
        rt.activity.queue.clear_warm()
        rt.activity.queue.set_queue(config.blocking_execution, config.max_device_events)
    rt.gt.resize(config.max_ground_truth_events)
    rt.cfg = config
    _dispatch._INFO.clear()  # op infos cache the fallback decisions


def config() -> EmulatorConfig:
    """The running emulator's configuration."""
    from neuron_prof.emulator import _state

    if _state.RUNTIME is None:
        raise EmulatorError("the emulator is not enabled")
    return _state.RUNTIME.cfg
