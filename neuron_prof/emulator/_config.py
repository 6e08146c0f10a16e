"""Configuration of the emulated Trainium device: cost models, capacities, fallback sets.

Defaults model one logical NeuronCore (LNC=2) of a Trn2 chip, i.e. a quarter of the chip's public
figures (667 dense BF16 TFLOPS, 2.9 TB/s HBM, 96 GiB HBM). Compile costs are scaled down from the real
neuronx-cc (seconds per op) so a demo shows stalls without taking minutes; `EmulatorConfig.fast()` zeroes
them for tests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

GiB = 1 << 30
DEFAULT_NEFF_CACHE_DIR = "/tmp/neff_cache"
"""TorchNeuron's NEFF cache when ``TORCH_NEURONX_NEFF_CACHE_DIR`` is unset (torch-neuronx-facts, "Execution
model"). The emulator keeps that cache in memory (`EmulatorConfig.cache_dir`)."""
BUILD_ENV = "NEURON_PROF_EMULATE_BUILD"
"""``release``: emulate a stock release build of torch-neuronx (`EmulatorConfig.build`); ``dev`` (default)."""
BUILDS = ("dev", "release")
HOST_COST_ENV = "NEURON_PROF_EMULATE_HOST_COST"
"""``launch``: a warm op costs the host what a launch costs (`EmulatorConfig.host_cost`); ``python`` (default)."""
HOST_COSTS = ("python", "launch")

# Ops the TorchNeuron beta runs on the host: linear algebra with no device kernel, sort/unique-style ops with
# data-dependent output shapes, and sparse / nested tensor constructors (not in the first release).
DEFAULT_FALLBACK_OPS: frozenset[str] = frozenset(
    {
        "aten::linalg_qr",
        "aten::_linalg_svd",
        "aten::_linalg_eigh",
        "aten::linalg_eig",
        "aten::linalg_inv_ex",
        "aten::linalg_cholesky_ex",
        "aten::linalg_lu_factor_ex",
        "aten::_linalg_det",
        "aten::_linalg_slogdet",
        "aten::linalg_solve_triangular",
        "aten::triangular_solve",
        "aten::geqrf",
        "aten::sort",
        "aten::sort.stable",
        "aten::_unique2",
        "aten::unique_dim",
        "aten::unique_consecutive",
        "aten::kthvalue",
        "aten::median",
        "aten::median.dim",
        "aten::nanmedian",
        "aten::nanmedian.dim",
        "aten::mode",
        "aten::bincount",
        "aten::histc",
        "aten::searchsorted.Tensor",
        "aten::_to_sparse",
        "aten::_to_sparse.sparse_dim",
        "aten::_to_sparse_csr",
        "aten::to_sparse",
        "aten::_nested_tensor_from_tensor_list",
        "aten::_nested_from_padded",
    }
)

# Like the real backend, these linear-algebra fallbacks go to the CPU without being recorded anywhere.
DEFAULT_SILENT_FALLBACK_OPS: frozenset[str] = frozenset(
    {
        "aten::linalg_qr",
        "aten::_linalg_svd",
        "aten::_linalg_eigh",
        "aten::linalg_eig",
        "aten::geqrf",
    }
)

# Ops with no int64 kernel: called with int64 operands they fall back to the host.
DEFAULT_INT64_FALLBACK_OPS: frozenset[str] = frozenset(
    {
        "aten::mm",
        "aten::bmm",
        "aten::addmm",
        "aten::baddbmm",
        "aten::cumprod",
    }
)


