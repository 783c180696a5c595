// udf._ext: nanobind binding of the runtime C API (include/udf/runtime.h).
// The contract the Python layer codes against is python/src/EXT_API.md.
//
// Threading: the C API allows one thread at a time per runtime, so every
// call that touches a runtime takes that runtime's mutex, after releasing
// the GIL (searches from several Python threads queue up, never race).  An
// index sharded over several GPUs touches every shard's runtime: its calls
// take all their mutexes, in one global order (by address), so two callers
// never wait on each other crosswise.
// Lifetimes: Module holds its Runtime, Index its Module (Python references;
// a sharded index every shard's), so the C objects are destroyed children
// first, whatever the GC order.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <udf/runtime.h>
#include <udf/runtime.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// ------------------------------------------------------------------ errors

// A failing C call: raised in Python as udf.errors.UdfRuntimeError(status, name, message).
struct StatusError {
  udf_status status;
  std::string message;
};

[[noreturn]] void fail(udf_status s, std::string message) { throw StatusError{s, std::move(message)}; }

void check(udf_status s) {
  if (s != UDF_OK) fail(s, udf_last_error());
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const StatusError& e) {
    nb::object cls;
    try {
      cls = nb::module_::import_("udf.errors").attr("UdfRuntimeError");
    } catch (nb::python_error& err) {  // the package is incomplete: still say what failed
      PyErr_Format(PyExc_RuntimeError, "%s: %s (and udf.errors.UdfRuntimeError is missing: %s)",
                   udf_status_name(e.status), e.message.c_str(), err.what());
      return;
    }
    nb::object args = nb::make_tuple(static_cast<int>(e.status), udf_status_name(e.status), e.message);
    PyErr_SetObject(cls.ptr(), args.ptr());
  }
}

// A dict from alternating keys and values: kw("a", 1, "b", x).
inline void kw_fill(nb::dict&) {}
template <class V, class... Rest>
void kw_fill(nb::dict& d, const char* key, V&& value, Rest&&... rest) {
  d[key] = nb::cast(std::forward<V>(value));
  kw_fill(d, std::forward<Rest>(rest)...);
}
template <class... A>
nb::dict kw(A&&... a) {
  nb::dict d;
  kw_fill(d, std::forward<A>(a)...);
  return d;
}

// ------------------------------------------------------------------ handles

struct Runtime {
  udf_runtime* rt = nullptr;
  int32_t device = 0;
  std::mutex mu;  // one thread at a time per runtime (include/udf/runtime.h)
  std::atomic<std::thread::id> owner{};  // the thread holding mu, through RuntimeLocks
  int live_modules = 0;

  explicit Runtime(int32_t dev) : device(dev) {
    udf_status s;
    {
      nb::gil_scoped_release g;
      s = udf_runtime_create(dev, &rt);
    }
    check(s);
  }
  ~Runtime() { destroy(); }
  void destroy() {
    if (rt) udf_runtime_destroy(rt);
    rt = nullptr;
  }
  udf_runtime* get() {
    if (!rt) fail(UDF_ERROR_INVALID_ARGUMENT, "the runtime was closed");
    return rt;
  }
};

// The locks of some runtimes (distinct, in lock_order), each marked as this
// thread's while held.
class RuntimeLocks {
 public:
  RuntimeLocks() = default;
  explicit RuntimeLocks(const std::vector<Runtime*>& rts) {
    for (Runtime* r : rts) {
      r->mu.lock();
      take(r);
    }
  }
  RuntimeLocks(RuntimeLocks&& o) noexcept : held_(std::exchange(o.held_, {})) {}
  RuntimeLocks& operator=(RuntimeLocks&&) = delete;
  ~RuntimeLocks() {
    for (auto it = held_.rbegin(); it != held_.rend(); ++it) {
      (*it)->owner.store(std::thread::id{});
      (*it)->mu.unlock();
    }
  }
  /// Every lock of rts without waiting, or none: not one busy elsewhere or held by this thread.
  static std::optional<RuntimeLocks> try_take(const std::vector<Runtime*>& rts) {
    RuntimeLocks l;
    for (Runtime* r : rts) {
      if (r->owner.load() == std::this_thread::get_id() || !r->mu.try_lock()) return std::nullopt;
      l.take(r);
    }
    return l;
  }

 private:
  void take(Runtime* r) {
    r->owner.store(std::this_thread::get_id());
    held_.push_back(r);
  }
  std::vector<Runtime*> held_;
};

// A module or index dropped while one of its runtimes was held: by a call on
// another thread, or by this thread's own call (a chunk function, or the
// garbage collector running in it).  Waiting for the lock there would hold the
// GIL against a call that may need it, or deadlock on this thread's own lock,
// so the handle waits here, with the objects that keep its runtimes alive,
// and is destroyed as soon as they are free: by the dropping thread if they
// are free by then, else by the call that held them, once it lets them go.
struct Dropped {
  udf_module* module = nullptr;
  udf_index* index = nullptr;
  std::vector<Runtime*> runtimes;  // lock_order
  std::vector<nb::object> keep;    // what keeps the runtimes alive
};

struct DroppedQueue {
  std::mutex mu;  // held only to look at `handles` and to destroy one (never waits for a runtime)
  std::vector<Dropped> handles;
};

DroppedQueue& dropped_queue() {
  static auto* q = new DroppedQueue;  // never destroyed: its objects must not outlive the interpreter's GIL
  return *q;
}

// The C handle of d, its runtimes held.
void destroy_handle(const Dropped& d) {
  if (d.index) udf_index_destroy(d.index);
  if (d.module) {
    udf_module_destroy(d.module);
    --d.runtimes.front()->live_modules;
  }
}

/// Destroys every dropped handle whose runtimes are free.  Called with the
/// GIL, holding no runtime: after each call that held runtimes, and by a
/// handle's own drop.
void destroy_dropped() {
  DroppedQueue& q = dropped_queue();
  std::vector<nb::object> release;  // dropped after q.mu: their destructors may drop more handles
  {
    std::lock_guard<std::mutex> lock(q.mu);
    std::vector<Dropped> waiting;
    for (Dropped& d : q.handles) {
      std::optional<RuntimeLocks> locks = RuntimeLocks::try_take(d.runtimes);
      if (!locks) {
        waiting.push_back(std::move(d));
        continue;
      }
      destroy_handle(d);
      for (nb::object& o : d.keep) release.push_back(std::move(o));
    }
    q.handles = std::move(waiting);
  }
}

