// Thin RAII C++ wrapper over the C API in udf/runtime.h.  Every failing call
// throws udf::RuntimeError carrying the status and udf_last_error().
#pragma once

#include <cstdint>
#include <stdexcept>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "udf/runtime.h"

namespace udf {

class RuntimeError : public std::runtime_error {
 public:
  RuntimeError(udf_status s, const std::string& what) : std::runtime_error(what), status_(s) {}
  udf_status status() const noexcept { return status_; }

 private:
  udf_status status_;
};

inline void check(udf_status s) {
  if (s != UDF_OK) throw RuntimeError(s, std::string(udf_status_name(s)) + ": " + udf_last_error());
}

namespace detail {
template <class T, void (*Destroy)(T*)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T* p) : p_(p) {}
  Handle(Handle&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  void reset() {
    if (p_) Destroy(p_);
    p_ = nullptr;
  }
  T* get() const noexcept { return p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
};
}  // namespace detail

/// A sharded index's layout by name: "lists" (UDF_SHARD_BY_LISTS: each device
/// keeps a contiguous range of whole lists) or "vectors" (UDF_SHARD_BY_VECTORS,
/// the default: each device keeps an equal part of every list), the names
/// udf-run's --shard-layout and Python's shard_layout= take.  Anything else
/// throws RuntimeError(UDF_ERROR_INVALID_ARGUMENT).
inline udf_shard_layout shard_layout_from_name(const std::string& name) {
  if (name == "vectors") return UDF_SHARD_BY_VECTORS;
  if (name == "lists") return UDF_SHARD_BY_LISTS;
  throw RuntimeError(UDF_ERROR_INVALID_ARGUMENT, "UDF_ERROR_INVALID_ARGUMENT: shard layout '" + name +
                                                     "' is neither 'vectors' nor 'lists'");
}
/// "lists" or "vectors" for a udf_shard_layout (UDF_SHARD_DEFAULT: "vectors");
/// nullptr for a value that is none.
inline const char* shard_layout_name(uint32_t layout) noexcept {
  switch (layout) {
    case UDF_SHARD_BY_LISTS: return "lists";
    case UDF_SHARD_DEFAULT:
    case UDF_SHARD_BY_VECTORS: return "vectors";
    default: return nullptr;
  }
}

/// A host or device 2-D view (row-major, row_stride in elements).
inline udf_tensor tensor(const void* data, udf_dtype t, int64_t rows, int64_t cols, int32_t device = UDF_HOST_DEVICE,
                         int64_t row_stride = 0) {
  return udf_tensor{const_cast<void*>(data), device, t, rows, cols, row_stride};
}

class Runtime {
 public:
  explicit Runtime(int32_t ordinal = 0) {
    udf_runtime* p = nullptr;
    check(udf_runtime_create(ordinal, &p));
    h_ = decltype(h_)(p);
  }
  udf_runtime* get() const noexcept { return h_.get(); }
  udf_device_info device_info() const {
    udf_device_info i{};
    check(udf_runtime_device_info(h_.get(), &i));
    return i;
  }

 private:
  detail::Handle<udf_runtime, udf_runtime_destroy> h_;
};

class Module {
 public:
  static Module load_file(Runtime& rt, const std::string& path) {
    udf_module* p = nullptr;
    check(udf_module_load_file(rt.get(), path.c_str(), &p));
    return Module(p);
  }
  static Module load_memory(Runtime& rt, const void* data, size_t size, const std::string& name = "<memory>") {
    udf_module* p = nullptr;
    check(udf_module_load_memory(rt.get(), data, size, name.c_str(), &p));
    return Module(p);
  }
  udf_module* get() const noexcept { return h_.get(); }
  std::vector<udf_metric_info> metrics() const {
    size_t n = 0;
    check(udf_module_metric_count(h_.get(), &n));
    std::vector<udf_metric_info> v(n);
    for (size_t i = 0; i < n; ++i) check(udf_module_metric_info(h_.get(), i, &v[i]));
    return v;
  }
  std::vector<udf_capture_info> captures(size_t metric) const {
    udf_metric_info m{};
    check(udf_module_metric_info(h_.get(), metric, &m));
    std::vector<udf_capture_info> v(m.n_captures);
    for (size_t i = 0; i < v.size(); ++i) check(udf_module_capture_info(h_.get(), metric, i, &v[i]));
    return v;
  }
  /// The capture metric `metric` declares as its coarse weights, or -1
  /// (udf_module_metric_coarse_weights): a build must be given its value.
  int32_t coarse_weights_capture(size_t metric) const {
    int32_t c = -1;
    check(udf_module_metric_coarse_weights(h_.get(), metric, &c));
    return c;
  }

