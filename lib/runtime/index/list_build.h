// The build's steps on the device lists (index/lists.cpp, index/add_rows.cpp,
// index/kmeans.cpp), shared with the sharded build (shards/build.cpp): the
// layout of the lists, the rows staged on the device, the assignment pass
// and the placement pass.
#pragma once

#include <cstdint>
#include <exception>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "cuda/buffers.h"
#include "cuda/tensors.h"
#include "index/coarse.h"
#include "index/index.h"
#include "index/testing_paths.h"

namespace udf::rt {

/// Lists' offsets (in slots, each a multiple of 32) for `sizes`; the slot count.
uint64_t plan_offsets(const std::vector<uint32_t>& sizes, std::vector<uint64_t>& offsets);
/// Bytes of a slot of the index's layout.
inline size_t slot_bytes(const udf_index* ix) { return size_t(ix->dim_padded) * ix->esize; }
/// The slots of the index's layout (0 before its first rows).
inline uint64_t slot_count(const udf_index* ix) {
  return ix->offsets.empty() ? 0 : ix->offsets.back() + (uint64_t(ix->sizes.back()) + 31) / 32 * 32;
}
/// Bytes of a group of 32 slots.
inline uint64_t group_bytes(const udf_index* ix) { return 32ull * slot_bytes(ix); }

// A layout of `slots` slots: data zeroed, ids -1 (padding slots keep those).
struct DeviceLists {
  udf::rt::DevBuf data, ids;
  void alloc(udf_runtime* rt, const udf_index* ix, uint64_t slots) {
    data.alloc(slots * slot_bytes(ix), "list data");
    ids.alloc(slots * 8, "ids");
    CU(cuMemsetD8Async, data.get(), 0, slots * slot_bytes(ix), rt->stream);
    CU(cuMemsetD32Async, ids.get(), 0xFFFFFFFFu, slots * 2, rt->stream);
  }
};

/// Rows <-> slots (udf_ivf_index_v1_list_rows) on rt's stream.
void list_rows(udf_runtime* rt, const udf_index* ix, uint32_t direction, CUdeviceptr rows, uint64_t row_stride,
               CUdeviceptr ids, uint64_t next_id, CUdeviceptr slots, uint32_t m, CUdeviceptr data, CUdeviceptr list_ids);
/// Makes `lists`, sizes and offsets the index's (after the work on rt's
/// stream that fills them); uploads the sizes, offsets and centroids.
void install(udf_index* ix, DeviceLists& lists, std::vector<uint32_t> sizes, std::vector<uint64_t> offsets);

/// The candidate lists a row's balanced assignment considers.
uint32_t candidates_for(const udf_index* ix);
/// The balanced assignment of n rows whose candidates and distances came
/// from nearest_lists (negated into keys for IP: smaller is nearer),
/// under the index's cap for n_lists lists of `total` vectors.  counts:
/// the lists' current sizes (updated).
std::vector<uint32_t> assign_to_lists(const udf_index* ix, const uint32_t* cand, float* keys, size_t n, uint32_t c,
                                      std::vector<uint64_t>& counts, uint32_t n_lists, uint64_t total);

/// Copies rows [r0, r0 + m) of a host or device tensor to dst, row_bytes apart, on `stream`.
void copy_rows(CUstream stream, const udf_tensor* t, int64_t stride, int64_t r0, int64_t m, CUdeviceptr dst);
/// copy_rows for rows in device memory of another device than rt's.
void copy_rows_from_peer(udf_runtime* rt, const udf_tensor* t, int64_t stride, int64_t r0, int64_t m, CUdeviceptr dst);
/// The current device's free memory.
size_t free_device_memory();

// The rows of `data` on an index's device, a chunk at a time: read where
// they are (device rows of this device, unless normalized), or copied (and
// normalized when the index stores normalized vectors) into a buffer of a
// chunk, or of all of them when they fit, so that the placement reads them
// again without a copy.  Device rows of another device come through peer
// copies (contiguous rows: their own row stride is dim).
struct RowStaging {
  udf_index* ix;
  const udf_tensor* data;
  int64_t stride;
  int64_t chunk;
  bool in_place = false, keep = false, other_device = false;
  bool staged = false;  // every row is in `all` (the assignment pass has run)
  DevBuf all, buf, f32;
  // two_passes: the rows are read twice (assignment, then placement): kept
  // on the device between the passes when they fit with extra_bytes more.
  RowStaging(udf_index* x, const udf_tensor* d, int64_t s, bool two_passes, uint64_t extra_bytes) : ix(x), data(d), stride(s) {
    udf_runtime* rt = ix->mod->rt;
    const size_t row_bytes = size_t(ix->dim) * ix->esize;
    const int64_t n = data->rows;
    chunk = nearest_chunk(rt, std::max<int64_t>(1, std::min<int64_t>(65536, (int64_t(256) << 20) / (ix->dim * 4 + row_bytes))),
                          ix->n_lists);
    other_device = data->device != UDF_HOST_DEVICE && data->device != rt->ordinal;
    in_place = data->device != UDF_HOST_DEVICE && !other_device && !ix->normalize;
    // (The tests' kTestingRestageRows takes the path of rows that do not fit.)
    keep = two_passes && !in_place && !testing_path(kTestingRestageRows) &&
           size_t(n) * row_bytes + extra_bytes + (size_t(1) << 30) < free_device_memory();
    if (keep)
      all.alloc(size_t(n) * row_bytes, "vectors");
    else if (!in_place)
      buf.alloc(size_t(chunk) * row_bytes, "vectors");
    if (ix->coarse_copy()) f32.alloc(size_t(chunk) * ix->dim * 4, "vectors (f32)");
  }
  // Every row of host data in `all` before the passes (staged), when they
  // are kept and stored as given (not normalized): a pipeline of pinned
  // buffers filled by the host pool, each copied while the next fills.  The
  // k-means sample is then gathered on the device and the assignment copies
  // nothing.
  void upload_all();
  // Rows [r0, r0 + m) on the device, normalized; their address and pitch in
  // bytes.  `coarse`: also their coarse copy in f32 for an index that has one
  // (normalized, or scaled by the coarse weights).  Rows kept since the
  // assignment are not copied again.
  std::pair<CUdeviceptr, uint64_t> stage(int64_t r0, int64_t m, bool coarse) {
    udf_runtime* rt = ix->mod->rt;
    const size_t es = ix->esize, row_bytes = size_t(ix->dim) * es;
    const uint32_t el = static_cast<uint32_t>(to_dtype(ix->elem));
    const bool placed = !(keep && staged);
    const auto rows = placed ? place(r0, m) : std::pair<CUdeviceptr, uint64_t>{all.get() + size_t(r0) * row_bytes, row_bytes};
    if (coarse && ix->coarse_copy())  // (a normalized index's rows placed here are normalized in place after it)
      convert(rt, rt->stream, rows.first, el, rows.second / es, f32.get(), 0, static_cast<uint32_t>(m), ix->dim, ix->normalize, 0,
              ix->coarse_scale());
    if (ix->normalize && placed)
      convert(rt, rt->stream, rows.first, el, ix->dim, rows.first, el, static_cast<uint32_t>(m), ix->dim, true);  // in place
    return rows;
  }