/// Destroys a handle now if its runtimes are free, else queues it (Dropped).
/// With the GIL (a destructor).
void drop_handle(Dropped d) {
  if (std::optional<RuntimeLocks> locks = RuntimeLocks::try_take(d.runtimes)) {
    destroy_handle(d);
    return;
  }
  {
    DroppedQueue& q = dropped_queue();
    std::lock_guard<std::mutex> lock(q.mu);
    q.handles.push_back(std::move(d));
  }
  destroy_dropped();  // the holder may have let go since try_take
}

// Runs `f` (a C call returning udf_status) without the GIL, holding the
// runtimes' locks (distinct, in lock_order); then destroys the handles
// dropped meanwhile.
template <class F>
void locked_call(const std::vector<Runtime*>& rts, F&& f) {
  udf_status s;
  std::string err;
  {
    nb::gil_scoped_release g;
    RuntimeLocks locks(rts);
    s = f();
    if (s != UDF_OK) err = udf_last_error();  // read on this thread, before anything else runs here
  }
  destroy_dropped();
  if (s != UDF_OK) fail(s, std::move(err));
}

template <class F>
void locked_call(Runtime& r, F&& f) {
  locked_call(std::vector<Runtime*>{&r}, std::forward<F>(f));
}

// The distinct runtimes of `rts` in the one order every caller locks them in.
std::vector<Runtime*> lock_order(std::vector<Runtime*> rts) {
  std::sort(rts.begin(), rts.end(), std::less<Runtime*>());
  rts.erase(std::unique(rts.begin(), rts.end()), rts.end());
  return rts;
}

struct Module {
  udf_module* m = nullptr;
  nb::object runtime_obj;  // keeps the Runtime alive
  Runtime* runtime = nullptr;

  Module(nb::object rt_obj, udf_module* mod) : m(mod), runtime_obj(std::move(rt_obj)) {
    runtime = nb::cast<Runtime*>(runtime_obj);
    ++runtime->live_modules;
  }
  ~Module() {
    if (m) drop_handle(Dropped{m, nullptr, {runtime}, {runtime_obj}});
    else --runtime->live_modules;
  }
};

struct Index {
  udf_index* ix = nullptr;
  nb::object module_obj;  // keeps the Module (and so the Runtime) alive: the home device's
  Module* module = nullptr;
  nb::list shard_modules;  // a sharded index: the Module of every shard, in device order (kept alive)
  std::vector<Runtime*> runtimes;  // every runtime the index uses, in lock_order

  Index(nb::object mod_obj, udf_index* x) : ix(x), module_obj(std::move(mod_obj)) {
    module = nb::cast<Module*>(module_obj);
    runtimes = {module->runtime};
  }
  // A sharded index over `mods` (udf._ext.Module objects; the first is the home's).
  Index(nb::list mods, const std::vector<Runtime*>& rts, udf_index* x)
      : ix(x), module_obj(mods[0]), shard_modules(std::move(mods)), runtimes(lock_order(rts)) {
    module = nb::cast<Module*>(module_obj);
  }
  ~Index() {
    if (ix) drop_handle(Dropped{nullptr, ix, runtimes, {module_obj, shard_modules}});
  }
};

