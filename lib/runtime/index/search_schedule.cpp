// The search's schedule: how a chunk's scan is cut into work items (the
// rules in index/schedule_plan.h, applied here), which scan runs (the scan
// choice), and the list-major schedule built on the GPU.
#include <algorithm>
#include <cstring>
#include <optional>

#include "cuda/launch.h"
#include "index/schedule_plan.h"
#include "index/search_request.h"
#include "index/testing_paths.h"

namespace udf::rt {

namespace {

// The scan choice: a monotone metric's pruning scan (launch.prune,
// ivf_flat_v1.h) drops a vector once its partial key is beyond the query's
// bound, which comes from items that ran before (through query_bound) or
// from the same item's earlier steps.  A direct schedule of one step an item
// (tile_groups 4, one group a warp) runs all its items at once, so nothing
// is there to prune with and the checks only cost: it takes the plain scan
// where the module has one.  Elsewhere the data decides (well-separated
// clusters let it drop most vectors, overlapping ones too few to pay for its
// checks), so each index measures both scans, per kind of search, and takes
// the faster (scan_choice.h; chunk.choice is set when this search's scan is to
// be timed).  The tests' kTestingPlainScan / kTestingPruningScan take one of
// them always.
const udf_module::Scan* scan_for(const Request& request, Chunk& chunk) {
  if (!request.plain_scan) return request.scan;
  if (testing_path(kTestingPlainScan)) return request.plain_scan;
  if (testing_path(kTestingPruningScan)) return request.scan;
  if (chunk.direct && chunk.direct_sched.tile_groups <= 4) return request.plain_scan;
  udf::rt::ScanChoice& choice = request.ix->scan_choice[udf::rt::ScanChoice::key(request.scan->k_max, request.filter, request.n_probes, chunk.nq)];
  // A blocking search reads its scan's time when it ends; an asynchronous
  // one leaves it for a later search (pending_choice), one at a time.
  const udf::rt::ScanChoice::Pick pick = choice.next(request.ix->scratch.pending_choice.choice == nullptr);
  if (pick.measure) {
    chunk.choice = &choice;
    chunk.choice_scan = pick.scan;
  }
  return pick.scan == udf::rt::ScanChoice::kPlain ? request.plain_scan : request.scan;
}

// Near first, for a pruning scan: a list-major schedule takes each query's
// nearest list before its other probes, as a list of its own
// (ivf_index_v1.h), so that they meet the bound it sets.  A direct schedule
// keeps its order: a single query's nearest list launched first costs more
// on uniform data than it saves on clustered data.
bool near_first_for(const Chunk& chunk) {
  return chunk.scan->prune && !testing_path(kTestingNoNearFirst);
}

// The scratch of stages 1 and 2 for up to request.chunk_queries queries: the uploaded,
// normalized and scaled queries and their probes (and the wait for the
// previous search where the coarse keys are to grow).
void grow_coarse_scratch(Request& request) {
  udf_index* ix = request.ix;
  const size_t row_bytes = size_t(ix->dim) * ix->esize;
  // (Whole 4-byte words: the inline coarse kernel stores them so.)
  if (request.queries->device == UDF_HOST_DEVICE)
    grow(ix, ix->scratch.queries, (size_t(request.chunk_queries) * row_bytes + 3) / 4 * 4, "queries");
  if (ix->normalize) grow(ix, ix->scratch.qnorm, size_t(request.chunk_queries) * row_bytes, "normalized queries");
  if (!ix->coarse_weights.empty()) grow(ix, ix->scratch.qcoarse, size_t(request.chunk_queries) * ix->dim * 4, "scaled queries");
  grow(ix, ix->scratch.probes, size_t(request.chunk_queries) * request.n_probes * 4, "probes");
  if (ix->scratch.keys.bytes() < size_t(request.chunk_queries) * ix->n_lists * 4) ix->quiesce();  // nearest_centroids may grow it
}

// The scan's shared memory (chunk.scan_smem) for the chunk's queries per item.
// Shared memory by ABI: v1, v2 state (its state words a (query, thread))
// or v2 vector (plus stage_rows staged rows a warp: enough that rows x
// queries fill the 32 lanes, ivf_flat_v1.h); a rows index's v1 and state
// scans add their row stage (ivf_flat_v1.h, ROWS LAYOUT).  Over the
// device's limit, fewer staged rows first (vector), then fewer queries per
// item (schedule_plan.h, fit_scan_smem): chunk.stage_rows and chunk.qpi as fitted.
void fit_smem(const Request& request, Chunk& chunk) {
  udf_index* ix = request.ix;
  const std::optional<MetricShape> shape = request.art->shape;
  const bool row_stage = ix->rows_mode != udf_index::RowsMode::None && shape != MetricShape::Vector;
  const size_t extra = (request.filter >= 0 ? UDF_IVF_SCAN_V1_FILTER_SMEM_BYTES : 0) +
                       (row_stage ? UDF_IVF_SCAN_ROWS_STAGE_BYTES : 0);
  auto smem = [&](uint32_t qpi, uint32_t stage_rows) {
    const uint32_t dp = ix->dim_padded;
    if (shape == MetricShape::State)
      return size_t(UDF_IVF_SCAN_V2_STATE_SMEM_BYTES(qpi, request.sort_capacity, dp, state_words_of(*request.art))) + extra;
    if (shape == MetricShape::Vector)
      return size_t(UDF_IVF_SCAN_V2_VECTOR_SMEM_BYTES(size_t(qpi), size_t(request.sort_capacity), size_t(dp), size_t(stage_rows))) + extra;
    return size_t(UDF_IVF_SCAN_V1_SMEM_BYTES(qpi, request.sort_capacity, dp)) + extra;
  };
  const size_t limit = static_cast<size_t>(request.rt->max_smem_optin) - 1024;
  const ScanSmem s = fit_scan_smem(shape, chunk.qpi, limit, smem);
  chunk.qpi = s.qpi;
  chunk.stage_rows = s.stage_rows;
  chunk.scan_smem = s.bytes;
}

// A rows scan's copied row stage (ivf_flat_v1.h, ROWS LAYOUT: the warp's
// next batch of rows in flight while one folds), where the scan's entry has
// one (its cubins for sm_80 and newer: cp.async), the device is one of those,
// and either the scan folds the chunk's items as a tile with it (an
// unfiltered v1 f32 scan at its tile_queries an item: TILED FOLD) or the
// larger stage keeps as many blocks an SM as the smaller one (the driver's
// occupancy count, with the entry's registers): a refine's one query an item
// has shared memory to spare, an exact search's 16 do not.
void choose_row_stage(const Request& request, Chunk& chunk) {
  const udf_module::Scan& scan = *chunk.scan;
  if (!scan.copied_stage || request.rt->info.arch < 80) return;
  const size_t copied = chunk.scan_smem - UDF_IVF_SCAN_ROWS_STAGE_BYTES + UDF_IVF_SCAN_ROWS_STAGE_COPIED_BYTES;
  if (copied > static_cast<size_t>(request.rt->max_smem_optin) - 1024) return;
  const bool tiled = scan.tile_queries != 0 && chunk.qpi == scan.tile_queries && request.filter < 0 && !testing_path(kTestingNoTile);
  if (!tiled) {
    int now = 0, then = 0;
    CU(cuOccupancyMaxActiveBlocksPerMultiprocessor, &now, scan.fn, UDF_IVF_V1_BLOCK_THREADS, chunk.scan_smem);
    CU(cuOccupancyMaxActiveBlocksPerMultiprocessor, &then, scan.fn, UDF_IVF_V1_BLOCK_THREADS, copied);
    if (then < now) return;
  }
  chunk.scan_smem = copied;
  chunk.stage_rows = UDF_IVF_SCAN_ROWS_STAGE_COPIED;
}

// The chosen scan's shared memory on its function (refused beyond the
// device's limit).
void prepare_scan(const Request& request, const Chunk& chunk) {
  prepare_smem(request.rt, chunk.scan->fn, chunk.scan_smem, [&] {
    return "the scan for k = " + std::to_string(request.k) + ", dim = " + std::to_string(request.ix->dim) + ", " +
           std::to_string(chunk.qpi) + " queries per item" +
           (request.art->shape == MetricShape::Vector ? ", " + std::to_string(chunk.stage_rows) + " staged rows per warp"
                                                : std::string());
  });
}

// A direct schedule (written by the coarse selection): its scratch and
// arguments.  One buffer: query_rows (nq + 1 words), then four statistics
// words a query (copied like a list-major header), then with a tail merge
// each query's row range (two words): 7 * nq + 1 words.
void prepare_direct(Request& request, Chunk& chunk) {
  udf_index* ix = request.ix;
  const uint32_t nq = chunk.nq;
  const uint64_t pairs = uint64_t(nq) * request.n_probes;
  // A scan with a tail merge takes each probe's own tiles and merges the
  // rows itself; one without, every probe in as many tiles as the longest
  // list and the merge kernel (also the tests' kTestingNoTailMerge).  A
  // shard by vectors whose scan reads ids returns tie keys through the merge
  // kernel only.
  chunk.tail = chunk.scan->tail_merge && !testing_path(kTestingNoTailMerge) && !(ix->d_keys.get() && scan_reads_ids(request));
  chunk.items_max = chunk.rows_max = static_cast<uint32_t>(pairs * chunk.direct_sched.tiles);
  grow(ix, ix->scratch.sched, (7 * size_t(nq) + 1) * 4, "the schedule");
  grow(ix, ix->scratch.items, size_t(chunk.items_max) * sizeof(udf_ivf_work_item_v1), "work items");
  grow(ix, ix->scratch.pairs, size_t(chunk.rows_max) * sizeof(udf_ivf_pair_v1), "pairs");
  uint32_t* w = ix->scratch.sched.as<uint32_t>();
  chunk.sched = udf_ivf_sched_args_v1{};
  chunk.sched.query_rows = w;
  chunk.sched.header = w + nq + 1;  // the per-query statistics, copied like the header
  chunk.direct_sched.list_sizes = ix->d_sizes.as<const uint32_t>();
  chunk.direct_sched.items = ix->scratch.items.as<void>();
  chunk.direct_sched.pairs = ix->scratch.pairs.as<void>();
  chunk.direct_sched.query_rows = chunk.sched.query_rows;
  // The statistics: a blocking search has the selection write them to the
  // mapped staging (read after the wait; run()), no copy.
  chunk.direct_sched.query_stats = request.blocking ? reinterpret_cast<uint32_t*>(ix->scratch.h_header.device()) : chunk.sched.header;
  if (chunk.tail) {
    chunk.direct_sched.row_ranges = chunk.sched.header + 4 * size_t(nq);
    // The tail merge's arrival counts: zero when allocated, left zero by every scan.
    if (ix->scratch.query_done.bytes() < size_t(nq) * 4) {
      ix->quiesce();
      ix->scratch.query_done.ensure(size_t(nq) * 4, "tail merge counts");
      CU(cuMemsetD32Async, ix->scratch.query_done.get(), 0, ix->scratch.query_done.bytes() / 4, request.stream);
    }
  }
}

// A list-major schedule (built on the GPU by stage_schedule): its bounds on
// items and rows (schedule_plan.h, list_major_bounds), its scratch and its
// argument block.
void prepare_list_major(Request& request, Chunk& chunk) {
  udf_index* ix = request.ix;
  const uint32_t L = ix->n_lists, nq = chunk.nq, n_probes = request.n_probes;
  const uint64_t pairs = uint64_t(nq) * n_probes;
  const uint32_t target = item_target(request.rt->info.sm_count);
  // Near first (ivf_index_v1.h) for a pruning scan: each query's nearest
  // list before its other probes.
  const bool near_first = near_first_for(chunk);
  const ListMajorBounds b = list_major_bounds(nq, n_probes, L, chunk.qpi, target, near_first);
  if (!b.fits) fail(UDF_ERROR_UNSUPPORTED, "too many (query, list) pairs in one chunk: lower max_batch");
  chunk.items_max = static_cast<uint32_t>(b.items_max);
  chunk.rows_max = static_cast<uint32_t>(b.rows_max);
  grow(ix, ix->scratch.sched, b.sched_words * 4, "the schedule");
  grow(ix, ix->scratch.items, b.items_max * sizeof(udf_ivf_work_item_v1), "work items");
  grow(ix, ix->scratch.pairs, b.rows_max * sizeof(udf_ivf_pair_v1), "pairs");
  // The buffer's layout (ListMajorBounds::sched_words): counts, fill,
  // list_start, tiles, item_start, pair_start (SL each), header, by_list
  // and row_offset (pairs each), query_rows (nq + 1).
  const uint32_t SL = b.sched_lists;  // the schedule's lists
  uint32_t* w = ix->scratch.sched.as<uint32_t>();
  udf_ivf_sched_args_v1& a = chunk.sched;
  a = udf_ivf_sched_args_v1{};
  a.probes = ix->scratch.probes.as<const uint32_t>();
  a.list_sizes = ix->d_sizes.as<const uint32_t>();
  a.counts = w;
  a.fill = w + SL;
  a.list_start = w + 2 * size_t(SL);
  a.tiles = w + 3 * size_t(SL);
  a.item_start = w + 4 * size_t(SL);
  a.pair_start = w + 5 * size_t(SL);
  a.header = w + 6 * size_t(SL);
  a.near_first = near_first ? 1u : 0u;
  a.by_list = a.header + UDF_IVF_SCHED_V1_HEADER_WORDS;
  a.row_offset = a.by_list + pairs;
  a.query_rows = a.row_offset + pairs;
  a.items = ix->scratch.items.as<void>();
  a.pairs = ix->scratch.pairs.as<void>();
  a.n_queries = nq;
  a.n_probes = n_probes;
  a.n_lists = L;
  a.qpi = chunk.qpi;
  a.target = target;
  a.rows_extra = static_cast<uint32_t>(b.rows_extra);
  a.items_max = chunk.items_max;
}

}  // namespace

// Before the coarse probe: the chunk's queries per item, the scan's shared
// memory, which schedule (direct or list-major), the bounds on items and
// rows, and the scratch they need.  The decisions are schedule_plan.h's
// (pure rules, tested on the CPU); this applies them.
void plan_schedule(Request& request, Chunk& chunk) {
  grow_coarse_scratch(request);
  // Queries per item: the search's, or from the mean queries per probed list.
  chunk.qpi = chunk_queries_per_item(request, chunk.nq, request.scan->recommended_qpi, request.scan->k_max);
  fit_smem(request, chunk);
  // Tiny batches: a direct (query-major) schedule, cut into tiles
  // (schedule_plan.h, direct_tiles), which the coarse selection writes.
  // Rows lists have no coarse stage: exact search takes the list-major
  // schedule, and refine (a query, its own list) a direct one of one item a
  // query, which the kernel rows_direct writes (stage_queries_and_coarse).
  const udf_index::RowsMode rows_mode = request.ix->rows_mode;
  const std::optional<DirectTiles> d =
      rows_mode == udf_index::RowsMode::Refine ? std::optional<DirectTiles>(DirectTiles{(request.ix->max_list_size + 31) / 32, 1})
      : rows_mode == udf_index::RowsMode::Exact
          ? std::nullopt
          : direct_tiles(chunk.qpi, uint64_t(chunk.nq) * request.n_probes, item_target(request.rt->info.sm_count),
                         request.ix->max_list_size, request.k);
  chunk.direct = d.has_value();
  if (d) {
    chunk.direct_sched.tile_groups = d->tile_groups;
    chunk.direct_sched.tiles = d->tiles;
  }
  chunk.scan = scan_for(request, chunk);
  if (chunk.scan->direct_only && !chunk.direct)  // (make_request takes a twin for a direct schedule only)
    fail(UDF_ERROR_INTERNAL, "the direct-only scan " + chunk.scan->name + " was chosen for a list-major schedule");
  // The chosen scan's own queries per item (schedule_plan.h, list_major_qpi; unfiltered scans only).
  if (!request.qpi_param && !chunk.direct && request.filter < 0) {
    const uint32_t q = list_major_qpi(chunk.qpi, chunk.nq, request.n_probes, request.ix->n_lists, chunk.scan->prune,
                                      rows_mode == udf_index::RowsMode::Exact);
    if (q != chunk.qpi) {
      chunk.qpi = q;
      fit_smem(request, chunk);
    }
  }
  if (chunk.scan->rows) choose_row_stage(request, chunk);
  prepare_scan(request, chunk);
  if (chunk.direct) prepare_direct(request, chunk);
  else prepare_list_major(request, chunk);
}

// Stage 3: the list-major schedule, on the GPU (include/udf/kernels/ivf_index_v1.h).
void stage_schedule(Request& request, Chunk& chunk) {
  if (chunk.direct) return;  // written by the coarse selection
  udf_runtime* rt = request.rt;
  udf_index* ix = request.ix;
  udf_ivf_sched_args_v1& a = chunk.sched;
  const uint64_t pairs = uint64_t(chunk.nq) * request.n_probes;
  const uint64_t items_max = chunk.items_max;
  const uint32_t L = ix->n_lists, nq = chunk.nq;
  constexpr unsigned kThreads = UDF_IVF_INDEX_V1_THREADS, kPlan = UDF_IVF_SCHED_V1_PLAN_THREADS;
  // One block does it all up to kSmallSchedule pairs (and items): beyond,
  // its loops cost more than the grids' extra launches.
  constexpr uint64_t kSmallSchedule = 4096;
  if (pairs <= kSmallSchedule && items_max <= kSmallSchedule) {
    launch_on(request.stream, rt->kernels[IndexKernel::sched_small], 1, 1, kPlan, 0, &a);
    return;
  }
  // counts and fill (the schedule's lists each: 2 * L with near first)
  CU(cuMemsetD32Async, reinterpret_cast<CUdeviceptr>(a.counts), 0, 2 * size_t(a.near_first ? 2 * L : L), request.stream);
  CU(cuMemsetD32Async, ix->scratch.items.get(), 0, items_max * sizeof(udf_ivf_work_item_v1) / 4, request.stream);
  const uint64_t cap = uint64_t(rt->info.sm_count) * 16;
  auto blocks = [&](uint64_t threads) { return static_cast<unsigned>(std::min<uint64_t>(cap, (threads + kThreads - 1) / kThreads)); };
  // Block histograms (ivf_index_v1.h): where lists have 128 pairs or more
  // on average, the count and the scatter count each block's pairs in
  // shared memory, a word a schedule list, if that fits without opting in
  // (48 KB: 12288 lists); else a global add a pair (with fewer pairs a list,
  // the few blocks' runs cost more than the adds' contention).
  const size_t lists = a.near_first ? 2 * size_t(L) : L;
  const bool hist = pairs >= 128 * lists && 4 * lists <= 48 * 1024;
  const unsigned hist_smem = hist ? static_cast<unsigned>(4 * lists) : 0u;
  launch_on(request.stream, rt->kernels[IndexKernel::sched_count], blocks(pairs), 1, kThreads, hist_smem, &a);
  launch_on(request.stream, rt->kernels[IndexKernel::sched_plan], 1, 1, kPlan, 0, &a);
  launch_on(request.stream, rt->kernels[IndexKernel::sched_scatter_rows], blocks(std::max<uint64_t>(pairs, uint64_t(nq) * 32)), 1, kThreads, hist_smem, &a);
  launch_on(request.stream, rt->kernels[IndexKernel::sched_query_rows], 1, 1, kPlan, 0, &a);
  launch_on(request.stream, rt->kernels[IndexKernel::sched_fill], blocks(pairs), 1, kThreads, 0, &a);
}

}  // namespace udf::rt
