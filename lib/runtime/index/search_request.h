// The search pipeline's state, shared by its stages (index/search*.cpp):
// the request (what every chunk of a call needs) and a chunk of queries on
// its way through the stages.
#pragma once

#include <cstdint>

#include "cuda/buffers.h"
#include "cuda/tensors.h"
#include "index/coarse.h"
#include "index/index.h"
#include "index/schedule_plan.h"
#include "index/search.h"
#include "udf/kernels/ivf_flat_v1.h"

namespace udf::rt {

// A checked search call: what every chunk of it needs.
struct Request {
  udf_index* ix = nullptr;
  udf_runtime* rt = nullptr;
  CUstream stream = nullptr;
  bool blocking = true;
  const udf_tensor *queries = nullptr, *out_d = nullptr, *out_i = nullptr;
  int64_t qstride = 0, dstride = 0, istride = 0, n = 0;
  uint32_t k = 0, n_probes = 0, qpi_param = 0;
  const ModuleArtifact* art = nullptr;
  udf_capture_v1 caps[UDF_ABI_METRIC_V1_MAX_CAPTURES] = {};
  udf_capture_v1 fcaps[UDF_ABI_FILTER_V1_MAX_CAPTURES] = {};
  int filter = -1;
  uint32_t n_fcaps = 0;
  const udf_module::Scan* scan = nullptr;
  const udf_module::Scan* plain_scan = nullptr;  // scan prunes: the same k_max without (the scan choice)
  const udf_module::Merge* merge = nullptr;
  uint32_t sort_capacity = 0;  // of the kernels' k_max
  size_t merge_smem = 0;
  int64_t chunk_queries = 0;  // queries per chunk
  bool direct_out = false;  // outputs contiguous on the device: the merge writes them
  const CoarseShare* share = nullptr;  // a sharded search's shared coarse probe (one chunk), or none
};

// Whether the request's scan reads the slots' ids (a filter's argument, a
// v2 metric's ctx->id).  A shard by vectors (udf_index::d_keys) returns tie
// keys in place of ids: through the scan's tail merge only when it does not.
inline bool scan_reads_ids(const Request& request) { return request.filter >= 0 || request.art->shape.has_value(); }

// One chunk of the queries (rows q0 .. q0 + nq) on its way through the stages.
struct Chunk {
  int64_t q0 = 0;
  uint32_t nq = 0;
  CUdeviceptr qdev = 0;  // the queries on the device, qs elements apart
  uint64_t qs = 0;
  uint32_t qpi = 1;
  uint32_t stage_rows = 0;  // ABI v2 vector scans: rows staged per warp at a time; rows scans: the copied row stage's
                            // UDF_IVF_SCAN_ROWS_STAGE_COPIED where it is taken (choose_row_stage), else 0
  const udf_module::Scan* scan = nullptr;  // the request's scan or its plain one (the scan choice)
  udf::rt::ScanChoice* choice = nullptr;   // where the scan's time goes when this chunk's is measured
  int choice_scan = 0;                     // which of the two that is (ScanChoice::kPrune / kPlain)
  size_t scan_smem = 0;
  uint32_t items_max = 0, rows_max = 0;
  // Tiny batches (one query an item, few pairs): the coarse selection writes
  // a query-major schedule itself (DirectSchedule), up to direct_sched.tiles
  // tiles a probe; otherwise the list-major schedule kernels run (sched).
  bool direct = false;
  bool tail = false;  // direct, and the scan merges each query's rows (no merge launch)
  DirectSchedule direct_sched;
  // Where the merge writes the chunk's results (merge_outputs).
  float* out_dists = nullptr;
  long long* out_ids = nullptr;
  bool out_final = false;  // in the outputs (or mapped pinned staging): nothing to copy after
  udf_ivf_sched_args_v1 sched{};
  RowRanges probed;  // a shared coarse probe (Request::share): the rows this device probed
};

/// A v2 state metric's state words kept per (query, thread): the artifact's
/// state_words, all 8 when it has none.
inline uint32_t state_words_of(const ModuleArtifact& a) {
  return a.state_words >= 1 && a.state_words <= UDF_ABI_METRIC_V2_STATE_WORDS ? a.state_words : UDF_ABI_METRIC_V2_STATE_WORDS;
}
/// A chunk of nq queries' queries per item with a scan of this
/// recommendation and k bucket, before the scan is chosen: the search's, or
/// from the mean queries per probed list (schedule_plan.h, queries_per_item).
inline uint32_t chunk_queries_per_item(const Request& request, uint32_t nq, int recommended_qpi, int k_max) {
  return request.qpi_param ? request.qpi_param
                           : queries_per_item(nq, request.n_probes, request.ix->n_lists, recommended_qpi, request.art->shape,
                                              state_words_of(*request.art), static_cast<uint32_t>(k_max));
}
/// Bytes of nq x k staged results: the distances (padded to 8 bytes), then the ids.
inline size_t staged_dist_bytes(size_t nq, uint32_t k) { return (nq * k * 4 + 7) / 8 * 8; }
inline size_t staged_result_bytes(size_t nq, uint32_t k) { return staged_dist_bytes(nq, k) + nq * k * 8; }
/// Grows a scratch buffer; waits first for the previous search, which may read it.
void grow(udf_index* ix, DevBuf& b, size_t bytes, const char* what);

// index/search_request.cpp
/// The request of a checked call: the kernels (the smallest k bucket at or
/// above k with a merge, linked now on demand), the chunk size, and the
/// captures bound (host arrays uploaded after the previous search).
Request make_request(udf_index* ix, const SearchCall& call);

// index/search_schedule.cpp
/// Before the coarse probe: the chunk's queries per item, the scan and its
/// shared memory, which schedule (direct or list-major) and its scratch.
void plan_schedule(Request& request, Chunk& chunk);
/// Stage 3: the list-major schedule, on the GPU (nothing for a direct one).
void stage_schedule(Request& request, Chunk& chunk);

// index/search_stages.cpp
/// Which rows of a slice a device probes when the coarse probe is shared
/// out (CoarseShare): its part of every slice, a whole slice, or none.
enum class SliceProbe { part, whole, none };
/// Stages 1 and 2 for rows [s0, s0 + n) of the chunk: the queries on the
/// device, then their nearest lists (of the rows `probe` says).
void stage_queries_and_coarse(Request& request, Chunk& chunk, const std::uint8_t* staged, uint32_t s0, uint32_t n, bool side,
                              SliceProbe probe = SliceProbe::part);
/// Stage 4: the UDF scan over every work item.
void stage_scan(Request& request, Chunk& chunk);
/// Where the chunk's merged results go (before the scan: a tail merge writes them).
void merge_outputs(Request& request, Chunk& chunk, std::uint8_t* h_out);
/// Stage 5: per query the k best of its rows (unless the scan merged them), then on to the outputs.
void stage_merge(Request& request, Chunk& chunk, std::uint8_t* h_out);
/// Whether finish_chunk copies one of the chunk's outputs on the host pool.
bool finish_uses_pool(const Request& request, uint32_t nq);
/// After the stream has finished a chunk: its results from pinned memory to the outputs.
void finish_chunk(Request& request, const Chunk& chunk, const std::uint8_t* h_out);

}  // namespace udf::rt
