"""EXPERIMENTAL, not used by the emulator: device "neuron" as a real PrivateUse1 extension (a measurement).

The emulated device's tensor is a wrapper subclass (_tensor.NeuronTensor). This prototype tries torch's
open-registration pattern instead (pytorch test/cpp_extensions/open_registration_extension): a small C++
extension, built by torch.utils.cpp_extension at first use into a cache folder, gives PrivateUse1 an
allocator over host memory and the kernels that only shape metadata or copy bytes (empty, views, resize_,
set_, _copy_from, _local_scalar_dense); every other op reaches a Python boxed fallback that runs the op's
CPU kernel on CPU aliases of the device memory (zero-copy) and hands the results back as device tensors. So a
device tensor is a plain `torch.Tensor` with storage, and views, in-place ops and autograd are torch's own.

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

_CPP = r"""
#include <torch/extension.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <c10/core/impl/alloc_cpu.h>

namespace {

// Device memory is host memory: what the emulated device "holds" lives in this process.
struct HostMemory final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = n ? c10::alloc_cpu(n) : nullptr;
    return {p, p, &c10::free_cpu, c10::Device(c10::DeviceType::PrivateUse1, 0)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &c10::free_cpu; }
  void copy_data(void* d, const void* s, size_t n) const override { default_copy_data(d, s, n); }
};
HostMemory g_memory;
constexpr c10::DispatchKeySet kDevice(c10::DispatchKey::PrivateUse1);

// A CPU tensor over the same bytes (the device tensor's storage stays alive while it lives).
at::Tensor host_alias(const at::Tensor& t) {
  c10::Storage keep = t.storage();
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), [keep](void*) {},
                       t.options().device(at::kCPU));
}

// A device tensor over a CPU result's bytes (no copy).
at::Tensor device_alias(const at::Tensor& t) {
  c10::Storage keep = t.storage();
  c10::Device dev(c10::DeviceType::PrivateUse1, 0);
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), [keep](void*) {}, t.options().device(dev), dev);
}

at::Tensor empty_mf(at::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout>,
                    std::optional<at::Device>, std::optional<bool>, std::optional<at::MemoryFormat> mf) {
  return at::detail::empty_generic(size, &g_memory, kDevice, c10::dtype_or_default(dtype), mf);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout>, std::optional<at::Device>, std::optional<bool>) {
  return at::detail::empty_strided_generic(size, stride, &g_memory, kDevice, c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> offset) {
  std::optional<int64_t> off;
  if (offset) off = offset->expect_int();
  return at::native::as_strided_tensorimpl(self, C10_AS_INTARRAYREF_SLOW(size),
                                           C10_AS_INTARRAYREF_SLOW(stride), off);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          std::optional<at::MemoryFormat> mf) {
  return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), mf);
}

at::Tensor& set_storage(at::Tensor& self, at::Storage src, int64_t off, at::IntArrayRef size,
                        at::IntArrayRef stride) {
  return at::native::set_storage_cpu_(self, src, off, size, stride);
}

at::Tensor& set_whole_storage(at::Tensor& self, at::Storage src) {
  int64_t n = static_cast<int64_t>(src.nbytes() / self.dtype().itemsize());
  return at::native::set_storage_cpu_(self, src, 0, {n}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& src) {
  return at::native::set_storage_cpu_(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor s = self.is_cpu() ? self : host_alias(self);
  at::Tensor d = dst.is_cpu() ? dst : host_alias(dst);
  d.copy_(s, non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_(dst, self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  return at::native::_local_scalar_dense_cpu(host_alias(self));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_mf);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Storage", set_whole_storage);
  m.impl("set_.source_Tensor", set_tensor);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
}

void install_allocator() { c10::SetAllocator(c10::DeviceType::PrivateUse1, &g_memory); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("host_alias", &host_alias);
  m.def("device_alias", &device_alias);
  m.def("install_allocator", &install_allocator);
}
"""

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


def _unwrap(x: Any, aliases: dict[int, torch.Tensor]) -> Any:
    if isinstance(x, torch.Tensor):
        if x.device.type == "neuron":
            h = _ext.host_alias(x)
            aliases[id(h)] = x
            return h
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, aliases) for v in x)
    if isinstance(x, torch.device) and x.type == "neuron":
        return torch.device("cpu")
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
    """The Python executor every op without a C++ kernel reaches: the CPU kernel on host aliases."""
    aliases: dict[int, torch.Tensor] = {}
    hargs = _unwrap(args, aliases)
    out = kwargs.get("out")
    if isinstance(out, torch.Tensor) and out.device.type == "neuron":
        # out= may resize its tensor (arange, linspace fill through it): a host alias cannot grow, so the op
        # writes a host tensor, and the device tensor is resized and filled from it
        hkwargs = {k: _unwrap(v, aliases) for k, v in kwargs.items() if k != "out"}
        res = op(*hargs, **hkwargs, out=torch.empty(0, dtype=out.dtype))
        out.resize_(res.shape)
        out.copy_(res)
        return out
    hkwargs = {k: _unwrap(v, aliases) for k, v in kwargs.items()}
    return _wrap(op(*hargs, **hkwargs), aliases)


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


def enable() -> None:
    """Build (or load the cached build of) the extension and register device "neuron" with it."""
    global _ext, BUILD_SECONDS
    if _ext is not None:
        return
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend
    from torch.utils.cpp_extension import load_inline

    t0 = time.perf_counter()
    _ext = load_inline("neuron_prof_experimental_privateuse1", cpp_sources=[_CPP],
                       build_directory=str(build_dir()), extra_cflags=["-O1"], verbose=False)
    BUILD_SECONDS = time.perf_counter() - t0
    _ext.install_allocator()
    _setup_privateuseone_for_python_backend(rename="neuron", backend_module=_device_module())
    glob = torch.library.Library("_", "IMPL")
    glob.fallback(execute, "PrivateUse1")
    glob.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    _LIBS.append(glob)
