"""The C++ half of the emulated device (`_ext_build` compiles it, `_ext_device` registers it): torch's
open-registration pattern (pytorch test/cpp_extensions/open_registration_extension). Device memory is host
memory, counted like TorchNeuron's caching allocator (allocated / reserved / active, a capacity past which an
allocation raises torch.OutOfMemoryError); the kernels that only shape metadata (empty, views, resize_, set_)
are C++; every other op reaches the Python executor on host aliases of the device memory (`host_alias`), whose
results come back as device tensors (`device_result`) without a copy. The PrivateUse1 hooks give device
generators, pinned host memory and the current device."""

CPP = r"""
#include <torch/extension.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/set_native.h>
#include <c10/core/impl/alloc_cpu.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_set>

namespace {

// ---- memory accounting (one device), shaped like torch_neuronx._C._get_memory_stats ----
struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void add(int64_t n) { current += n; allocated += n; peak = std::max(peak, current); }
  void sub(int64_t n) { current -= n; freed += n; }
};
std::mutex g_mem_mu;
int64_t g_capacity = int64_t(24) << 30;
int64_t g_granularity = int64_t(2) << 20;
Stat g_allocated, g_reserved, g_active;
int64_t g_num_ooms = 0, g_num_frees = 0, g_requests = 0;

std::string format_bytes(double n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (std::abs(n) >= 1024 && u < 3) { n /= 1024; ++u; }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%lld B", (long long)n);
  else std::snprintf(buf, sizeof buf, "%.2f %s", n, units[u]);
  return buf;
}

int64_t round_up(int64_t n, int64_t g) { return g > 0 ? (n + g - 1) / g * g : n; }

// Count `n` more bytes, or raise torch.OutOfMemoryError if they do not fit.
void account(int64_t n) {
  if (n <= 0) return;
  std::string msg;
  {
    std::lock_guard<std::mutex> lock(g_mem_mu);
    ++g_requests;
    if (g_allocated.current + n <= g_capacity) {
      g_allocated.add(n);
      g_active.add(n);
      int64_t want = round_up(g_allocated.current, g_granularity);
      if (want > g_reserved.current) g_reserved.add(want - g_reserved.current);
      return;
    }
    ++g_num_ooms;
    msg = "Neuron out of memory. Tried to allocate " + format_bytes(double(n)) + " on neuron:0 (capacity " +
          format_bytes(double(g_capacity)) + "; " + format_bytes(double(g_allocated.current)) +
          " already allocated)";
  }
  TORCH_CHECK_WITH(OutOfMemoryError, false, msg);
}

void release(int64_t n) {
  if (n <= 0) return;
  std::lock_guard<std::mutex> lock(g_mem_mu);
  g_allocated.sub(n);
  g_active.sub(n);
  ++g_num_frees;
}

// A device block: its host memory and its counted size.
struct Block { void* p; int64_t n; };
void free_block(void* ctx) {
  auto* b = static_cast<Block*>(ctx);
  c10::free_cpu(b->p);
  release(b->n);
  delete b;
}

// Device memory is host memory: what the emulated device "holds" lives in this process.
struct HostMemory final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    account(int64_t(n));
    void* p = n ? c10::alloc_cpu(n) : nullptr;
    return {p, new Block{p, int64_t(n)}, &free_block, c10::Device(c10::DeviceType::PrivateUse1, 0)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* d, const void* s, size_t n) const override { default_copy_data(d, s, n); }
};
HostMemory g_memory;
constexpr c10::DispatchKeySet kDevice(c10::DispatchKey::PrivateUse1);

// A device storage over a host result's bytes (no copy): it keeps the host storage alive, counted as device
// memory until freed.
struct Held { c10::Storage keep; int64_t n; };
void free_held(void* ctx) {
  auto* h = static_cast<Held*>(ctx);
  release(h->n);
  delete h;
}

at::Tensor over(c10::Storage storage, const at::Tensor& like) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), kDevice, like.dtype());
  t.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  return t;
}

// A CPU tensor over the same bytes, from the device storage's start (so a host result that views it has the
// device storage's offsets); the device storage stays alive while it lives.
at::Tensor host_alias(const at::Tensor& t) {
  c10::Storage keep = t.storage();
  void* base = keep.mutable_data();
  return at::for_blob(base, t.sizes())
      .strides(t.strides())
      .storage_offset(t.storage_offset())
      .deleter([keep](void*) {})
      .options(t.options().device(at::kCPU))
      .make_tensor();
}

// A host result as a device tensor: a view of a device operand whose memory it shares, else a new device
// storage over its bytes (counted; raises torch.OutOfMemoryError past the capacity).
at::Tensor device_result(const at::Tensor& o, const std::vector<at::Tensor>& operands) {
  const void* p = o.storage().data();
  if (p != nullptr) {
    for (const auto& d : operands) {
      if (d.storage().data() == p) return over(d.storage(), o);
    }
  }
  c10::Storage cpu = o.storage();
  int64_t n = int64_t(cpu.nbytes());
  account(n);
  void* data = cpu.mutable_data();
  c10::DataPtr dp(data, new Held{cpu, n}, &free_held, c10::Device(c10::DeviceType::PrivateUse1, 0));
  c10::Storage st(c10::Storage::use_byte_size_t(), size_t(n), std::move(dp), &g_memory, true);
  return over(std::move(st), o);
}

// Bytes between host and device tensors of the same shape (the executor models the copy's time).
void copy_raw(const at::Tensor& src, const at::Tensor& dst) {
  at::Tensor s = src.is_cpu() ? src : host_alias(src);
  at::Tensor d = dst.is_cpu() ? dst : host_alias(dst);
  d.copy_(s);
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

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_(dst, self.sizes(), std::nullopt);
  copy_raw(self, dst);
  return dst;
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

std::vector<int64_t> memory_stats() {
  std::lock_guard<std::mutex> lock(g_mem_mu);
  std::vector<int64_t> v;
  for (const Stat* s : {&g_allocated, &g_reserved, &g_active}) {
    v.insert(v.end(), {s->current, s->peak, s->allocated, s->freed});
  }
  v.insert(v.end(), {g_num_ooms, g_num_frees, g_requests, g_capacity});
  return v;
}

void set_memory_limits(int64_t capacity, int64_t granularity) {
  std::lock_guard<std::mutex> lock(g_mem_mu);
  g_capacity = capacity;
  g_granularity = granularity;
}

void reset_peak() {
  std::lock_guard<std::mutex> lock(g_mem_mu);
  for (Stat* s : {&g_allocated, &g_reserved, &g_active}) s->peak = s->current;
}

void reset_accumulated() {
  std::lock_guard<std::mutex> lock(g_mem_mu);
  for (Stat* s : {&g_allocated, &g_reserved, &g_active}) { s->allocated = s->current; s->freed = 0; }
  g_num_ooms = g_num_frees = g_requests = 0;
}

void empty_cache() {
  std::lock_guard<std::mutex> lock(g_mem_mu);
  int64_t want = round_up(g_allocated.current, g_granularity);
  if (want < g_reserved.current) g_reserved.sub(g_reserved.current - want);
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
  m.impl("_copy_from_and_resize", copy_from_and_resize);
}

void install_allocator() { c10::SetAllocator(c10::DeviceType::PrivateUse1, &g_memory); }

void install_hooks() { at::RegisterPrivateUse1HooksInterface(&g_hooks); }

void bind_launch(pybind11::module_& m);  // the launch path (csrc.launch), further down this unit

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("host_alias", &host_alias);
  m.def("device_result", &device_result);
  m.def("copy_raw", &copy_raw);
  m.def("install_allocator", &install_allocator);
  m.def("install_hooks", &install_hooks);
  m.def("memory_stats", &memory_stats);
  m.def("set_memory_limits", &set_memory_limits);
  m.def("reset_peak", &reset_peak);
  m.def("reset_accumulated", &reset_accumulated);
  m.def("empty_cache", &empty_cache);
  bind_launch(m);
}
"""
