// The index behind udf_index*, shared by its parts: index.cpp (the C API's
// lifecycle calls and the file), index_build.cpp (k-means, assignment, list
// packing), index_search.cpp (the search pipeline) and index_gpu.cpp (tensor
// checks and the runtime's index kernels).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "index_file.h"
#include "internal.h"
#include "scan_choice.h"
#include "udf/kernels/ivf_index_v1.h"

namespace udf::rt {
struct ShardGroup;  // index_shards.cpp
}

struct udf_index {
  udf_module* mod = nullptr;
  size_t metric = 0;
  std::string symbol;
  udf::ElemType elem = udf::ElemType::F32;
  size_t esize = 4;
  uint32_t dim = 0;
  uint32_t dim_padded = 0;
  uint32_t n_lists = 0;
  uint32_t coarse = UDF_IVF_INDEX_V1_L2;
  bool normalize = false;
  double balance = 2.0;
  int64_t size = 0;
  int64_t next_id = 0;
  std::vector<float> centroids;                    // [n_lists][dim]
  // The lists live on the device only, in the scan kernels' layout
  // (docs/kernels.md): d_list_data and d_ids (per slot; -1 in padding).
  udf::rt::DevBuf d_centroids, d_list_data, d_offsets, d_sizes, d_ids;
  std::vector<uint64_t> offsets;  // per list: first slot (a multiple of 32)
  std::vector<uint32_t> sizes;    // per list: vectors
  uint32_t max_list_size = 0;     // the largest of sizes (set with them)

  // Search scratch (index_search.cpp).  Searches on one index run one after
  // the other on the GPU: each waits for `done`, recorded at the end of the
  // previous one (whatever its stream), so they can share this scratch.
  struct Scratch {
    udf::rt::DevBuf queries, qnorm, keys, probes, sched, items, pairs, cand_dists, cand_slots, out, query_done, cap[8], fcap[8];
    // The scan's query bounds (kernel pack 1.5): every word UDF_IVF_V1_BOUND_NONE between searches.
    udf::rt::DevBuf query_bound;
    udf::rt::PinnedBuf h_in, h_out, h_header;
    udf::rt::Event done, staged, stage[5], header_copied, upload_start, uploaded;
    udf::rt::Event scan_begin, scan_end;  // around a scan whose time SCAN CHOICE measures
    udf::rt::Event scanned;               // AWAKE: the scan's end, for the host pool's wake-up
    // An asynchronous search's measured scan, read once its end is reached
    // (at a later search): which choice, which scan, how many pairs.
    struct PendingChoice {
      udf::rt::ScanChoice* choice = nullptr;
      int scan = 0;
      double pairs = 0;
    } pending_choice;
    bool done_reached = false;  // `done` has completed (a blocking search waited for it): no stream need wait
    // What the last upload of a host array capture left in cap[i] / fcap[i]
    // (its buffer's address and bytes): the same array again is not uploaded.
    struct CaptureCopy {
      CUdeviceptr at = 0;
      std::vector<std::uint8_t> bytes;
    };
    CaptureCopy cap_copy[8], fcap_copy[8];
  } s;
  udf_search_stats stats{};
  udf_search_work work{};  // of the last blocking search, with stats
  bool stage_timing = false;  // udf_index_set_stage_timing: events between the stages of a blocking search
  // SCAN CHOICE (index_search.cpp, scan_choice.h): a monotone metric's
  // pruning scan or its plain one, by what each took, per kind of search.
  std::map<std::uint64_t, udf::rt::ScanChoice> scan_choice;

  // SHARDS (index_shards.cpp): an index over several devices keeps no lists
  // itself.  It holds the whole index's centroids, sizes and counts, and one
  // index a device (each on its own module and runtime; all centroids, the
  // lists [shard_lists[s], shard_lists[s + 1]) filled, the others empty).
  // Empty for a one-GPU index.
  std::vector<std::unique_ptr<udf_index, void (*)(udf_index*)>> shards;
  uint32_t shard_layout = UDF_SHARD_BY_LISTS;  // how the shards split the vectors
  std::vector<uint32_t> shard_lists;           // by lists: shard s keeps [shard_lists[s], shard_lists[s + 1])
  // A shard of an index sharded by vectors holds part of every list, each
  // part in the one index's order.  runs[l]: the one index's positions in
  // list l that it holds, as (first, count) runs in ascending order;
  // d_keys: per slot its tie key, list << 32 | position (-1 in padding),
  // which its searches return in place of ids (index_search.cpp,
  // scan_reads_ids; ids again through udf_ivf_index_v1_resolve_keys) for the
  // merge to order ties as the one index's slots (kernels/shard_merge.cuh).
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> runs;
  udf::rt::DevBuf d_keys;
  bool by_vectors() const { return sharded() && shard_layout == UDF_SHARD_BY_VECTORS; }
  std::unique_ptr<udf::rt::ShardGroup> group;  // the search's transport and scratch
  bool sharded() const { return !shards.empty(); }

