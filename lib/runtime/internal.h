// Internal state behind the opaque handles of udf/runtime.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuda_dl.h"
#include "host_pool.h"
#include "link_api.h"
#include "runtime_error.h"
#include "udf/artifact/module.h"
#include "udf/runtime.h"

namespace udf::rt {

/// Makes a context current for the scope (push/pop: the caller's current
/// context is restored).
class CtxGuard {
 public:
  explicit CtxGuard(CUcontext c) { CU(cuCtxPushCurrent, c); }
  ~CtxGuard() {
    CUcontext c;
    cuda().cuCtxPopCurrent(&c);
  }
  CtxGuard(const CtxGuard&) = delete;
  CtxGuard& operator=(const CtxGuard&) = delete;
};

/// Device memory, freed on destruction (the owning context must be current).
class DevBuf {
 public:
  DevBuf() = default;
  DevBuf(DevBuf&& o) noexcept : p_(std::exchange(o.p_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}
  DevBuf& operator=(DevBuf&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, 0);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~DevBuf() { release(); }
  void release() noexcept {
    if (p_) cuda().cuMemFree(p_);
    p_ = 0;
    bytes_ = 0;
  }
  void alloc(size_t n, const char* what) {
    release();
    CUdeviceptr p = 0;
    cu_check(cuda().cuMemAlloc(&p, n ? n : 16), "cuMemAlloc", std::string("allocating ") + std::to_string(n) + " bytes for " + what);
    p_ = p;
    bytes_ = n ? n : 16;
  }
  void ensure(size_t n, const char* what) {
    if (bytes_ < n) alloc(n + n / 4, what);
  }
  CUdeviceptr get() const { return p_; }
  template <class T> T* as() const { return reinterpret_cast<T*>(static_cast<uintptr_t>(p_)); }
  size_t bytes() const { return bytes_; }

 private:
  CUdeviceptr p_ = 0;
  size_t bytes_ = 0;
};

/// Page-locked host memory (fast, asynchronous copies), freed on destruction.
class PinnedBuf {
 public:
  PinnedBuf() = default;
  PinnedBuf(const PinnedBuf&) = delete;
  PinnedBuf& operator=(const PinnedBuf&) = delete;
  ~PinnedBuf() { release(); }
  void release() noexcept {
    if (p_) cuda().cuMemFreeHost(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  /// At least n bytes; the contents are not kept when it grows.  Mapped
  /// into the device's address space too (device()).
  void ensure(size_t n, const char* what) {
    if (bytes_ >= n) return;
    release();
    const size_t want = n + n / 4;
    cu_check(cuda().cuMemHostAlloc(&p_, want ? want : 16, CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc",
             std::string("allocating ") + std::to_string(want) + " bytes of pinned memory for " + what);
    bytes_ = want ? want : 16;
    dev_ = 0;
    const CUresult r = cuda().cuMemHostGetDevicePointer(&dev_, p_, 0);
    if (r != CUDA_SUCCESS) {
      release();
      cu_check(r, "cuMemHostGetDevicePointer", std::string("mapping pinned memory for ") + what);
    }
  }
  template <class T> T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }
  /// The same memory as the device sees it (kernels write it directly).
  CUdeviceptr device() const { return dev_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
  CUdeviceptr dev_ = 0;
};

/// A CUDA event (timing enabled), created on first use.
class Event {
 public:
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (e_) cuda().cuEventDestroy(e_);
  }
  CUevent get() {
    if (!e_) CU(cuEventCreate, &e_, CU_EVENT_DEFAULT);
    return e_;
  }
  void record(CUstream s) { CU(cuEventRecord, get(), s); }
  /// Waits for the last recorded work (at once when never recorded).
  void sync() {
    if (e_) CU(cuEventSynchronize, e_);
  }
  bool created() const { return e_ != nullptr; }

 private:
  CUevent e_ = nullptr;
};

class Library {
 public:
  Library() = default;
  explicit Library(CUlibrary l) : l_(l) {}
  Library(Library&& o) noexcept : l_(std::exchange(o.l_, nullptr)) {}
  Library& operator=(Library&& o) noexcept {
    if (this != &o) {
      reset();
      l_ = std::exchange(o.l_, nullptr);
    }
    return *this;
  }
  ~Library() { reset(); }
  void reset() noexcept {
    if (l_) cuda().cuLibraryUnload(l_);
    l_ = nullptr;
  }
  CUlibrary get() const { return l_; }

 private:
  CUlibrary l_ = nullptr;
};

}  // namespace udf::rt

struct udf_runtime {
  int32_t ordinal = 0;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  CUstream aux_stream = nullptr;  // side copies off the search's critical path (index_search.cpp)
  CUstream wake_stream = nullptr;  // host functions that wake the host pool (index_search.cpp, AWAKE)
  udf_device_info info{};
  int max_smem_optin = 0;
  udf::rt::Library index_lib;
  CUfunction f_convert = nullptr, f_accumulate = nullptr, f_coarse_keys = nullptr, f_coarse_keys_few = nullptr,
             f_coarse_keys_inline = nullptr,
             f_select = nullptr, f_select_direct = nullptr, f_list_rows = nullptr, f_move_lists = nullptr,
             f_shard_merge = nullptr, f_resolve_keys = nullptr;
  CUfunction f_sched_small = nullptr, f_sched_count = nullptr, f_sched_plan = nullptr, f_sched_scatter_rows = nullptr,
             f_sched_query_rows = nullptr, f_sched_fill = nullptr;
  // prepare_smem's checks, per kernel: the largest dynamic shared memory
  // already checked (and opted into) for it, so a search asks the driver
  // nothing; cleared when a module is destroyed (its handles may come back).
  std::unordered_map<CUfunction, size_t> smem_checked;
  int live_children = 0;  // modules
  bool released = false;  // udf_runtime_destroy was called while modules lived: freed with the last one
  // The host copy workers (host_pool(), index_gpu.cpp): started by the first
  // copy that can use them, joined when the runtime is freed.
  std::once_flag host_pool_once;
  std::unique_ptr<udf::rt::HostPool> host_pool;
};

struct udf_module {
  struct Scan {
    int artifact = 0;
    int filter = -1;  // index into filters; -1: unfiltered
    int k_max = 0;
    int recommended_qpi = 1;
    std::string name;
    CUfunction fn = nullptr;
    bool tail_merge = false;   // merges a query's rows itself (kernel pack 1.4; ivf_flat_v1.h, TAIL MERGE)
    bool query_bound = false;  // prunes with args.query_bound (kernel pack 1.5; ivf_flat_v1.h, QUERY BOUND)
    bool prune = false;        // a monotone metric's scan (kernel pack 1.6; ivf_flat_v1.h, PRUNE)
    uint32_t sort_capacity = 0;  // launch.sort_capacity: the S its shared memory is sized with
  };
  struct Merge {
    udf::Order order = udf::Order::Min;
    int k_max = 0;
    std::string name;
    CUfunction fn = nullptr;
  };
  struct Metric {
    udf_metric_abi abi = UDF_METRIC_ABI_V1;
    std::string finalize;
    std::vector<udf_capture_info> captures;
    udf_metric_info info{};
  };
  struct Filter {
    std::vector<udf_capture_info> captures;
    udf_filter_info info{};
  };
  udf_runtime* rt = nullptr;
  std::string name;
  udf::ModuleManifest manifest;
  std::string json;
  std::vector<udf::rt::Library> libs;  // one per image of the module (manifest.images)
  // Deques: an on-demand link appends while a search's pointers into them live.
  std::deque<Scan> scans;
  std::deque<Merge> merges;
  std::vector<Metric> metrics;
  std::vector<Filter> filters;
  int live_indexes = 0;
  bool released = false;  // udf_module_destroy was called while indexes lived: freed with the last one
  // udf_module_link_ex's on-demand modules: entries linked when a search first needs them.
  std::unique_ptr<udf::rt::OnDemandLink> on_demand;
};

namespace udf::rt {

/// A module of `manifest` without code: its metrics (each one's largest k
/// from the entries in `available`, those it has or can link) and filters.
/// The manifest's entries are those loaded (load_images adds them).
std::unique_ptr<udf_module> new_module(udf_runtime* rt, std::string name, ModuleManifest manifest,
                                       const std::vector<ModuleEntry>& available);
/// Loads fatbins and registers `entries` (their image indices count from the
/// first of `images`) as scans and merges; adds them to the manifest.
void load_images(udf_module* m, std::span<const Bytes> images, const std::vector<ModuleEntry>& entries);
/// On-demand modules: links (unless done) and loads the entries a search of
/// metric `metric` (with filter `filter`, -1: none) for `k` needs; nothing
/// for other modules.  lib/runtime/link_api.cpp.
void ensure_linked(udf_module* m, int metric, int filter, uint32_t k);

/// Checks that f can have `bytes` of dynamic shared memory on this device
/// (what(): what needs it, for the error) and opts in above 48 KB.  Once a
/// size passed for f, smaller ones return at once.
void prepare_smem_now(udf_runtime* rt, CUfunction f, size_t bytes, const std::string& what);
template <class F>
  requires std::is_invocable_r_v<std::string, F>
void prepare_smem(udf_runtime* rt, CUfunction f, size_t bytes, F&& what) {
  auto it = rt->smem_checked.find(f);
  if (it != rt->smem_checked.end() && bytes <= it->second) return;
  prepare_smem_now(rt, f, bytes, what());
}
/// Launches f on rt's stream: grid blocks of 128 threads (none when grid is 0).
void launch(udf_runtime* rt, CUfunction f, unsigned grid, size_t smem, void* args);
/// The general form: grid (x, y), `block` threads, on `stream`.
void launch_on(CUstream stream, CUfunction f, unsigned grid_x, unsigned grid_y, unsigned block, size_t smem, void* args);
void sync(udf_runtime* rt);
udf_dtype to_dtype(ElemType e);
size_t elem_size(ElemType e);
double now_ms();

}  // namespace udf::rt