@dataclass(frozen=True)
class EmulatorConfig:
    """Everything the emulated device models. All times are host-real (the host really blocks)."""

    num_devices: int = 1
    """Only 1 is supported: one NeuronCore per process, as TorchNeuron runs (enable() checks it)."""
    memory_capacity_bytes: int = 24 * GiB
    """Per device; allocating past it raises torch.OutOfMemoryError."""
    reserve_granularity_bytes: int = 2 << 20
    """The caching allocator reserves in segments of this size."""

    # First-call compile (host blocks): eager op = base + per operand + per GFLOP, graph = base + per FX node.
    eager_compile_base_ms: float = 12.0
    eager_compile_ms_per_operand: float = 1.5
    eager_compile_ms_per_gflop: float = 4.0
    graph_compile_base_ms: float = 150.0
    graph_compile_ms_per_node: float = 1.5
    disk_load_ms: float = 0.2
    """Host time to load a NEFF from the on-disk cache (a warm run pays only this)."""
    cache_dir: str | None = None
    """On-disk NEFF cache directory (``TORCH_NEURONX_NEFF_CACHE_DIR``): a persistent cache, as TorchNeuron's. None
    keeps the cache in memory only: it stands in for TorchNeuron's default, /tmp/neff_cache, without writing
    there, so a demo shows its compiles on every run unless asked otherwise (`DEFAULT_NEFF_CACHE_DIR`)."""

    # Roofline device model.
    peak_flops_bf16: float = 167e12
    peak_flops_fp32: float = 42e12
    peak_flops_vector: float = 2.5e12
    """Elementwise / reduction throughput (vector + scalar engines)."""
    hbm_bytes_per_s: float = 725e9
    host_link_bytes_per_s: float = 24e9
    """Host<->device copies (fallback inputs/outputs, .cpu(), .to("neuron"))."""
    op_launch_us: float = 12.0
    """Fixed device cost per eager op (NEFF load + launch)."""
    graph_launch_us: float = 30.0
    device_time_scale: float = 1.0
    """Multiplies every modelled device duration (a demo can slow the device down)."""
    launch_blocking: bool = True
    """The host waits for each first-call compile inside the op (True), or compiles run on the background
    compile thread while the host goes on and the host pays where it next waits for the device (False)
    (torch-neuronx-facts, "Corrections and additions")."""
    blocking_execution: bool = False
    """``NEURON_LAUNCH_BLOCKING=1`` in effect: every op's execution is synchronous (the host waits for the device
    after each op, as the April ``NeuronStream`` does; issue 21), and the runtime keeps no framework mapping (the
    SDK documents framework mapping as incompatible with it: ``framework_mapping_*.json`` is written empty;
    issue 33). `from_env`: "1" sets this and `launch_blocking`, "0" clears both; unset keeps the defaults
    (blocking compiles, asynchronous execution as the docs describe it), or "1" for `build` "release"."""

    # The runtime's capture (docs/trainium.md, "The emulated device").
    build: str = "dev"
    """Which torch-neuronx build is emulated: "dev" (``NEURON_LAUNCH_BLOCKING`` unset = the emulator's defaults,
    blocking compiles and asynchronous execution) or "release" (a stock release build: unset means "1", every
    op synchronous, as release builds default to; torch-neuronx-facts "Corrections and additions").
    `from_env`: NEURON_PROF_EMULATE_BUILD."""
    device_clock_offset_ns: int = 3 * 3600 * 10**9
    """The device clock reads this many ns when the emulator starts (its counter started at device boot,
    not at the Unix epoch: hours apart from the host clock)."""
    device_clock_drift_ppm: float = 40.0
    """The device clock runs this many parts per million fast against the host clock."""
    explorer_on_path: bool = True
    """Put the stand-in ``neuron-explorer`` command on this process's PATH (and its children's), as an install
    of the Neuron tools would; only in a process running the emulated device."""

    fallback_ops: frozenset[str] = DEFAULT_FALLBACK_OPS
    silent_fallback_ops: frozenset[str] = DEFAULT_SILENT_FALLBACK_OPS
    int64_fallback_ops: frozenset[str] = DEFAULT_INT64_FALLBACK_OPS
    max_device_events: int = 250_000
    """Ring buffer of device activity (oldest dropped). The real runtime keeps 1,000,000 per NeuronCore in
    its own memory; here each event costs ~300 B of host RAM, so the default is smaller."""
    ground_truth: bool = True
    """Keep the test-only ground-truth log."""
    max_ground_truth_events: int = 200_000
    device_impl: str = "auto"
    """How device "neuron" is built: "extension" (a C++ PrivateUse1 extension, compiled once per machine
    into the user cache: device tensors are plain torch.Tensors), "subclass" (a Python tensor subclass,
    `NeuronTensor`: no compiler needed, four idioms differ, docs/emulator.md), or "auto"
    (the extension when a C++ compiler is found, else the subclass). `from_env`: NEURON_PROF_EMULATE_DEVICE."""
    host_cost: str = "python"
    """What an op costs the host: "python" (every op runs the emulator's Python executor: tens of microseconds of
    host time each) or "launch" (an op whose signature already ran as a plain device op is launched by the C++
    extension: its host kernel, its result, and one row on the asynchronous device queue with its modelled
    duration, as a runtime launches a cached NEFF; a few microseconds, no Python). First calls, fallbacks,
    float64, syncs, copies and graphs take the executor in both. Launch mode needs the extension device (the
    subclass device runs "python") and is fixed at enable(). `from_env`: NEURON_PROF_EMULATE_HOST_COST."""
    install_torch_neuronx: bool = True
    """Publish the torch_neuronx-shaped module as sys.modules["torch_neuronx"]."""

    @classmethod
    def fast(cls, **overrides: object) -> EmulatorConfig:
        """No compile cost and no launch overhead: for tests that only need correct numbers."""
        base = cls(
            eager_compile_base_ms=0.0,
            eager_compile_ms_per_operand=0.0,
            eager_compile_ms_per_gflop=0.0,
            graph_compile_base_ms=0.0,
            graph_compile_ms_per_node=0.0,
            disk_load_ms=0.0,
        )
        return replace(base, **overrides)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls) -> EmulatorConfig:
        """Defaults, adjusted by NEURON_PROF_EMULATE_* variables (see emulator/__init__.py)."""
        cache_dir = os.environ.get("NEURON_PROF_EMULATE_CACHE_DIR") or os.environ.get(
            "TORCH_NEURONX_NEFF_CACHE_DIR"
        )
        build = os.environ.get(BUILD_ENV, "").strip().lower()
        build = build if build in BUILDS else "dev"
        lb = os.environ.get("NEURON_LAUNCH_BLOCKING", "").strip().lower()
        blocking = {"1": True, "true": True, "0": False, "false": False}.get(lb)
        if blocking is None and build == "release":
            blocking = True  # release builds default to "1" (torch-neuronx-facts, "Corrections and additions")
        cfg = cls(cache_dir=cache_dir or None, launch_blocking=blocking is not False,
                  blocking_execution=blocking is True, build=build)
        host_cost = os.environ.get(HOST_COST_ENV, "").strip().lower()
        if host_cost in HOST_COSTS:
            cfg = replace(cfg, host_cost=host_cost)
        impl = os.environ.get("NEURON_PROF_EMULATE_DEVICE", "").strip().lower()
        if impl in ("auto", "extension", "subclass"):
            cfg = replace(cfg, device_impl=impl)
        scale = os.environ.get("NEURON_PROF_EMULATE_COMPILE_SCALE")
        if scale:
            cfg = cfg.with_compile_scale(float(scale))
        dev_scale = os.environ.get("NEURON_PROF_EMULATE_DEVICE_SCALE")
        if dev_scale:
            cfg = replace(cfg, device_time_scale=float(dev_scale))
        return cfg

    def with_compile_scale(self, scale: float) -> EmulatorConfig:
        """All compile costs multiplied by `scale` (0 disables them)."""
        return replace(
            self,
            eager_compile_base_ms=self.eager_compile_base_ms * scale,
            eager_compile_ms_per_operand=self.eager_compile_ms_per_operand * scale,
            eager_compile_ms_per_gflop=self.eager_compile_ms_per_gflop * scale,
            graph_compile_base_ms=self.graph_compile_base_ms * scale,
            graph_compile_ms_per_node=self.graph_compile_ms_per_node * scale,
        )