// A device array (udf_device_array): a host array's copy in device memory
// that the runtime owns, read in place by the searches that bind it.  It
// holds its device's primary context itself, so it needs no lock and may
// outlive its Runtime.
struct DeviceArray {
  udf_device_array* a = nullptr;
  udf_tensor t{};
  explicit DeviceArray(udf_device_array* x) : a(x) {
    if (udf_device_array_tensor(a, &t) != UDF_OK) {
      std::string err = udf_last_error();
      udf_device_array_destroy(a);
      a = nullptr;
      fail(UDF_ERROR_INTERNAL, std::move(err));
    }
  }
  ~DeviceArray() { udf_device_array_destroy(a); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

// The C modules of a list of udf._ext.Module objects (one per device of a
// sharded index) and their runtimes.
std::vector<udf_module*> shard_modules_of(nb::list modules, std::vector<Runtime*>& rts) {
  if (modules.size() == 0)
    fail(UDF_ERROR_INVALID_ARGUMENT, "modules is empty: pass one Module per device, the module loaded on it");
  std::vector<udf_module*> out;
  for (size_t i = 0; i < modules.size(); ++i) {
    Module* m = nullptr;
    if (!nb::try_cast<Module*>(modules[i], m) || m == nullptr)
      throw nb::type_error(("modules[" + std::to_string(i) + "]: expected a udf._ext.Module, got " +
                            std::string(nb::type_name(modules[i].type()).c_str()))
                               .c_str());
    out.push_back(m->m);
    rts.push_back(m->runtime);
  }
  return out;
}

// ------------------------------------------------------------------ tensors

const char* dtype_label(udf_dtype t) {
  const char* n = udf_dtype_name(t);
  return n ? n : "?";
}

std::optional<udf_dtype> dtype_of(nb::dlpack::dtype d) {
  using C = nb::dlpack::dtype_code;
  if (d.lanes != 1) return std::nullopt;
  const auto code = static_cast<C>(d.code);
  if (code == C::Float && d.bits == 32) return UDF_DTYPE_F32;
  if (code == C::Float && d.bits == 16) return UDF_DTYPE_F16;
  if (code == C::Int && d.bits == 8) return UDF_DTYPE_I8;
  if (code == C::UInt && d.bits == 8) return UDF_DTYPE_U8;
  if (code == C::Int && d.bits == 32) return UDF_DTYPE_I32;
  if (code == C::Int && d.bits == 64) return UDF_DTYPE_I64;
  return std::nullopt;
}

// A tensor argument: the C view plus whatever keeps its memory alive for the call.
struct TensorArg {
  udf_tensor t{};
  std::optional<nb::ndarray<nb::ro>> in;
  std::optional<nb::ndarray<>> out;
};

// From a raw (ptr, device, dtype, rows, cols, row_stride) tuple.
bool from_tuple(nb::handle obj, udf_tensor& t, const std::string& what) {
  if (!nb::isinstance<nb::tuple>(obj)) return false;
  nb::tuple tup = nb::borrow<nb::tuple>(obj);
  if (tup.size() != 6)
    throw nb::type_error((what + ": a raw tensor is a 6-tuple (ptr, device, dtype, rows, cols, row_stride)").c_str());
  try {
    t.data = reinterpret_cast<void*>(nb::cast<uintptr_t>(tup[0]));
    t.device = nb::cast<int32_t>(tup[1]);
    const int code = nb::cast<int>(tup[2]);
    if (code < UDF_DTYPE_F32 || code > UDF_DTYPE_I64) throw nb::type_error((what + ": unknown dtype code").c_str());
    t.dtype = static_cast<udf_dtype>(code);
    t.rows = nb::cast<int64_t>(tup[3]);
    t.cols = nb::cast<int64_t>(tup[4]);
    t.row_stride = nb::cast<int64_t>(tup[5]);
  } catch (const nb::cast_error&) {
    throw nb::type_error((what + ": a raw tensor is a 6-tuple of ints (ptr, device, dtype, rows, cols, row_stride)").c_str());
  }
  return true;
}

template <class Array>
void describe(const Array& a, udf_tensor& t, const std::string& what) {
  auto dt = dtype_of(a.dtype());
  if (!dt)
    throw nb::type_error((what + ": element type not supported (f32, f16, i8, u8, i32 or i64)").c_str());
  t.dtype = *dt;
  t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  switch (a.device_type()) {
    case nb::device::cpu::value:
    case nb::device::cuda_host::value: t.device = UDF_HOST_DEVICE; break;
    case nb::device::cuda::value:
    case nb::device::cuda_managed::value: t.device = a.device_id(); break;
    default: throw nb::type_error((what + ": the array is neither in host memory nor on a CUDA device").c_str());
  }
  const size_t nd = a.ndim();
  if (nd == 0) {
    t.rows = t.cols = 1;
    t.row_stride = 0;
  } else if (nd == 1) {
    if (a.shape(0) > 1 && a.stride(0) != 1)
      throw nb::value_error((what + ": a 1-D array must be contiguous").c_str());
    t.rows = 1;
    t.cols = static_cast<int64_t>(a.shape(0));
    t.row_stride = 0;
  } else if (nd == 2) {
    if (a.shape(1) > 1 && a.stride(1) != 1)
      throw nb::value_error((what + ": rows must be contiguous (unit stride along the last axis)").c_str());
    t.rows = static_cast<int64_t>(a.shape(0));
    t.cols = static_cast<int64_t>(a.shape(1));
    t.row_stride = a.shape(0) > 1 ? static_cast<int64_t>(a.stride(0)) : 0;
    if (t.row_stride < 0) throw nb::value_error((what + ": negative row stride").c_str());
  } else {
    throw nb::value_error((what + ": expected a 0-D, 1-D or 2-D array, got " + std::to_string(nd) + " dimensions").c_str());
  }
}

TensorArg input_tensor(nb::handle obj, const std::string& what) {
  TensorArg a;
  if (from_tuple(obj, a.t, what)) return a;
  nb::ndarray<nb::ro> arr;
  if (!nb::try_cast(obj, arr))
    throw nb::type_error((what + ": expected an array (DLPack or buffer protocol: numpy, CuPy, PyTorch) or a raw "
                                 "(ptr, device, dtype, rows, cols, row_stride) tuple, got " +
                          std::string(nb::type_name(obj.type()).c_str()))
                             .c_str());
  describe(arr, a.t, what);
  a.in = std::move(arr);
  return a;
}

TensorArg output_tensor(nb::handle obj, const std::string& what) {
  TensorArg a;
  if (from_tuple(obj, a.t, what)) return a;
  nb::ndarray<> arr;
  if (!nb::try_cast(obj, arr))
    throw nb::type_error((what + ": expected a writable array (DLPack or buffer protocol) or a raw tuple").c_str());
  describe(arr, a.t, what);
  a.out = std::move(arr);
  return a;
}

// ------------------------------------------------------------------ helpers

const char* order_name(udf_order o) { return o == UDF_ORDER_MAX ? "max" : "min"; }
const char* coarse_name(udf_coarse_metric c) {
  switch (c) {
    case UDF_COARSE_L2: return "l2";
    case UDF_COARSE_INNER_PRODUCT: return "inner_product";
    case UDF_COARSE_COSINE: return "cosine";
  }
  return "?";
}

// A metric's or filter's captures as dicts, read through `info(c, &ci)`.
template <class Info>
nb::list captures_of(uint32_t n, Info&& info) {
  nb::list caps;
  for (uint32_t c = 0; c < n; ++c) {
    udf_capture_info ci{};
    check(info(c, &ci));
    caps.append(kw("name", std::string(ci.name), "dtype", static_cast<int>(ci.type), "is_array", ci.is_array != 0));
  }
  return caps;
}

nb::list metrics_of(const udf_module* m) {
  size_t n = 0;
  check(udf_module_metric_count(m, &n));
  nb::list out;
  for (size_t i = 0; i < n; ++i) {
    udf_metric_info mi{};
    check(udf_module_metric_info(m, i, &mi));
    const nb::list caps = captures_of(mi.n_captures, [&](uint32_t c, udf_capture_info* ci) {
      return udf_module_capture_info(m, i, c, ci);
    });
    nb::dict d;
    d["symbol"] = std::string(mi.symbol);
    d["finalize"] = mi.finalize ? nb::object(nb::str(mi.finalize)) : nb::none();
    d["source_name"] = std::string(mi.source_name ? mi.source_name : "");
    d["cache_key"] = std::string(mi.cache_key ? mi.cache_key : "");
    d["elem"] = static_cast<int>(mi.elem);
    d["acc"] = static_cast<int>(mi.acc);
    d["order"] = order_name(mi.order);
    d["coarse_metric"] = coarse_name(mi.coarse_metric);
    d["initial"] = mi.initial;
    d["max_k"] = mi.max_k;
    d["captures"] = caps;
    out.append(d);
  }
  return out;
}

nb::list filters_of(const udf_module* m) {
  size_t n = 0;
  check(udf_module_filter_count(m, &n));
  nb::list out;
  for (size_t i = 0; i < n; ++i) {
    udf_filter_info fi{};
    check(udf_module_filter_info(m, i, &fi));
    const nb::list caps = captures_of(fi.n_captures, [&](uint32_t c, udf_capture_info* ci) {
      return udf_module_filter_capture_info(m, i, c, ci);
    });
    nb::dict d;
    d["symbol"] = std::string(fi.symbol);
    d["source_name"] = std::string(fi.source_name ? fi.source_name : "");
    d["cache_key"] = std::string(fi.cache_key ? fi.cache_key : "");
    d["captures"] = caps;
    out.append(d);
  }
  return out;
}

// The capture types of the index's metric, by name (for Python numbers).
// The capture types of metric `metric` of module m, by name; nullopt when
// it has no such capture (the call then reports it).
std::optional<udf_capture_info> metric_capture_info(udf_module* m, const std::string& metric, const std::string& name) {
  size_t mi = 0;
  check(udf_module_find_metric(m, metric.c_str(), &mi));
  udf_metric_info info{};
  check(udf_module_metric_info(m, mi, &info));
  for (uint32_t c = 0; c < info.n_captures; ++c) {
    udf_capture_info ci{};
    check(udf_module_capture_info(m, mi, c, &ci));
    if (name == ci.name) return ci;
  }
  return std::nullopt;
}

// The capture types of filter `filter` of module m, by name; nullopt when the
// module has no such filter (the call then reports it).
std::optional<udf_capture_info> module_filter_capture_info(udf_module* m, const std::string& filter, const std::string& name) {
  size_t fi = 0;
  if (udf_module_find_filter(m, filter.c_str(), &fi) != UDF_OK) return std::nullopt;
  udf_filter_info f{};
  check(udf_module_filter_info(m, fi, &f));
  for (uint32_t c = 0; c < f.n_captures; ++c) {
    udf_capture_info ci{};
    check(udf_module_filter_capture_info(m, fi, c, &ci));
    if (name == ci.name) return ci;
  }
  return std::nullopt;
}

// The same for an index: its metric's captures, its module's filters'.
std::optional<udf_capture_info> capture_info(const Index& x, const std::string& name) {
  udf_index_info info{};
  check(udf_index_info_get(x.ix, &info));
  return metric_capture_info(x.module->m, info.metric, name);
}
std::optional<udf_capture_info> filter_capture_info(const Index& x, const std::string& filter, const std::string& name) {
  return module_filter_capture_info(x.module->m, filter, name);
}

struct Bindings {
  std::vector<std::string> names;
  std::vector<TensorArg> tensors;
  std::vector<udf_capture_binding> bind;

  template <class Info>
  Bindings(nb::dict captures, Info&& info) {
    names.reserve(captures.size());
    tensors.reserve(captures.size());  // no reallocation: bind[] points into it
    for (auto [key, value] : captures) {
      if (!nb::isinstance<nb::str>(key)) throw nb::type_error("captures: keys must be capture names (str)");
      names.push_back(nb::cast<std::string>(key));
      const std::string& name = names.back();
      udf_capture_binding b{};
      const bool is_bool = nb::isinstance<nb::bool_>(value);
      if (!is_bool && (nb::isinstance<nb::float_>(value) || nb::isinstance<nb::int_>(value))) {
        const double v = nb::cast<double>(value);
        std::optional<udf_capture_info> ci = info(name);
        const bool is_int = std::isfinite(v) && std::floor(v) == v && v >= -2147483648.0 && v <= 2147483647.0;
        if (ci && !ci->is_array && ci->type == UDF_DTYPE_I32 && !is_int)
          fail(UDF_ERROR_CAPTURE, "capture '" + name + "' is an i32 scalar; got " + nb::repr(value).c_str() +
                                      ", not an integer in the i32 range");
        b.f32 = static_cast<float>(v);
        b.i32 = is_int ? static_cast<int32_t>(v) : 0;
      } else {
        tensors.push_back(input_tensor(value, "capture '" + name + "'"));
        b.tensor = &tensors.back().t;
      }
      bind.push_back(b);
    }
    for (size_t i = 0; i < bind.size(); ++i) bind[i].name = names[i].c_str();
  }
};

nb::object wrap_module(nb::object runtime_obj, udf_module* m) {
  return nb::cast(new Module(std::move(runtime_obj), m), nb::rv_policy::take_ownership);
}
nb::object wrap_index(nb::object module_obj, udf_index* x) {
  return nb::cast(new Index(std::move(module_obj), x), nb::rv_policy::take_ownership);
}
nb::object wrap_sharded_index(nb::list modules, const std::vector<Runtime*>& rts, udf_index* x) {
  nb::list own;  // the caller's list may change later
  for (nb::handle m : modules) own.append(m);
  return nb::cast(new Index(std::move(own), rts, x), nb::rv_policy::take_ownership);
}

// A layout name ("vectors" / "lists", include/udf/runtime.hpp) as a
// udf_shard_layout; anything else is UDF_ERROR_INVALID_ARGUMENT.
udf_shard_layout layout_of(const std::string& name) {
  try {
    return udf::shard_layout_from_name(name);
  } catch (const udf::RuntimeError&) {
    fail(UDF_ERROR_INVALID_ARGUMENT, "shard_layout = '" + name + "' is neither 'vectors' nor 'lists'");
  }
}

// centroids: None, or n_lists x dim f32 as bytes (the Python side makes them);
// coarse_weights: None, or dim f32 as bytes; p.centroids and p.coarse_weights
// point into them, so they must outlive the call that takes p.
// shard_layout: "vectors" or "lists" (udf::shard_layout_from_name; a sharded build's).
udf_index_params index_params(uint32_t n_lists, uint32_t kmeans_iters, uint32_t kmeans_mesoclusters, uint64_t seed,
                              double balance, uint32_t max_train_rows, const std::optional<nb::bytes>& centroids,
                              const std::optional<nb::bytes>& coarse_weights, int64_t dim,
                              const std::string& shard_layout = "vectors") {
  udf_index_params p;
  udf_index_params_default(&p);
  p.shard_layout = static_cast<uint32_t>(layout_of(shard_layout));
  p.n_lists = n_lists;
  p.kmeans_iters = kmeans_iters;
  p.kmeans_mesoclusters = kmeans_mesoclusters;
  p.seed = seed;
  p.balance = balance;
  p.max_train_rows = max_train_rows;
  if (centroids) {
    const size_t want = size_t(n_lists) * size_t(dim) * sizeof(float);
    if (centroids->size() != want)
      fail(UDF_ERROR_INVALID_ARGUMENT, "centroids: " + std::to_string(centroids->size()) + " bytes; n_lists x dim f32 is " +
                                           std::to_string(want));
    p.centroids = static_cast<const float*>(centroids->data());
  }
  if (coarse_weights) {
    const size_t want = size_t(dim) * sizeof(float);
    if (coarse_weights->size() != want)
      fail(UDF_ERROR_INVALID_ARGUMENT, "coarse_weights: " + std::to_string(coarse_weights->size() / sizeof(float)) +
                                           " values; the data has dim " + std::to_string(dim));
    p.coarse_weights = static_cast<const float*>(coarse_weights->data());
  }
  return p;
}

}  // namespace

NB_MODULE(_ext, mod) {
  mod.doc() = "udf runtime bindings (low level; use the udf package). Contract: python/src/EXT_API.md";
  nb::register_exception_translator(translate);

  mod.attr("F32") = static_cast<int>(UDF_DTYPE_F32);
  mod.attr("F16") = static_cast<int>(UDF_DTYPE_F16);
  mod.attr("I8") = static_cast<int>(UDF_DTYPE_I8);
  mod.attr("U8") = static_cast<int>(UDF_DTYPE_U8);
  mod.attr("I32") = static_cast<int>(UDF_DTYPE_I32);
  mod.attr("I64") = static_cast<int>(UDF_DTYPE_I64);
  mod.attr("HOST") = static_cast<int>(UDF_HOST_DEVICE);

  mod.def("api_version", [] { return udf_runtime_api_version(); });
  mod.def("driver_version", [] {
    int32_t v = 0;
    check(udf_driver_version(&v));
    return v;
  });
  // The dropped handles still waiting for their runtimes (for the tests).
  mod.def("_dropped_waiting", [] {
    DroppedQueue& q = dropped_queue();
    std::lock_guard<std::mutex> lock(q.mu);
    return q.handles.size();
  });
  mod.def("status_name", [](int s) { return std::string(udf_status_name(static_cast<udf_status>(s))); });
  mod.def("dtype_name", [](int t) { return std::string(dtype_label(static_cast<udf_dtype>(t))); });
  // udf_index_file_from_faiss / _cuvs: another library's index file as an index file, GIL released.
  using FromFile = udf_status (*)(const char*, const char*, const char*, const char*);
  auto to_index_file = [](FromFile from) {
    return [from](const std::string& path, const std::string& metric, const std::string& cache_key,
                  const std::string& out_path) {
      udf_status s;
      {
        nb::gil_scoped_release release;
        s = from(path.c_str(), metric.c_str(), cache_key.c_str(), out_path.c_str());
      }
      check(s);
    };
  };
  mod.def("faiss_to_index_file", to_index_file(&udf_index_file_from_faiss), "faiss_path"_a, "metric"_a, "cache_key"_a,
          "out_path"_a);
  mod.def("cuvs_to_index_file", to_index_file(&udf_index_file_from_cuvs), "cuvs_path"_a, "metric"_a, "cache_key"_a,
          "out_path"_a);

  nb::class_<Runtime>(mod, "Runtime")
      .def(nb::init<int32_t>(), "device"_a = 0)
      .def_ro("device", &Runtime::device)
      .def("device_info",
           [](Runtime& r) {
             udf_device_info di{};
             check(udf_runtime_device_info(r.get(), &di));
             return kw("name", std::string(di.name), "ordinal", di.ordinal, "arch", di.arch,
                             "sm_count", di.sm_count, "total_memory", di.total_memory,
                             "max_shared_per_block", di.max_shared_per_block);
           })
      .def("load_module_file",
           [](nb::object self, const std::string& path) {
             Runtime& r = nb::cast<Runtime&>(self);
             udf_runtime* rt = r.get();
             udf_module* m = nullptr;
             locked_call(r, [&] { return udf_module_load_file(rt, path.c_str(), &m); });
             return wrap_module(self, m);
           },
           "path"_a)
      .def("load_module_bytes",
           [](nb::object self, nb::bytes data, const std::string& name) {
             Runtime& r = nb::cast<Runtime&>(self);
             udf_runtime* rt = r.get();
             udf_module* m = nullptr;
             const void* p = data.c_str();
             const size_t n = data.size();
             locked_call(r, [&] { return udf_module_load_memory(rt, p, n, name.c_str(), &m); });
             return wrap_module(self, m);
           },
           "data"_a, "name"_a)
      .def("link",
           [](nb::object self, std::vector<nb::bytes> artifacts, std::vector<std::string> names, bool on_demand,
              uint32_t prefetch_k, uint32_t max_k) {
             Runtime& r = nb::cast<Runtime&>(self);
             udf_runtime* rt = r.get();
             if (names.size() != artifacts.size())
               throw nb::value_error("link: names and artifacts differ in length");
             std::vector<udf_artifact_source> src(artifacts.size());
             for (size_t i = 0; i < artifacts.size(); ++i)
               src[i] = udf_artifact_source{nullptr, artifacts[i].c_str(), artifacts[i].size(), names[i].c_str()};
             udf_link_options o;
             udf_link_options_default(&o);
             o.on_demand = on_demand ? 1 : 0;
             o.prefetch_k = prefetch_k;
             o.max_k = max_k;
             udf_module* m = nullptr;
             locked_call(r, [&] { return udf_module_link_ex(rt, src.data(), src.size(), &o, &m); });
             return wrap_module(self, m);
           },
           "artifacts"_a, "names"_a, "on_demand"_a = false, "prefetch_k"_a = 32, "max_k"_a = 0)
      .def("device_array",
           [](Runtime& r, nb::handle host) {
             TensorArg h = input_tensor(host, "host");
             udf_runtime* rt = r.get();
             udf_device_array* a = nullptr;
             locked_call(r, [&] { return udf_device_array_create(rt, &h.t, &a); });
             return new DeviceArray(a);
           },
           "host"_a, nb::rv_policy::take_ownership)
      .def("close", [](Runtime& r) {
        destroy_dropped();
        if (r.live_modules > 0)
          fail(UDF_ERROR_INVALID_ARGUMENT, "the runtime still has " + std::to_string(r.live_modules) +
                                               " loaded module(s); drop them (and their indexes) first");
        nb::gil_scoped_release g;
        RuntimeLocks lock({&r});
        r.destroy();
      });

  nb::class_<DeviceArray>(mod, "DeviceArray")
      .def_prop_ro("tensor",
                   [](const DeviceArray& d) {
                     return nb::make_tuple(reinterpret_cast<uintptr_t>(d.t.data), d.t.device, static_cast<int>(d.t.dtype),
                                           d.t.rows, d.t.cols, d.t.row_stride);
                   })
      .def_prop_ro("device", [](const DeviceArray& d) { return d.t.device; })
      .def_prop_ro("nbytes",
                   [](const DeviceArray& d) { return int64_t(d.t.rows * d.t.cols * int64_t(udf_dtype_size(d.t.dtype))); });

  nb::class_<Module>(mod, "Module")
      .def_prop_ro("runtime", [](Module& m) { return m.runtime_obj; })
      .def("metrics", [](Module& m) { return metrics_of(m.m); })
      .def("filters", [](Module& m) { return filters_of(m.m); })
      .def("manifest_json", [](Module& m) { return std::string(udf_module_manifest_json(m.m)); })
      .def("cache_key", [](Module& m) { return std::string(udf_module_cache_key(m.m)); })
      .def(
          "exact_search",
          [](Module& m, const std::string& metric, nb::handle dataset, nb::handle queries, nb::handle candidates,
             nb::handle out_distances, nb::handle out_ids, uint32_t k, nb::dict captures, uint32_t queries_per_item,
             uint32_t max_batch, std::optional<std::string> filter, nb::dict filter_captures,
             std::optional<uintptr_t> after_stream) {
            // udf_exact_search, or udf_refine when `candidates` is given;
            // after_stream: a CUstream the runtime's stream waits for first
            // (udf_runtime_wait_stream), instead of the caller synchronizing it.
            TensorArg d = input_tensor(dataset, "dataset");
            TensorArg q = input_tensor(queries, "queries");
            std::optional<TensorArg> c;
            if (!candidates.is_none()) c = input_tensor(candidates, "candidates");
            TensorArg od = output_tensor(out_distances, "out_distances");
            TensorArg oi = output_tensor(out_ids, "out_ids");
            Bindings metric_caps(captures, [&](const std::string& name) { return metric_capture_info(m.m, metric, name); });
            Bindings filter_caps(filter_captures, [&](const std::string& name) {
              return filter ? module_filter_capture_info(m.m, *filter, name) : std::nullopt;
            });
            udf_search_params p;
            udf_search_params_default(&p);
            p.k = k;
            p.queries_per_item = queries_per_item;
            p.max_batch = max_batch;
            p.captures = metric_caps.bind.data();
            p.n_captures = metric_caps.bind.size();
            p.filter = filter ? filter->c_str() : nullptr;
            p.filter_captures = filter_caps.bind.data();
            p.n_filter_captures = filter_caps.bind.size();
            locked_call(*m.runtime, [&] {
              if (after_stream) {
                const udf_status w = udf_runtime_wait_stream(m.runtime->get(), reinterpret_cast<void*>(*after_stream));
                if (w != UDF_OK) return w;
              }
              return c ? udf_refine(m.m, metric.c_str(), &d.t, &q.t, &c->t, &p, &od.t, &oi.t)
                       : udf_exact_search(m.m, metric.c_str(), &d.t, &q.t, &p, &od.t, &oi.t);
            });
          },
          "metric"_a, "dataset"_a, "queries"_a, "candidates"_a.none(), "out_distances"_a, "out_ids"_a, nb::kw_only(), "k"_a,
          "captures"_a = nb::dict(), "queries_per_item"_a = 0, "max_batch"_a = 0, "filter"_a = nb::none(),
          "filter_captures"_a = nb::dict(), "after_stream"_a = nb::none());

  nb::class_<Index>(mod, "Index")
      .def_static(
          "build",
          [](nb::object module_obj, const std::string& metric, nb::handle data, nb::handle ids, uint32_t n_lists,
             uint32_t kmeans_iters, uint32_t kmeans_mesoclusters, uint64_t seed, double balance,
             uint32_t max_train_rows,
             std::optional<nb::bytes> centroids, std::optional<nb::bytes> coarse_weights) {
            Module& m = nb::cast<Module&>(module_obj);
            TensorArg d = input_tensor(data, "data");
            std::optional<TensorArg> i;
            if (!ids.is_none()) i = input_tensor(ids, "ids");
            const udf_index_params p =
                index_params(n_lists, kmeans_iters, kmeans_mesoclusters, seed, balance, max_train_rows, centroids, coarse_weights,
                             d.t.cols);
            udf_index* x = nullptr;
            locked_call(*m.runtime, [&] { return udf_index_build(m.m, metric.c_str(), &d.t, i ? &i->t : nullptr, &p, &x); });
            return wrap_index(module_obj, x);
          },
          "module"_a, "metric"_a, "data"_a, "ids"_a = nb::none(), nb::kw_only(), "n_lists"_a = 1024,
          "kmeans_iters"_a = 20, "kmeans_mesoclusters"_a = 0, "seed"_a = 1234, "balance"_a = 2.0, "max_train_rows"_a = 0,
          "centroids"_a = nb::none(), "coarse_weights"_a = nb::none())
      .def_static(
          "load",
          [](nb::object module_obj, const std::string& path) {
            Module& m = nb::cast<Module&>(module_obj);
            udf_index* x = nullptr;
            locked_call(*m.runtime, [&] { return udf_index_load(m.m, path.c_str(), &x); });
            return wrap_index(module_obj, x);
          },
          "module"_a, "path"_a)
      .def_static(
          "load_faiss",
          [](nb::object module_obj, const std::string& metric, const std::string& faiss_path) {
            Module& m = nb::cast<Module&>(module_obj);
            udf_index* x = nullptr;
            locked_call(*m.runtime, [&] { return udf_index_load_faiss(m.m, metric.c_str(), faiss_path.c_str(), &x); });
            return wrap_index(module_obj, x);
          },
          "module"_a, "metric"_a, "faiss_path"_a)
      .def_static(
          "load_cuvs",
          [](nb::object module_obj, const std::string& metric, const std::string& cuvs_path) {
            Module& m = nb::cast<Module&>(module_obj);
            udf_index* x = nullptr;
            locked_call(*m.runtime, [&] { return udf_index_load_cuvs(m.m, metric.c_str(), cuvs_path.c_str(), &x); });
            return wrap_index(module_obj, x);
          },
          "module"_a, "metric"_a, "cuvs_path"_a)
      .def_static(
          "build_sharded",
          [](nb::list modules, const std::string& metric, nb::handle data, nb::handle ids, uint32_t n_lists,
             uint32_t kmeans_iters, uint32_t kmeans_mesoclusters, uint64_t seed, double balance,
             uint32_t max_train_rows,
             std::optional<nb::bytes> centroids, std::optional<nb::bytes> coarse_weights, const std::string& shard_layout) {
            std::vector<Runtime*> rts;
            const std::vector<udf_module*> ms = shard_modules_of(modules, rts);
            TensorArg d = input_tensor(data, "data");
            std::optional<TensorArg> i;
            if (!ids.is_none()) i = input_tensor(ids, "ids");
            const udf_index_params p =
                index_params(n_lists, kmeans_iters, kmeans_mesoclusters, seed, balance, max_train_rows, centroids, coarse_weights,
                             d.t.cols, shard_layout);
            udf_index* x = nullptr;
            locked_call(lock_order(rts), [&] {
              return udf_index_build_sharded(ms.data(), ms.size(), metric.c_str(), &d.t, i ? &i->t : nullptr, &p, &x);
            });
            return wrap_sharded_index(modules, rts, x);
          },
          "modules"_a, "metric"_a, "data"_a, "ids"_a = nb::none(), nb::kw_only(), "n_lists"_a = 1024,
          "kmeans_iters"_a = 20, "kmeans_mesoclusters"_a = 0, "seed"_a = 1234, "balance"_a = 2.0, "max_train_rows"_a = 0,
          "centroids"_a = nb::none(), "coarse_weights"_a = nb::none(), "shard_layout"_a = "vectors")
      .def_static(
          "build_chunked",
          [](nb::list modules, const std::string& metric, size_t n_chunks, nb::callable get, int64_t dim, uint32_t n_lists,
             uint32_t kmeans_iters, uint32_t kmeans_mesoclusters, uint64_t seed, double balance,
             uint32_t max_train_rows,
             std::optional<nb::bytes> centroids, std::optional<nb::bytes> coarse_weights, const std::string& shard_layout) {
            std::vector<Runtime*> rts;
            const std::vector<udf_module*> ms = shard_modules_of(modules, rts);
            if ((centroids || coarse_weights) && dim < 1)
              fail(UDF_ERROR_INVALID_ARGUMENT, "centroids or coarse_weights given without their width (dim)");
            const udf_index_params p = index_params(n_lists, kmeans_iters, kmeans_mesoclusters, seed, balance, max_train_rows,
                                                    centroids, coarse_weights, dim, shard_layout);
            // get(chunk) -> (data, ids or None); what it returned stays alive until the next call.
            struct Call {
              nb::callable get;
              nb::object held;
              std::optional<TensorArg> data, ids;
              std::exception_ptr error;
            } call{std::move(get), nb::none(), std::nullopt, std::nullopt, nullptr};
            udf_chunk_fn fn = [](void* user, size_t chunk, udf_tensor* data, udf_tensor* ids) -> int {
              auto* c = static_cast<Call*>(user);
              nb::gil_scoped_acquire gil;
              try {
                c->data.reset();
                c->ids.reset();
                c->held = c->get(chunk);
                nb::tuple t = nb::cast<nb::tuple>(c->held);
                if (t.size() != 2) throw nb::type_error("build_chunked: get(chunk) must return (data, ids or None)");
                c->data = input_tensor(t[0], "chunk " + std::to_string(chunk));
                if (!t[1].is_none()) c->ids = input_tensor(t[1], "chunk " + std::to_string(chunk) + " ids");
                *data = c->data->t;
                if (c->ids) *ids = c->ids->t;
                return 0;
              } catch (...) {
                c->error = std::current_exception();
                return 1;
              }
            };
            udf_index* x = nullptr;
            try {
              locked_call(lock_order(rts), [&] {
                return udf_index_build_chunked(ms.data(), ms.size(), metric.c_str(), n_chunks, fn, &call, &p, &x);
              });
            } catch (...) {
              if (call.error) std::rethrow_exception(call.error);  // the callback's own exception
              throw;
            }
            if (ms.size() == 1) return wrap_index(nb::borrow(modules[0]), x);
            return wrap_sharded_index(modules, rts, x);
          },
          "modules"_a, "metric"_a, "n_chunks"_a, "get"_a, nb::kw_only(), "dim"_a = -1, "n_lists"_a = 1024,
          "kmeans_iters"_a = 20, "kmeans_mesoclusters"_a = 0, "seed"_a = 1234, "balance"_a = 2.0, "max_train_rows"_a = 0,
          "centroids"_a = nb::none(), "coarse_weights"_a = nb::none(), "shard_layout"_a = "vectors")
      .def_static(
          "load_sharded",
          [](nb::list modules, const std::string& path, const std::string& shard_layout) {
            std::vector<Runtime*> rts;
            const std::vector<udf_module*> ms = shard_modules_of(modules, rts);
            const uint32_t layout = static_cast<uint32_t>(layout_of(shard_layout));
            udf_index* x = nullptr;
            locked_call(lock_order(rts), [&] {
              return udf_index_load_sharded_layout(ms.data(), ms.size(), path.c_str(), layout, &x);
            });
            return wrap_sharded_index(modules, rts, x);
          },
          "modules"_a, "path"_a, nb::kw_only(), "shard_layout"_a = "vectors")
      .def(
          "with_metric",
          [](Index& self, nb::object module_obj, const std::string& metric) {
            Module& m = nb::cast<Module&>(module_obj);
            if (m.runtime != self.module->runtime)
              fail(UDF_ERROR_INVALID_ARGUMENT, "the module was loaded by another runtime than the index's");
            udf_index* x = nullptr;
            // A sharded index: the runtime says UDF_ERROR_UNSUPPORTED.
            locked_call(self.runtimes, [&] { return udf_index_with_metric(self.ix, m.m, metric.c_str(), &x); });
            return wrap_index(module_obj, x);
          },
          "module"_a, "metric"_a)
      .def_prop_ro("module", [](Index& x) { return x.module_obj; })
      .def("shards",
           [](Index& x) {
             size_t n = 0;
             check(udf_index_shard_count(x.ix, &n));
             nb::list out;
             for (size_t i = 0; i < n; ++i) {
               udf_shard_info si{};
               check(udf_index_shard_info(x.ix, i, &si));
               const char* layout = udf::shard_layout_name(si.layout);
               out.append(kw("device", si.device, "list_begin", si.list_begin, "list_end", si.list_end, "size", si.size,
                             "layout", std::string(layout ? layout : "unknown")));
             }
             return out;
           })
      .def("shard_transport",
           [](Index& x) {
             const char* t = udf_index_shard_transport(x.ix);
             if (!t) fail(UDF_ERROR_INVALID_ARGUMENT, udf_last_error());
             return std::string(t);
           })
      .def(
          "add",
          [](Index& x, nb::handle data, nb::handle ids) {
            TensorArg d = input_tensor(data, "data");
            std::optional<TensorArg> i;
            if (!ids.is_none()) i = input_tensor(ids, "ids");
            locked_call(x.runtimes, [&] { return udf_index_add(x.ix, &d.t, i ? &i->t : nullptr); });
          },
          "data"_a, "ids"_a = nb::none())
      .def(
          "save", [](Index& x, const std::string& path) { locked_call(x.runtimes, [&] { return udf_index_save(x.ix, path.c_str()); }); },
          "path"_a)
      .def("info",
           [](Index& x) {
             udf_index_info i{};
             check(udf_index_info_get(x.ix, &i));
             return kw("metric", std::string(i.metric), "elem", static_cast<int>(i.elem), "dim", i.dim,
                             "n_lists", i.n_lists, "max_list_size", i.max_list_size, "size", i.size);
           })
      .def("list_sizes",
           [](Index& x) {
             udf_index_info i{};
             check(udf_index_info_get(x.ix, &i));
             std::vector<uint32_t> sizes(i.n_lists);
             check(udf_index_list_sizes(x.ix, sizes.data(), sizes.size()));
             return sizes;
           })
      .def("centroids",
           [](Index& x) {  // n_lists x dim f32, row-major, as bytes
             udf_index_info i{};
             check(udf_index_info_get(x.ix, &i));
             std::vector<float> c(size_t(i.n_lists) * i.dim);
             check(udf_index_centroids(x.ix, c.data(), c.size()));
             return nb::bytes(reinterpret_cast<const char*>(c.data()), c.size() * sizeof(float));
           })
      .def("coarse_weights",
           [](Index& x) -> std::optional<nb::bytes> {  // dim f32 as bytes, or None
             size_t n = 0;
             check(udf_index_coarse_weights(x.ix, nullptr, 0, &n));
             if (n == 0) return std::nullopt;
             std::vector<float> w(n);
             check(udf_index_coarse_weights(x.ix, w.data(), w.size(), &n));
             return nb::bytes(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float));
           })
      .def(
          "search",
          [](Index& x, nb::handle queries, nb::handle out_distances, nb::handle out_ids, uint32_t k, uint32_t n_probes,
             nb::dict captures, uint32_t queries_per_item, uint32_t max_batch, std::optional<std::string> filter,
             nb::dict filter_captures, std::optional<uintptr_t> after_stream) {
            // after_stream (one-device indexes): as for Module.exact_search.
            if (after_stream && x.runtimes.size() != 1)
              throw nb::value_error("search: after_stream is for an index on one device");
            TensorArg q = input_tensor(queries, "queries");
            TensorArg od = output_tensor(out_distances, "out_distances");
            TensorArg oi = output_tensor(out_ids, "out_ids");
            Bindings metric_caps(captures, [&](const std::string& name) { return capture_info(x, name); });
            Bindings filter_caps(filter_captures, [&](const std::string& name) {
              return filter ? filter_capture_info(x, *filter, name) : std::nullopt;
            });
            udf_search_params p;
            udf_search_params_default(&p);
            p.k = k;
            p.n_probes = n_probes;
            p.queries_per_item = queries_per_item;
            p.max_batch = max_batch;
            p.captures = metric_caps.bind.data();
            p.n_captures = metric_caps.bind.size();
            p.filter = filter ? filter->c_str() : nullptr;
            p.filter_captures = filter_caps.bind.data();
            p.n_filter_captures = filter_caps.bind.size();
            locked_call(x.runtimes, [&] {
              if (after_stream) {
                const udf_status w = udf_runtime_wait_stream(x.runtimes[0]->get(), reinterpret_cast<void*>(*after_stream));
                if (w != UDF_OK) return w;
              }
              return udf_index_search(x.ix, &q.t, &p, &od.t, &oi.t);
            });
          },
          "queries"_a, "out_distances"_a, "out_ids"_a, nb::kw_only(), "k"_a, "n_probes"_a, "captures"_a = nb::dict(),
          "queries_per_item"_a = 0, "max_batch"_a = 0, "filter"_a = nb::none(), "filter_captures"_a = nb::dict(),
          "after_stream"_a = nb::none())
      .def("set_stage_timing", [](Index& x, bool on) { check(udf_index_set_stage_timing(x.ix, on ? 1 : 0)); }, "on"_a)
      .def("last_stats", [](Index& x) {
        udf_search_stats s{};
        check(udf_index_last_search_stats(x.ix, &s));
        udf_search_work w{};
        check(udf_index_last_search_work(x.ix, &w));
        return kw("total_ms", s.total_ms, "coarse_ms", s.coarse_ms, "schedule_ms", s.schedule_ms,
                        "scan_ms", s.scan_ms, "merge_ms", s.merge_ms, "chunks", s.chunks,
                        "queries_per_item", s.queries_per_item, "work_items", s.work_items, "scored", w.scored,
                        "list_bytes_read", w.list_bytes_read);
      });
}