  ~udf_index();
  /// Waits until no search of this index is running on the GPU (before its
  /// lists or scratch are freed or replaced).
  void quiesce();
};

namespace udf::rt {

inline void require(bool ok, const std::string& m) {
  if (!ok) fail(UDF_ERROR_INVALID_ARGUMENT, m);
}
inline void require(bool ok, const char* m) {
  if (!ok) fail(UDF_ERROR_INVALID_ARGUMENT, m);
}
/// The same with the message built only on failure (the search's checks run
/// on every call: building their messages cost microseconds a search).
template <class F>
  requires std::is_invocable_r_v<std::string, F>
inline void require(bool ok, F&& message) {
  if (!ok) fail(UDF_ERROR_INVALID_ARGUMENT, message());
}
std::string dtype_name(udf_dtype t);

/// Checks a tensor's type, shape and memory; returns its row stride in elements.
int64_t check_tensor(udf_runtime* rt, const udf_tensor* t, const char* what, udf_dtype dtype, int64_t cols,
                     int64_t rows = -1);
/// Copies rows [r0, r0 + n) of a (host or device) tensor into contiguous host memory.
void rows_to_host(udf_runtime* rt, const udf_tensor* t, int64_t stride, int64_t r0, int64_t n, std::uint8_t* dst);
/// The runtime's host copy workers (host_pool.h), started on first use.
HostPool& host_pool(udf_runtime* rt);
/// memcpy on the runtime's copy workers and the calling thread, in parts of
/// at least per_part bytes (a copy under two parts runs on the caller
/// alone: copy_is_pooled says which).
constexpr size_t kPooledCopyBytes = size_t(256) << 10;
inline bool copy_is_pooled(size_t bytes, size_t per_part = kPooledCopyBytes) { return bytes >= 2 * per_part; }
void copy_parallel(udf_runtime* rt, std::uint8_t* dst, const std::uint8_t* src, size_t bytes,
                   size_t per_part = kPooledCopyBytes);
/// Copies rows [r0, r0 + n) of a host tensor into contiguous host memory in
/// slices of slice_rows on the runtime's copy workers and the calling
/// thread, calling ready(first row, rows) (relative to r0) on the calling
/// thread for each slice once it is copied, in order, while the next slices
/// are copied.
void host_rows_in_slices(udf_runtime* rt, const udf_tensor* t, int64_t stride, int64_t r0, int64_t n, std::uint8_t* dst,
                         int64_t slice_rows, const std::function<void(int64_t, int64_t)>& ready);
/// Copies bytes to a device buffer (grown as needed) on `stream`.
void upload(CUstream stream, DevBuf& b, const void* src, size_t bytes, const char* what);

/// dst[r] = src[r] converted to f32 (dst_elem 0) or f16 (1), optionally normalized.
void convert(udf_runtime* rt, CUstream stream, CUdeviceptr src, uint32_t src_elem, uint64_t src_stride, CUdeviceptr dst,
             uint32_t dst_elem, uint32_t rows, uint32_t dim, bool normalize);

/// The coarse probe: for each of n_rows rows (elements of row_elem, row_stride
/// apart), the n_out nearest of n_lists f32 centroids under `metric`
/// (UDF_IVF_INDEX_V1_L2 / _IP), nearest first, ties to the smaller list;
/// their distances too when out_dists is not 0.  `keys` is scratch
/// (n_rows x n_lists floats, grown as needed; keep n_rows * n_lists bounded).
/// With `direct`, the selection also writes a tiny search batch's
/// query-major schedule (udf_ivf_select_args_v1, "DIRECT SCHEDULE"); the
/// rows must then fit one pass.  `inline_rows` (host memory, the rows as
/// `rows` will hold them, or null): when they fit a launch's parameters
/// (UDF_IVF_COARSE_INLINE_V1_BYTES) the coarse kernel takes them from there
/// and stores them at `rows` itself, so `rows` need not be uploaded first.
struct DirectSchedule {
  uint32_t tiles = 1;        // tiles per probe
  uint32_t tile_groups = 1;  // groups of 32 slots per tile
  const uint32_t* list_sizes = nullptr;
  void* items = nullptr;
  void* pairs = nullptr;
  uint32_t* query_rows = nullptr;
  uint32_t* query_stats = nullptr;
  uint32_t* row_ranges = nullptr;  // set: the tail merge's layout
};
void nearest_centroids(udf_runtime* rt, CUstream stream, CUdeviceptr rows, uint32_t row_elem, uint64_t row_stride,
                       uint32_t n_rows, CUdeviceptr centroids, uint32_t n_lists, uint32_t dim, uint32_t metric,
                       uint32_t n_out, CUdeviceptr out_lists, CUdeviceptr out_dists, DevBuf& keys,
                       const DirectSchedule* direct = nullptr, const std::uint8_t* inline_rows = nullptr);

/// The checked parameters of a build (udf_index_build, udf_index_build_sharded).
udf_index_params checked_build_params(const udf_index_params* params, const udf_tensor* data);
/// An index file's bytes and its checked header (udf_index_load,
/// udf_index_load_sharded): UDF_ERROR_IO when it cannot be read,
/// UDF_ERROR_BAD_FORMAT when the header is bad, each naming the path.
struct IndexFile {
  Bytes bytes;
  IndexFileHeader header;
};
IndexFile read_index_file(const char* path);
/// That module m holds the metric an index file was built with (its symbol,
/// artifact and element type); UDF_ERROR_MISMATCH naming `path` otherwise.
void check_index_file_module(udf_module* m, const IndexFileHeader& h, const std::string& path);

// index_build.cpp
inline void progress(const udf_index_params& p, double f, const char* stage) {
  if (p.progress) p.progress(p.progress_user, f, stage);
}
/// An empty index for `metric` of module m (checks the metric's element type
/// against its coarse metric).
std::unique_ptr<udf_index> new_index(udf_module* m, const char* metric, uint32_t dim, uint32_t n_lists);
/// Checks `ids` (NULL: none) holds n int64 values and copies them to `out`.
void check_ids(udf_runtime* rt, const udf_tensor* ids, int64_t n, std::vector<int64_t>& out);
/// ix->centroids (host and device): p.centroids when given, else Lloyd
/// iterations on a sample of data.
void make_centroids(udf_index* ix, const udf_tensor* data, int64_t stride, const udf_index_params& p);
/// Assigns the rows of data to lists (balanced) and adds them to the device
/// lists: a new layout with each list's old rows, then its new ones in input
/// order.  ids: NULL (next_id onwards) or n values.  The index is unchanged
/// when it throws.
void add_rows(udf_index* ix, const udf_tensor* data, int64_t stride, const int64_t* id_list, const udf_index_params* p);
/// add_rows for a sharded index: the assignment on the first shard's device
/// against the whole index's lists, then each shard places the rows of its
/// lists.
void add_rows_sharded(udf_index* ix, const udf_tensor* data, int64_t stride, const int64_t* id_list,
                      const udf_index_params* p);
/// A sharded index's centroids: its first shard's, copied to the parent and
/// to every other shard (host and device).
void share_centroids(udf_index* ix);
/// Chunk `chunk` of a chunked build's rows into data (and ids, or ids.data
/// NULL: none), valid until the next call; throws to stop the build.
using ChunkSource = std::function<void(size_t chunk, udf_tensor& data, udf_tensor& ids)>;
/// Fills a new index (one-GPU or sharded, no centroids or lists yet) with
/// the rows of chunks 0 .. n_chunks - 1, as a build over chunk 0 and an add
/// of each further chunk would (the same centroids, labels and list order),
/// but allocating each device's lists once, at their final sizes.  Pass 1
/// reads every chunk for the assignment (chunk 0 first for the centroids),
/// pass 2 again to place its rows; the host keeps the labels in between.  A
/// sharded index's lists are cut between its devices by their final sizes.
void build_in_chunks(udf_index* ix, size_t n_chunks, const ChunkSource& source, const udf_index_params& p);
/// Rows [first, end) of list l that a shard keeps (ListPart(l) = {first, end}).
using ListPart = std::function<std::pair<uint32_t, uint32_t>(uint32_t)>;
/// Lists from a file (per list, ids and row-major vectors) onto the device:
/// each whole (part empty), or the rows part(l) of list l (a shard's).
void upload_lists(udf_index* ix, const std::vector<std::vector<int64_t>>& ids,
                  const std::vector<std::vector<std::uint8_t>>& vecs, const ListPart& part = {});
/// A shard by vectors: its tie keys (d_keys) from its runs and layout.
void upload_keys(udf_index* sh);
/// Shard s of `shards` by vectors holding part s of the equal cut
/// (part_begin) of lists of sizes[l] vectors, as a build or a load leaves
/// it: its runs (one a list) and tie keys.
void keep_equal_parts(udf_index* sh, size_t s, size_t shards, const std::vector<uint64_t>& sizes);

/// dst's lists: a device copy of src's (same element type and dimension).
void copy_lists(udf_index* dst, const udf_index* src);
/// Reads the lists back in order: sink(list, ids, row-major vectors) for
/// each list, sizes[list] of each.
void download_lists(const udf_index* ix, const std::function<void(uint32_t, const int64_t*, const std::uint8_t*)>& sink);

/// UDF_PROFILE_BUILD set in the environment: lap(what) waits for the GPU
/// and adds the time since the last lap to phase `what`; the destructor
/// prints each phase's total to stderr (a diagnostic for the build's phases;
/// the waits change the overlap it measures).
class BuildProfile {
 public:
  explicit BuildProfile(udf_runtime* rt);
  BuildProfile(const BuildProfile&) = delete;
  BuildProfile& operator=(const BuildProfile&) = delete;
  ~BuildProfile();
  void lap(const char* what);

 private:
  struct Phase {
    std::string what;
    double ms;
    uint32_t laps;
  };
  udf_runtime* rt_;
  bool on_;
  std::chrono::steady_clock::time_point t_;
  std::vector<Phase> phases_;
};

}  // namespace udf::rt
