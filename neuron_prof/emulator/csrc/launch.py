"""The C++ launch path of the emulated device (``NEURON_PROF_EMULATE_HOST_COST=launch``; `_launch`).

Compiled into the device extension with `_privateuse1_csrc` (one translation unit: it uses that source's
`host_alias` and `device_result`). In launch mode every PrivateUse1 op the Python executor would take reaches
`launch_kernel` first. An op whose signature the executor has already run as a plain device op (compiled, no
fallback, no float64, no sync: the executor says so through `mark_warm`) is launched here, as a runtime
launches a cached NEFF: its values come from the host kernel on host aliases, its result becomes a device tensor,
and one row (its modelled device duration, given by the executor) goes onto the device queue, asynchronous
unless the queue is blocking. No Python runs. Every other call goes to the executor (`cold`), as in the default
mode. The queue itself (when the device is free, the nrt sequence ids, the rows not yet read) lives here in launch
mode, so that Python submissions and C++ launches share one order; `_timing.Activity` drains it.
"""

LAUNCH_CPP = r"""
#include <torch/library.h>
#include <ATen/record_function.h>
#include <ATen/SequenceNumber.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <chrono>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

struct Warm { int64_t name; int64_t dur; double flops; int64_t nbytes; int64_t entry; };
struct Row {
  int64_t name, stream, kind, start, end, seq, seq_nr, tid, host_ns, host_end; double flops; int64_t nbytes;
  bool launched; int64_t entry;
};

std::mutex g_q_mu;                 // the device queue: free_at, sequence ids, rows not yet drained
int64_t g_free_at = 0, g_next_seq = 1, g_dropped = 0, g_max_rows = 250000;
std::vector<Row> g_rows;
std::vector<std::string> g_names;  // interned op names (index = Row::name), under g_q_mu
std::unordered_map<std::string, int64_t> g_name_ids;
bool g_blocking = false;
std::shared_mutex g_warm_mu;
std::unordered_map<uint64_t, Warm> g_warm;
py::object* g_cold = nullptr;      // the executor's entry: cold(namespace::name, overload, args, kwargs)
thread_local int g_python_only = 0;  // > 0 while a compiled graph runs (its ops are not launched one by one)
thread_local std::vector<std::pair<uint64_t, const c10::OperatorHandle*>> g_pending;  // cold calls running

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::system_clock::now().time_since_epoch()).count();
}

inline void mix(uint64_t& h, uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); }

bool mix_tensor(uint64_t& h, const at::Tensor& t) {
  if (!t.defined()) { mix(h, 1); return true; }
  if (t.device().type() != c10::DeviceType::PrivateUse1 || t.layout() != c10::kStrided || t.is_conj() ||
      t.is_neg() || !t.has_storage()) return false;
  mix(h, 2 + static_cast<uint64_t>(t.scalar_type()));
  for (auto s : t.sizes()) mix(h, static_cast<uint64_t>(s));
  for (auto s : t.strides()) mix(h, static_cast<uint64_t>(s) * 31);
  mix(h, static_cast<uint64_t>(t.storage_offset()));
  return true;
}

// A key finer than the executor's signature (float scalars and strides count): a miss only costs a cold call.
bool signature_key(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, uint64_t* key) {
  uint64_t h = reinterpret_cast<uintptr_t>(&op.schema());
  for (const auto& iv : args) {
    if (iv.isTensor()) { if (!mix_tensor(h, iv.toTensor())) return false; }
    else if (iv.isTensorList()) {
      mix(h, 7);
      for (const auto& t : iv.toTensorList()) if (!mix_tensor(h, t)) return false;
    }
    else if (iv.isNone()) mix(h, 11);
    else if (iv.isBool()) mix(h, 13 + iv.toBool());
    else if (iv.isInt()) { mix(h, 17); mix(h, static_cast<uint64_t>(iv.toInt())); }
    else if (iv.isDouble()) { double d = iv.toDouble(); uint64_t b; std::memcpy(&b, &d, 8); mix(h, 19); mix(h, b); }
    else if (iv.isIntList()) { mix(h, 23); for (auto v : iv.toIntVector()) mix(h, static_cast<uint64_t>(v)); }
    else if (iv.isString()) { mix(h, 29); mix(h, std::hash<std::string>()(iv.toStringRef())); }
    else if (iv.isDevice()) { mix(h, 37); mix(h, static_cast<uint64_t>(iv.toDevice().type()) * 256 +
                                                 static_cast<uint64_t>(iv.toDevice().index() + 1)); }
    else return false;  // generators, lists of scalars, objects: the executor's
  }
  *key = h;
  return true;
}

std::string op_name(const c10::OperatorHandle& op) {
  const auto& s = op.schema();
  const auto& ov = s.overload_name();
  return (ov.empty() || ov == "default") ? s.name() : s.name() + "." + ov;
}

py::object to_python(const c10::Argument& a, c10::IValue iv) {
  if (iv.isInt()) {  // dtype / layout / memory_format arrive as ints: Python wants torch's objects
    c10::TypePtr t = a.real_type();
    if (auto o = t->cast<c10::OptionalType>()) t = o->getElementType();
    switch (t->kind()) {
      case c10::TypeKind::ScalarTypeType: return py::cast(static_cast<at::ScalarType>(iv.toInt()));
      case c10::TypeKind::LayoutType: return py::cast(static_cast<at::Layout>(iv.toInt()));
      case c10::TypeKind::MemoryFormatType: return py::cast(static_cast<at::MemoryFormat>(iv.toInt()));
      default: break;
    }
  }
  return torch::jit::toPyObject(std::move(iv));
}

struct Pending {
  explicit Pending(uint64_t key, const c10::OperatorHandle& op) { g_pending.emplace_back(key, &op); }
  ~Pending() { g_pending.pop_back(); }
};

// The executor takes the call (the default mode's path), told which key a mark_warm in it would mean.
void cold(const c10::OperatorHandle& op, torch::jit::Stack* stack, uint64_t key) {
  const auto& schema = op.schema();
  const auto& sargs = schema.arguments();
  size_t n = sargs.size();
  py::gil_scoped_acquire gil;
  py::list args;
  py::dict kwargs;
  auto ivs = torch::jit::last(*stack, n);
  for (size_t i = 0; i < n; ++i) {
    py::object o = to_python(sargs[i], ivs[i]);
    if (sargs[i].kwarg_only()) kwargs[py::str(sargs[i].name())] = o;
    else args.append(o);
  }
  torch::jit::drop(*stack, n);
  py::object out;
  {
    Pending p(key, op);
    out = (*g_cold)(schema.name(), schema.overload_name(), py::tuple(args), kwargs);
  }
  const auto& rets = schema.returns();
  if (rets.size() == 1) {
    stack->push_back(torch::jit::toIValue(out, rets[0].real_type()));
  } else if (rets.size() > 1) {
    auto tup = out.cast<py::tuple>();
    for (size_t i = 0; i < rets.size(); ++i) stack->push_back(torch::jit::toIValue(tup[i], rets[i].real_type()));
  }
}

at::Tensor to_device(const at::Tensor& o, const std::vector<at::Tensor>& devs,
                     const std::vector<at::Tensor>& hosts) {
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (o.unsafeGetTensorImpl() == hosts[i].unsafeGetTensorImpl()) {  // in place / out=: the operand itself
      const at::Tensor& d = devs[i];
      if (d.sizes() != o.sizes() || d.strides() != o.strides()) d.as_strided_(o.sizes(), o.strides(),
                                                                            o.storage_offset());
      return d;
    }
  }
  return device_result(o, devs);
}

void launch_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  size_t n = op.schema().arguments().size();
  uint64_t key = 0;
  bool keyed = g_python_only == 0 && signature_key(op, torch::jit::last(*stack, n), &key);
  Warm w{-1, 0, 0.0, 0, -1};
  if (keyed) {
    std::shared_lock<std::shared_mutex> lock(g_warm_mu);
    auto it = g_warm.find(key);
    if (it != g_warm.end()) w = it->second;
  }
  if (w.name < 0) return cold(op, stack, keyed ? key : 0);
  int64_t t0 = now_ns();
  std::vector<at::Tensor> devs, hosts;
  bool rg = false;
  auto alias = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined()) return t;
    rg = rg || t.requires_grad();
    devs.push_back(t);
    hosts.push_back(host_alias(t));
    return hosts.back();
  };
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    c10::IValue& iv = (*stack)[i];
    if (iv.isTensor()) iv = alias(iv.toTensor());
    else if (iv.isTensorList()) {
      std::vector<at::Tensor> v;
      for (const auto& t : iv.toTensorList()) v.push_back(alias(t));
      iv = c10::IValue(v);
    }
  }
  {
    at::RecordFunctionGuard hide(false);  // the device kernel is opaque to the host profiler
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  }
  size_t r = op.schema().returns().size();
  for (size_t i = stack->size() - r; i < stack->size(); ++i) {
    c10::IValue& iv = (*stack)[i];
    if (iv.isTensor()) iv = to_device(iv.toTensor(), devs, hosts);
    else if (iv.isTensorList()) {
      std::vector<at::Tensor> v;
      for (const auto& t : iv.toTensorList()) v.push_back(to_device(t, devs, hosts));
      iv = c10::IValue(v);
    }
  }
  int64_t seq_nr = at::sequence_number::peek() - ((rg && c10::GradMode::is_enabled()) ? 1 : 0);
  int64_t tid = static_cast<int64_t>(syscall(SYS_gettid));
  int64_t host = now_ns(), end;
  {
    std::lock_guard<std::mutex> lock(g_q_mu);
    int64_t start = std::max(g_free_at, host);
    end = start + w.dur;
    g_free_at = end;
    g_rows.push_back(Row{w.name, 0, 0, start, end, g_next_seq++, seq_nr, tid, t0, host, w.flops, w.nbytes, true,
                         w.entry});
    if (static_cast<int64_t>(g_rows.size()) > 2 * g_max_rows) {
      int64_t drop = static_cast<int64_t>(g_rows.size()) - g_max_rows;
      g_rows.erase(g_rows.begin(), g_rows.begin() + drop);
      g_dropped += drop;
    }
  }
  if (g_blocking) {  // the host polls the device until the op is done (a sleep would cost the OS's wake-up)
    while (now_ns() < end) std::this_thread::yield();
  }
}

int64_t intern(const std::string& name) {  // caller holds g_q_mu
  auto it = g_name_ids.find(name);
  if (it != g_name_ids.end()) return it->second;
  g_names.push_back(name);
  return g_name_ids[name] = static_cast<int64_t>(g_names.size()) - 1;
}

std::vector<std::unique_ptr<torch::Library>> g_libs;

void register_launch(py::object cold_fn, const std::vector<std::string>& ops) {
  g_cold = new py::object(std::move(cold_fn));  // for the life of the process, as the registrations
  auto glob = std::make_unique<torch::Library>(torch::Library::IMPL, "_", c10::DispatchKey::PrivateUse1,
                                               __FILE__, __LINE__);
  glob->fallback(torch::CppFunction::makeFromBoxedFunction<&launch_kernel>());
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                              __FILE__, __LINE__);
  for (const auto& name : ops) lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&launch_kernel>());
  g_libs.push_back(std::move(glob));
  g_libs.push_back(std::move(lib));
}

// The cold call now running on this thread is a plain device op of `name` whose launches take `dur` ns and
// hit the NEFF cache entry `entry` (the executor's number for it).
bool mark_warm(const std::string& name, int64_t dur, double flops, int64_t nbytes, int64_t entry) {
  if (g_pending.empty() || g_pending.back().first == 0 || op_name(*g_pending.back().second) != name) return false;
  int64_t id;
  {
    std::lock_guard<std::mutex> lock(g_q_mu);
    id = intern(name);
  }
  std::unique_lock<std::shared_mutex> lock(g_warm_mu);
  g_warm[g_pending.back().first] = Warm{id, dur, flops, nbytes, entry};
  return true;
}

void clear_warm() {
  std::unique_lock<std::shared_mutex> lock(g_warm_mu);
  g_warm.clear();
}

void set_queue(bool blocking, int64_t max_rows) {
  std::lock_guard<std::mutex> lock(g_q_mu);
  g_blocking = blocking;
  g_max_rows = max_rows;
}

void python_only(bool on) { g_python_only += on ? 1 : -1; }

// A submission from Python (copies, graphs, collectives, first calls): one queue, one order with launches.
py::tuple queue_submit(const std::string& name, int64_t dur, int64_t stream, int64_t kind, int64_t seq_nr,
                       int64_t tid, int64_t host_ns, int64_t not_before, double flops, int64_t nbytes) {
  std::lock_guard<std::mutex> lock(g_q_mu);
  int64_t start = std::max({g_free_at, host_ns, not_before});
  int64_t end = start + dur;
  g_free_at = end;
  int64_t seq = g_next_seq++;
  g_rows.push_back(Row{intern(name), stream, kind, start, end, seq, seq_nr, tid, host_ns, host_ns, flops, nbytes,
                       false, -1});
  return py::make_tuple(start, end, seq);
}

py::tuple queue_state() {
  std::lock_guard<std::mutex> lock(g_q_mu);
  return py::make_tuple(g_free_at, g_next_seq);
}

// The rows recorded since the last drain: (name, stream, kind, start, end, seq, seq_nr, tid, host_ns, host_end,
// flops, nbytes, launched, cache entry) tuples, and how many the queue dropped (oldest first) since.
py::tuple queue_drain() {
  std::vector<Row> rows;
  std::vector<std::string> names;
  int64_t dropped;
  {
    std::lock_guard<std::mutex> lock(g_q_mu);
    rows.swap(g_rows);
    names = g_names;
    dropped = g_dropped;
    g_dropped = 0;
  }
  py::list out;
  for (const auto& r : rows) {
    out.append(py::make_tuple(names[r.name], r.stream, r.kind, r.start, r.end, r.seq, r.seq_nr, r.tid, r.host_ns,
                              r.host_end, r.flops, r.nbytes, r.launched, r.entry));
  }
  return py::make_tuple(out, dropped);
}

}  // namespace

void bind_launch(py::module_& m) {
  m.def("register_launch", &register_launch);
  m.def("mark_warm", &mark_warm);
  m.def("clear_warm", &clear_warm);
  m.def("set_queue", &set_queue);
  m.def("python_only", &python_only);
  m.def("queue_submit", &queue_submit);
  m.def("queue_state", &queue_state);
  m.def("queue_drain", &queue_drain);
}
"""