 private:
  explicit Module(udf_module* p) : h_(p) {}
  detail::Handle<udf_module, udf_module_destroy> h_;
};

class Index {
 public:
  static Index build(Module& m, const std::string& metric, const udf_tensor& data, const udf_index_params& params,
                     const udf_tensor* ids = nullptr) {
    udf_index* p = nullptr;
    check(udf_index_build(m.get(), metric.c_str(), &data, ids, &params, &p));
    return Index(p);
  }
  static Index load(Module& m, const std::string& path) {
    udf_index* p = nullptr;
    check(udf_index_load(m.get(), path.c_str(), &p));
    return Index(p);
  }
  /// A FAISS IndexIVFFlat file with its centroids and lists as they are
  /// (udf_index_load_faiss), searched with metric `metric` of `m`.
  static Index load_faiss(Module& m, const std::string& metric, const std::string& faiss_path) {
    udf_index* p = nullptr;
    check(udf_index_load_faiss(m.get(), metric.c_str(), faiss_path.c_str(), &p));
    return Index(p);
  }
  /// A cuVS IVF-Flat file with its centroids and lists as they are
  /// (udf_index_load_cuvs), searched with metric `metric` of `m`.
  static Index load_cuvs(Module& m, const std::string& metric, const std::string& cuvs_path) {
    udf_index* p = nullptr;
    check(udf_index_load_cuvs(m.get(), metric.c_str(), cuvs_path.c_str(), &p));
    return Index(p);
  }
  /// An index over several GPUs (runtime.h, "several GPUs"): modules[i] is the
  /// same module loaded by the Runtime of the i-th device; modules[0]'s device
  /// is the index's home.  A device listed twice may pass the same Module twice.
  /// params.shard_layout says how the devices split the vectors (a
  /// udf_shard_layout; 0, the default, is by vectors); the overload below
  /// takes it beside the params.
  static Index build_sharded(const std::vector<Module*>& modules, const std::string& metric, const udf_tensor& data,
                             const udf_index_params& params, const udf_tensor* ids = nullptr) {
    const std::vector<udf_module*> ms = handles(modules);
    udf_index* p = nullptr;
    check(udf_index_build_sharded(ms.data(), ms.size(), metric.c_str(), &data, ids, &params, &p));
    return Index(p);
  }
  static Index build_sharded(const std::vector<Module*>& modules, const std::string& metric, const udf_tensor& data,
                             const udf_index_params& params, udf_shard_layout layout, const udf_tensor* ids = nullptr) {
    udf_index_params q = params;
    q.shard_layout = static_cast<uint32_t>(layout);
    return build_sharded(modules, metric, data, q, ids);
  }
  /// udf_index_build_chunked: source(chunk, data, ids) sets the chunk's rows
  /// (and its ids, or leaves them); an exception it throws stops the build
  /// and is rethrown here.  One module: a one-GPU index; several: sharded, as
  /// params.shard_layout says.
  using ChunkSource = std::function<void(size_t chunk, udf_tensor& data, udf_tensor& ids)>;
  static Index build_chunked(const std::vector<Module*>& modules, const std::string& metric, size_t n_chunks,
                             const ChunkSource& source, const udf_index_params& params) {
    struct Call {
      const ChunkSource* source;
      std::exception_ptr error;
    } call{&source, nullptr};
    udf_chunk_fn fn = [](void* user, size_t chunk, udf_tensor* data, udf_tensor* ids) -> int {
      auto* c = static_cast<Call*>(user);
      try {
        (*c->source)(chunk, *data, *ids);
        return 0;
      } catch (...) {
        c->error = std::current_exception();
        return 1;
      }
    };
    const std::vector<udf_module*> ms = handles(modules);
    udf_index* p = nullptr;
    const udf_status s = udf_index_build_chunked(ms.data(), ms.size(), metric.c_str(), n_chunks, fn, &call, &params, &p);
    if (call.error) std::rethrow_exception(call.error);
    check(s);
    return Index(p);
  }
  /// Reads a file written by save() (by a one-GPU or a sharded index, of
  /// either layout) onto the modules' devices, split as `layout` says
  /// (udf_index_load_sharded_layout; UDF_SHARD_DEFAULT: by vectors).
  static Index load_sharded(const std::vector<Module*>& modules, const std::string& path,
                            udf_shard_layout layout = UDF_SHARD_DEFAULT) {
    const std::vector<udf_module*> ms = handles(modules);
    udf_index* p = nullptr;
    check(udf_index_load_sharded_layout(ms.data(), ms.size(), path.c_str(), static_cast<uint32_t>(layout), &p));
    return Index(p);
  }
  void add(const udf_tensor& data, const udf_tensor* ids = nullptr) { check(udf_index_add(h_.get(), &data, ids)); }
  void save(const std::string& path) const { check(udf_index_save(h_.get(), path.c_str())); }
  udf_index_info info() const {
    udf_index_info i{};
    check(udf_index_info_get(h_.get(), &i));
    return i;
  }
  /// n_lists x dim f32, row-major: what udf_index_params.centroids takes.
  std::vector<float> centroids() const {
    const udf_index_info i = info();
    std::vector<float> c(size_t(i.n_lists) * i.dim);
    check(udf_index_centroids(h_.get(), c.data(), c.size()));
    return c;
  }
  /// The coarse weights the index was built with (udf_index_params.coarse_weights): dim f32, or empty.
  std::vector<float> coarse_weights() const {
    size_t n = 0;
    check(udf_index_coarse_weights(h_.get(), nullptr, 0, &n));
    std::vector<float> w(n);
    if (n) check(udf_index_coarse_weights(h_.get(), w.data(), w.size(), &n));
    return w;
  }
  void search(const udf_tensor& queries, const udf_search_params& params, const udf_tensor& out_distances,
              const udf_tensor& out_ids) {
    check(udf_index_search(h_.get(), &queries, &params, &out_distances, &out_ids));
  }
  udf_search_stats last_stats() const {
    udf_search_stats s{};
    check(udf_index_last_search_stats(h_.get(), &s));
    return s;
  }
  /// Shards: 1 for a one-GPU index (its info: the whole index).  A shard's
  /// lists are [list_begin, list_end): by lists a contiguous range, by
  /// vectors every list (0 .. n_lists; it holds an equal part of each).
  size_t shard_count() const {
    size_t n = 0;
    check(udf_index_shard_count(h_.get(), &n));
    return n;
  }
  udf_shard_info shard_info(size_t shard) const {
    udf_shard_info i{};
    check(udf_index_shard_info(h_.get(), shard, &i));
    return i;
  }
  std::vector<udf_shard_info> shards() const {
    std::vector<udf_shard_info> v(shard_count());
    for (size_t i = 0; i < v.size(); ++i) v[i] = shard_info(i);
    return v;
  }
  /// How its shards split the vectors: UDF_SHARD_BY_LISTS or
  /// UDF_SHARD_BY_VECTORS (a one-GPU index: by lists, its one shard every list).
  udf_shard_layout shard_layout() const { return static_cast<udf_shard_layout>(shard_info(0).layout); }
  /// How the shards' top-k reach the home device: "nccl", "peer" or "none" (one shard).
  std::string shard_transport() const {
    const char* t = udf_index_shard_transport(h_.get());
    if (!t)
      throw RuntimeError(UDF_ERROR_INVALID_ARGUMENT,
                         "UDF_ERROR_INVALID_ARGUMENT: udf_index_shard_transport gave NULL (no index)");
    return t;
  }
  udf_index* get() const noexcept { return h_.get(); }

 private:
  explicit Index(udf_index* p) : h_(p) {}
  static std::vector<udf_module*> handles(const std::vector<Module*>& modules) {
    std::vector<udf_module*> ms;
    ms.reserve(modules.size());
    for (size_t i = 0; i < modules.size(); ++i) {
      if (!modules[i])
        throw RuntimeError(UDF_ERROR_INVALID_ARGUMENT,
                           "UDF_ERROR_INVALID_ARGUMENT: modules[" + std::to_string(i) + "] is null");
      ms.push_back(modules[i]->get());
    }
    return ms;
  }
  detail::Handle<udf_index, udf_index_destroy> h_;
};

}  // namespace udf
