"""The C++ half of the experimental PrivateUse1 device (experimental_privateuse1.py builds it): torch's
open-registration pattern (pytorch test/cpp_extensions/open_registration_extension): an allocator over host
memory, the kernels that only shape metadata or copy bytes, and the PrivateUse1 hooks (generators, pinned host
memory, the current device, storage resize)."""

CPP = r"""
#include <torch/extension.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <c10/core/impl/alloc_cpu.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_set>

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

// Pinned host memory (Tensor.pin_memory, DataLoader(pin_memory=True)): host memory the hooks can tell apart.
std::mutex g_pinned_mu;
std::unordered_set<const void*> g_pinned;

void free_pinned(void* p) {
  {
    std::lock_guard<std::mutex> lock(g_pinned_mu);
    g_pinned.erase(p);
  }
  c10::free_cpu(p);
}

struct PinnedHostMemory final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = n ? c10::alloc_cpu(n) : nullptr;
    if (p) {
      std::lock_guard<std::mutex> lock(g_pinned_mu);
      g_pinned.insert(p);
    }
    return {p, p, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* d, const void* s, size_t n) const override { default_copy_data(d, s, n); }
};
PinnedHostMemory g_pinned_memory;

// A device generator: the CPU generator's algorithm and state (torch's open-registration example does the
// same), on device neuron. Ops run on the host with a CPU generator carrying this one's state.
struct DeviceGenerator final : at::CPUGeneratorImpl {
  explicit DeviceGenerator(c10::DeviceIndex index) {
    device_ = c10::Device(c10::DeviceType::PrivateUse1, index < 0 ? 0 : index);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }
};

// What torch asks a C++ backend for in a generic way: availability, the current device (one device),
// generators, pinned memory, where a pointer lives, and growing a device storage.
struct DeviceHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return 1; }
  void setCurrentDevice(c10::DeviceIndex) const override {}
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex) const override { return 0; }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex) const override { return 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    static at::Generator gen = at::make_generator<DeviceGenerator>(0);
    return gen;
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return at::make_generator<DeviceGenerator>(index);
  }
  at::Device getDeviceFromPtr(void*) const override { return {c10::DeviceType::PrivateUse1, 0}; }
  bool isPinnedPtr(const void* p) const override {
    std::lock_guard<std::mutex> lock(g_pinned_mu);
    return g_pinned.count(p) > 0;
  }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned_memory; }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t n) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    c10::DataPtr fresh = g_memory.allocate(n);
    size_t keep = std::min(n, impl->nbytes());
    if (keep) std::memcpy(fresh.get(), impl->data(), keep);
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(n);
  }
};
DeviceHooks g_hooks;

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

void install_hooks() { at::RegisterPrivateUse1HooksInterface(&g_hooks); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("host_alias", &host_alias);
  m.def("device_alias", &device_alias);
  m.def("install_allocator", &install_allocator);
  m.def("install_hooks", &install_hooks);
}
"""
