// The index behind udf_index*: its lists on the device, its search scratch,
// and the functions its parts share (index/build.h for the build's steps,
// index/search.h for the search).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/buffers.h"
#include "cuda/event.h"
#include "cuda/runtime.h"
#include "index/index_file.h"
#include "index/scan_choice.h"
#include "module/module.h"
#include "udf/kernels/ivf_index_v1.h"

namespace udf::rt {
struct ShardedIndex;  // shards/sharded_index.h
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
  // Coarse weights (udf_index_params.coarse_weights; empty: none): k-means,
  // the assignment and the coarse probe see each row multiplied element by
  // element by d_coarse_scale = sqrt(weights), and the centroids live in
  // that space; the lists hold the rows as given.
  std::vector<float> coarse_weights;  // [dim]
  udf::rt::DevBuf d_coarse_scale;
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

  // Rows lists (exact search and refine, index/rows_search.cpp): each list is
  // a run of a dataset's rows at rows_data (ivf_flat_v1.h, ROWS LAYOUT; d_ids
  // per slot its row), searched with the module's rows scans.  Exact: every
  // query probes every list; refine: list q holds query q's candidates and
  // only query q probes it.  No centroids.
  enum class RowsMode { None, Exact, Refine } rows_mode = RowsMode::None;
  CUdeviceptr rows_data = 0;  // the dataset (borrowed) or d_list_data (a padded copy)
  uint64_t rows_iota = 0;     // exact: the rows d_ids counts 0 .. n-1 for (0: not set)
  udf::rt::DevBuf d_candidates, d_bad;  // refine: host candidates uploaded; the first bad one's position
  udf::rt::PinnedBuf h_bad;              // refine: d_bad, copied back behind the search

  // Search scratch (index/search*.cpp).  Searches on one index run one after
  // the other on the GPU: each waits for `done`, recorded at the end of the
  // previous one (whatever its stream), so they can share this scratch.
  struct Scratch {
    udf::rt::DevBuf queries, qnorm, qcoarse, keys, probes, sched, items, pairs, cand_dists, cand_slots, out, query_done, cap[8], fcap[8];
    // The scan's query bounds: every word UDF_IVF_V1_BOUND_NONE between searches.
    udf::rt::DevBuf query_bound;
    udf::rt::PinnedBuf h_in, h_out, h_header;
    udf::rt::Event done, staged, stage[5], header_copied, upload_start, uploaded;
    udf::rt::Event scan_begin, scan_end;  // around a scan whose time the scan choice measures
    udf::rt::Event scanned;               // the scan's end, which wakes the host pool for the copy out
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
  } scratch;
  udf_search_stats stats{};
  udf_search_work work{};  // of the last blocking search, with stats
  bool stage_timing = false;  // udf_index_set_stage_timing: events between the stages of a blocking search
  // The scan choice (index/scan_choice.h, index/search_schedule.cpp): a
  // monotone metric's pruning scan or its plain one, by what each took, per
  // kind of search.
  std::map<std::uint64_t, udf::rt::ScanChoice> scan_choice;

  // An index over several devices (shards/sharded_index.h) keeps no lists
  // itself: it holds the whole index's centroids, sizes and counts, and
  // `shard_set` its one-GPU indexes, one a device.  Null for a one-GPU index.
  std::unique_ptr<udf::rt::ShardedIndex, void (*)(udf::rt::ShardedIndex*)> shard_set{nullptr, nullptr};
  bool sharded() const { return shard_set != nullptr; }

  // A shard of an index sharded by vectors holds part of every list, each
  // part in the one index's order.  runs[l]: the one index's positions in
  // list l that it holds, as (first, count) runs in ascending order;
  // d_keys: per slot its tie key, list << 32 | position (-1 in padding),
  // which its searches return in place of ids (index/search_request.h,
  // scan_reads_ids; ids again through udf_ivf_index_v1_resolve_keys) for the
  // merge to order ties as the one index's slots (kernels/shard_merge.cuh).
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> runs;
  udf::rt::DevBuf d_keys;

  /// Whether the coarse operations read a converted copy of the rows
  /// (normalized or scaled), not the rows as given.
  bool coarse_copy() const { return normalize || !coarse_weights.empty(); }
  /// The coarse scale on the device, or 0 for none.
  CUdeviceptr coarse_scale() const { return coarse_weights.empty() ? 0 : d_coarse_scale.get(); }