 private:
  // Rows [r0, r0 + m) on the device as given; their address and pitch in bytes.
  std::pair<CUdeviceptr, uint64_t> place(int64_t r0, int64_t m) {
    udf_runtime* rt = ix->mod->rt;
    const size_t es = ix->esize, row_bytes = size_t(ix->dim) * es;
    if (in_place) return {reinterpret_cast<CUdeviceptr>(data->data) + size_t(r0) * size_t(stride) * es, size_t(stride) * es};
    const CUdeviceptr dst = keep ? all.get() + size_t(r0) * row_bytes : buf.get();
    if (other_device)
      copy_rows_from_peer(rt, data, stride, r0, m, dst);
    else
      copy_rows(rt->stream, data, stride, r0, m, dst);
    return {dst, row_bytes};
  }
};

/// add_rows for rows staged in `st`.
void add_staged_rows(udf_index* ix, RowStaging& st, const int64_t* id_list, const udf_index_params* p);

/// Each chunk of rows of `st` on the device and its nearest lists: the
/// candidates_for(ix) candidates of each row and their distances into cand /
/// keys ([rows][c]).
void nearest_candidates(udf_index* ix, RowStaging& st, uint32_t* cand, float* keys, const udf_index_params* p);
/// Pass 1: each chunk of rows on the device and its nearest lists; the host
/// makes the balanced assignment for lists that hold `counts` vectors now
/// (updated) in an index of `total` vectors once these are in.
std::vector<uint32_t> assign_rows(udf_index* ix, RowStaging& st, std::vector<uint64_t>& counts, uint64_t total,
                                  const udf_index_params* p);
/// Refuses n more rows where the index would then hold 2^32 - 1 vectors or more.
void check_room(const udf_index* ix, int64_t n);
/// The most bytes ix's layout takes once n more rows are in, before the
/// assignment says which lists they join (each list's last group may pad).
inline uint64_t layout_bytes_after(const udf_index* ix, uint64_t n) {
  return (slot_count(ix) + n + 32ull * ix->n_lists) * slot_bytes(ix);
}
/// The lists' current sizes as counts (empty before the first rows).
std::vector<uint64_t> current_counts(const udf_index* ix);
/// Where pass 2 reads rows [r0, r0 + rows) of the input: staged again on
/// the device (`st`, whose data are those rows), or read in place at `at`,
/// `pitch` bytes apart: memory of this device, or of a peer it reads (a
/// sharded build's rows staged on another shard's device).
struct RowSource {
  int64_t r0 = 0;
  int64_t rows = 0;
  RowStaging* st = nullptr;
  CUdeviceptr at = 0;
  uint64_t pitch = 0;
};
/// Rows of `from` to their slots of `lists` (slot[i] for input row i, or
/// none: NO_SLOT), with ids id_list[i] (or first_id + i); returns when they
/// are there.
void scatter_rows(udf_index* ix, const RowSource& from, const uint32_t* slot, const int64_t* id_list, int64_t first_id,
                  DeviceLists& lists);
/// scatter_rows for every row of `st` (input row i is row i of st).
void scatter_rows(udf_index* ix, RowStaging& st, const std::vector<uint32_t>& slot, const int64_t* id_list, int64_t first_id,
                  DeviceLists& lists);
// Which shard takes each row: none (NULL: every row is this index's), or
// owner[i] for row i (a sharded index's; rows of other shards are theirs).
struct Owners {
  const std::vector<std::uint8_t>* owner = nullptr;
  std::uint8_t me = 0;
  bool mine(size_t i) const { return owner == nullptr || (*owner)[i] == me; }
};
/// Pass 2: a new layout with each list's old rows, then its new ones in
/// input order: the rows `own` gives this index.  Ids: id_list, or first_id
/// + the row's number.
void place_rows(udf_index* ix, RowStaging& st, const std::vector<uint32_t>& label, Owners own, const int64_t* id_list,
                int64_t first_id);
/// place_rows with the input's rows read from `from`: ranges that cover
/// every row `own` gives this index.
void place_rows(udf_index* ix, const std::vector<RowSource>& from, const std::vector<uint32_t>& label, Owners own,
                const int64_t* id_list, int64_t first_id);
/// A sharded build's help for its k-means, which runs on the first shard's
/// device: the input's rows as the shards staged them, each share rows
/// [r0, r0 + rows) at `at` (`pitch` bytes apart, as given, not normalized)
/// on the device of `ix`, and indexes on other devices, each of which finds
/// the nearest lists of a part of the sample in every iteration.
struct StagedShare {
  udf_index* ix = nullptr;
  int64_t r0 = 0, rows = 0;
  CUdeviceptr at = 0;
  uint64_t pitch = 0;
};
struct KmeansHelp {
  std::vector<StagedShare> shares;  // every input row, in order (empty: the sample comes from the input)
  std::vector<udf_index*> devices;  // on devices other than the k-means' own
};
/// The part of a build's k-means that needs none of the rows, on a thread of
/// its own so that it overlaps the rows' staging: the sample's draw (which
/// rows it trains on, and the generator after the draw) and the Lloyd
/// iterations' pinned host buffers.  make_centroids waits for it.
class KmeansStart {
 public:
  /// For ix's lists from `rows` rows with p (whose centroids are to be
  /// made); on the calling thread when `on_thread` is false or no thread starts.
  KmeansStart(udf_index* ix, int64_t rows, const udf_index_params& p, bool on_thread = true);
  /// Waits for the thread; what it threw is dropped (the build has failed).
  ~KmeansStart();
  KmeansStart(const KmeansStart&) = delete;
  KmeansStart& operator=(const KmeansStart&) = delete;
  /// Waits for the thread and rethrows what it threw; then the members are set.
  void finish();

  std::mt19937_64 rng;          // after the sample's draw
  std::vector<int64_t> sample;  // the rows k-means trains on, in draw order
  // Each iteration's copies: the candidates and their distances down, the
  // rows by center up, the centers' sums down.
  PinnedBuf cand, keys, order, sums;

 private:
  void run() noexcept;
  udf_index* ix_;
  int64_t rows_;
  uint64_t n_train_;
  std::exception_ptr error_;
  std::thread thread_;  // run(), when started on a thread
};
/// The ids after rows given id_list (or none: first_id onwards).
int64_t next_id_after(int64_t first_id, const int64_t* id_list, int64_t n);

}  // namespace udf::rt