  ~udf_index();
  /// Waits until no search of this index is running on the GPU (before its
  /// lists or scratch are freed or replaced).
  void quiesce();
};

namespace udf::rt {

/// An index file's bytes and its checked header (udf_index_load,
/// udf_index_load_sharded): UDF_ERROR_IO when it cannot be read,
/// UDF_ERROR_BAD_FORMAT when the header is bad, each naming the path.
struct IndexFile {
  Bytes bytes;
  IndexFileHeader header;
};
IndexFile read_index_file(const char* path);
/// That module m holds the metric an index file was built with (its symbol
/// and element type; any artifact of it); UDF_ERROR_MISMATCH naming `path`
/// otherwise.
void check_index_file_module(udf_module* m, const IndexFileHeader& h, const std::string& path);
/// That an index file's coarse metric (and normalization) is that of ix, an
/// index for its metric; UDF_ERROR_MISMATCH naming `path` otherwise.
void check_index_file_coarse(const udf_index* ix, const IndexFileHeader& h, const std::string& path);

/// Writes index file `path` of ix: its header, centroids and list sizes,
/// then what `lists` appends (per list in list order: its ids, then its
/// row-major vectors), then the checksum.
void save_index_file(const udf_index* ix, const char* path, const std::function<void(Bytes&)>& lists);
/// A one-GPU index's lists as save_index_file takes them.
void append_lists(const udf_index* ix, Bytes& file);
/// Appends n bytes at p to `file`.
void append_bytes(Bytes& file, const void* p, size_t n);

/// The build's progress callback, if any.
inline void progress(const udf_index_params& p, double f, const char* stage) {
  if (p.progress) p.progress(p.progress_user, f, stage);
}
/// An empty index for `metric` of module m (checks the metric's element type
/// against its coarse metric; `coarse` false: an index without centroids,
/// whose rows are not normalized, rows lists).
std::unique_ptr<udf_index> new_index(udf_module* m, const char* metric, uint32_t dim, uint32_t n_lists, bool coarse = true);
/// Gives ix (whose device context is current) coarse weights `w` (ix->dim
/// values, checked by checked_build_params; NULL: none).  A cosine coarse
/// metric takes none (UDF_ERROR_UNSUPPORTED).
void set_coarse_weights(udf_index* ix, const float* w);
/// Checks `ids` (NULL: none) holds n int64 values and copies them to `out`.
void check_ids(udf_runtime* rt, const udf_tensor* ids, int64_t n, std::vector<int64_t>& out);
struct RowStaging;   // index/list_build.h
struct KmeansHelp;   // index/list_build.h
class KmeansStart;   // index/list_build.h
/// ix->centroids (host and device): p.centroids when given, else Lloyd
/// iterations on a sample of data (gathered from `staged` when it holds
/// every row, or from a sharded build's shares); other devices' indexes in
/// `help` share each iteration's nearest lists.  `start`: the k-means'
/// start, begun for these rows and p (else it begins here).
void make_centroids(udf_index* ix, const udf_tensor* data, int64_t stride, const udf_index_params& p,
                    const RowStaging* staged = nullptr, const KmeansHelp* help = nullptr, KmeansStart* start = nullptr);
/// A build's rows: staged on the device (all of them first, when they fit),
/// the centroids made (make_centroids) and the rows added (add_rows).
void build_rows(udf_index* ix, const udf_tensor* data, int64_t stride, const int64_t* id_list, const udf_index_params& p);
/// Assigns the rows of data to lists (balanced) and adds them to the device
/// lists: a new layout with each list's old rows, then its new ones in input
/// order.  ids: NULL (next_id onwards) or n values.  The index is unchanged
/// when it throws.
void add_rows(udf_index* ix, const udf_tensor* data, int64_t stride, const int64_t* id_list, const udf_index_params* p);
/// Rows [first, end) of list l that a shard keeps (ListPart(l) = {first, end}).
using ListPart = std::function<std::pair<uint32_t, uint32_t>(uint32_t)>;
/// Lists from a file (per list, ids and row-major vectors) onto the device:
/// each whole (part empty), or the rows part(l) of list l (a shard's).
void upload_lists(udf_index* ix, const std::vector<std::vector<int64_t>>& ids,
                  const std::vector<std::vector<std::uint8_t>>& vecs, const ListPart& part = {});
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
