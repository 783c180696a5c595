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
// the faster (scan_choice.h; c.choice is set when this search's scan is to
// be timed).  The tests' kTestingPlainScan / kTestingPruningScan take one of
// them always.
const udf_module::Scan* scan_for(const Request& r, Chunk& c) {
  if (!r.plain_scan) return r.scan;
  if (testing_path(kTestingPlainScan)) return r.plain_scan;
  if (testing_path(kTestingPruningScan)) return r.scan;
  if (c.direct && c.direct_sched.tile_groups <= 4) return r.plain_scan;
  udf::rt::ScanChoice& choice = r.ix->scan_choice[udf::rt::ScanChoice::key(r.scan->k_max, r.P, c.nq)];
  // A blocking search reads its scan's time when it ends; an asynchronous
  // one leaves it for a later search (pending_choice), one at a time.
  const udf::rt::ScanChoice::Pick pick = choice.next(r.ix->s.pending_choice.choice == nullptr);
  if (pick.measure) {
    c.choice = &choice;
    c.choice_scan = pick.scan;
  }
  return pick.scan == udf::rt::ScanChoice::kPlain ? r.plain_scan : r.scan;
}

// Near first, for a pruning scan: a list-major schedule takes each query's
// nearest list before its other probes, as a list of its own
// (ivf_index_v1.h), so that they meet the bound it sets.  A direct schedule
// keeps its order: a single query's nearest list launched first costs more
// on uniform data than it saves on clustered data.
bool near_first_for(const Chunk& c) {
  return c.scan->prune && !testing_path(kTestingNoNearFirst);
}

// The scratch of stages 1 and 2 for up to r.chunk queries: the uploaded
// and the normalized queries and their probes (and the wait for the
// previous search where the coarse keys are to grow).
void grow_coarse_scratch(Request& r) {
  udf_index* ix = r.ix;
  const size_t row_bytes = size_t(ix->dim) * ix->esize;
  // (Whole 4-byte words: the inline coarse kernel stores them so.)
  if (r.queries->device == UDF_HOST_DEVICE)
    grow(ix, ix->s.queries, (size_t(r.chunk) * row_bytes + 3) / 4 * 4, "queries");
  if (ix->normalize) grow(ix, ix->s.qnorm, size_t(r.chunk) * row_bytes, "normalized queries");
  grow(ix, ix->s.probes, size_t(r.chunk) * r.P * 4, "probes");
  if (ix->s.keys.bytes() < size_t(r.chunk) * ix->n_lists * 4) ix->quiesce();  // nearest_centroids may grow it
}

// The scan's shared memory (c.scan_smem) for the chunk's queries per item.
// Shared memory by ABI: v1, v2 state (its state words a (query, thread))
// or v2 vector (plus stage_rows staged rows a warp: enough that rows x
// queries fill the 32 lanes, ivf_flat_v1.h).  Over the device's limit,
// fewer staged rows first (vector), then fewer queries per item
// (schedule_plan.h, fit_scan_smem): c.stage_rows and c.qpi as fitted.
void fit_smem(const Request& r, Chunk& c) {
  udf_index* ix = r.ix;
  const size_t filter_smem = r.filter >= 0 ? UDF_IVF_SCAN_V1_FILTER_SMEM_BYTES : 0;
  const std::optional<MetricShape> shape = r.art->shape;
  auto smem = [&](uint32_t qpi, uint32_t stage_rows) {
    const uint32_t dp = ix->dim_padded;
    if (shape == MetricShape::State)
      return size_t(UDF_IVF_SCAN_V2_STATE_SMEM_BYTES(qpi, r.S, dp, state_words_of(*r.art))) + filter_smem;
    if (shape == MetricShape::Vector)
      return size_t(UDF_IVF_SCAN_V2_VECTOR_SMEM_BYTES(size_t(qpi), size_t(r.S), size_t(dp), size_t(stage_rows))) + filter_smem;
    return size_t(UDF_IVF_SCAN_V1_SMEM_BYTES(qpi, r.S, dp)) + filter_smem;
  };
  const size_t limit = static_cast<size_t>(r.rt->max_smem_optin) - 1024;
  const ScanSmem s = fit_scan_smem(shape, c.qpi, limit, smem);
  c.qpi = s.qpi;
  c.stage_rows = s.stage_rows;
  c.scan_smem = s.bytes;
}

// The chosen scan's shared memory on its function (refused beyond the
// device's limit).
void prepare_scan(const Request& r, const Chunk& c) {
  prepare_smem(r.rt, c.scan->fn, c.scan_smem, [&] {
    return "the scan for k = " + std::to_string(r.k) + ", dim = " + std::to_string(r.ix->dim) + ", " +
           std::to_string(c.qpi) + " queries per item" +
           (r.art->shape == MetricShape::Vector ? ", " + std::to_string(c.stage_rows) + " staged rows per warp"
                                                : std::string());
  });
}

// A direct schedule (written by the coarse selection): its scratch and
// arguments.  One buffer: query_rows (nq + 1 words), then four statistics
// words a query (copied like a list-major header), then with a tail merge
// each query's row range (two words): 7 * nq + 1 words.
void prepare_direct(Request& r, Chunk& c) {
  udf_index* ix = r.ix;
  const uint32_t nq = c.nq;
  const uint64_t pairs = uint64_t(nq) * r.P;
  // A scan with a tail merge takes each probe's own tiles and merges the
  // rows itself; one without, every probe in as many tiles as the longest
  // list and the merge kernel (also the tests' kTestingNoTailMerge).  A
  // shard by vectors whose scan reads ids returns tie keys through the merge
  // kernel only.
  c.tail = c.scan->tail_merge && !testing_path(kTestingNoTailMerge) && !(ix->d_keys.get() && scan_reads_ids(r));
  c.items_max = c.rows_max = static_cast<uint32_t>(pairs * c.direct_sched.tiles);
  grow(ix, ix->s.sched, (7 * size_t(nq) + 1) * 4, "the schedule");
  grow(ix, ix->s.items, size_t(c.items_max) * sizeof(udf_ivf_work_item_v1), "work items");
  grow(ix, ix->s.pairs, size_t(c.rows_max) * sizeof(udf_ivf_pair_v1), "pairs");
  uint32_t* w = ix->s.sched.as<uint32_t>();
  c.sched = udf_ivf_sched_args_v1{};
  c.sched.query_rows = w;
  c.sched.header = w + nq + 1;  // the per-query statistics, copied like the header
  c.direct_sched.list_sizes = ix->d_sizes.as<const uint32_t>();
  c.direct_sched.items = ix->s.items.as<void>();
  c.direct_sched.pairs = ix->s.pairs.as<void>();
  c.direct_sched.query_rows = c.sched.query_rows;
  // The statistics: a blocking search has the selection write them to the
  // mapped staging (read after the wait; run()), no copy.
  c.direct_sched.query_stats = r.blocking ? reinterpret_cast<uint32_t*>(ix->s.h_header.device()) : c.sched.header;
  if (c.tail) {
    c.direct_sched.row_ranges = c.sched.header + 4 * size_t(nq);
    // The tail merge's arrival counts: zero when allocated, left zero by every scan.
    if (ix->s.query_done.bytes() < size_t(nq) * 4) {
      ix->quiesce();
      ix->s.query_done.ensure(size_t(nq) * 4, "tail merge counts");
      CU(cuMemsetD32Async, ix->s.query_done.get(), 0, ix->s.query_done.bytes() / 4, r.stream);
    }
  }
}

// A list-major schedule (built on the GPU by stage_schedule): its bounds on
// items and rows (schedule_plan.h, list_major_bounds), its scratch and its
// argument block.
void prepare_list_major(Request& r, Chunk& c) {
  udf_index* ix = r.ix;
  const uint32_t L = ix->n_lists, nq = c.nq, P = r.P;
  const uint64_t pairs = uint64_t(nq) * P;
  const uint32_t target = item_target(r.rt->info.sm_count);
  // NEAR FIRST (ivf_index_v1.h) for a pruning scan: each query's nearest
  // list before its other probes.
  const bool near_first = near_first_for(c);
  const ListMajorBounds b = list_major_bounds(nq, P, L, c.qpi, target, near_first);
  if (!b.fits) fail(UDF_ERROR_UNSUPPORTED, "too many (query, list) pairs in one chunk: lower max_batch");
  c.items_max = static_cast<uint32_t>(b.items_max);
  c.rows_max = static_cast<uint32_t>(b.rows_max);
  grow(ix, ix->s.sched, b.sched_words * 4, "the schedule");
  grow(ix, ix->s.items, b.items_max * sizeof(udf_ivf_work_item_v1), "work items");
  grow(ix, ix->s.pairs, b.rows_max * sizeof(udf_ivf_pair_v1), "pairs");
  // The buffer's layout (ListMajorBounds::sched_words): counts, fill,
  // list_start, tiles, item_start, pair_start (SL each), header, by_list
  // and row_offset (pairs each), query_rows (nq + 1).
  const uint32_t SL = b.sched_lists;  // the schedule's lists
  uint32_t* w = ix->s.sched.as<uint32_t>();
  udf_ivf_sched_args_v1& a = c.sched;
  a = udf_ivf_sched_args_v1{};
  a.probes = ix->s.probes.as<const uint32_t>();
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
  a.items = ix->s.items.as<void>();
  a.pairs = ix->s.pairs.as<void>();
  a.n_queries = nq;
  a.n_probes = P;
  a.n_lists = L;
  a.qpi = c.qpi;
  a.target = target;
  a.rows_extra = static_cast<uint32_t>(b.rows_extra);
  a.items_max = c.items_max;
}

}  // namespace

// Before the coarse probe: the chunk's queries per item, the scan's shared
// memory, which schedule (direct or list-major), the bounds on items and
// rows, and the scratch they need.  The decisions are schedule_plan.h's
// (pure rules, tested on the CPU); this applies them.
void plan_schedule(Request& r, Chunk& c) {
  grow_coarse_scratch(r);
  // Queries per item: the search's, or from the mean queries per probed list.
  c.qpi = r.qpi_param ? r.qpi_param
                      : queries_per_item(c.nq, r.P, r.ix->n_lists, r.scan->recommended_qpi, r.art->shape,
                                         state_words_of(*r.art), r.scan->k_max);
  fit_smem(r, c);
  // Tiny batches: a direct (query-major) schedule, cut into tiles (schedule_plan.h, direct_tiles).
  const std::optional<DirectTiles> d =
      direct_tiles(c.qpi, uint64_t(c.nq) * r.P, item_target(r.rt->info.sm_count), r.ix->max_list_size, r.k);
  c.direct = d.has_value();
  if (d) {
    c.direct_sched.tile_groups = d->tile_groups;
    c.direct_sched.tiles = d->tiles;
  }
  c.scan = scan_for(r, c);
  if (!r.qpi_param && !c.direct && r.filter < 0) {  // the chosen scan's own (schedule_plan.h, list_major_qpi; unfiltered: measured so)
    const uint32_t q = list_major_qpi(c.qpi, c.nq, r.P, r.ix->n_lists, c.scan->prune);
    if (q != c.qpi) {
      c.qpi = q;
      fit_smem(r, c);
    }
  }
  prepare_scan(r, c);
  if (c.direct) prepare_direct(r, c);
  else prepare_list_major(r, c);
}

// Stage 3: the list-major schedule, on the GPU (include/udf/kernels/ivf_index_v1.h).
void stage_schedule(Request& r, Chunk& c) {
  if (c.direct) return;  // written by the coarse selection
  udf_runtime* rt = r.rt;
  udf_index* ix = r.ix;
  udf_ivf_sched_args_v1& a = c.sched;
  const uint64_t pairs = uint64_t(c.nq) * r.P;
  const uint64_t items_max = c.items_max;
  const uint32_t L = ix->n_lists, nq = c.nq;
  constexpr unsigned kThreads = UDF_IVF_INDEX_V1_THREADS, kPlan = UDF_IVF_SCHED_V1_PLAN_THREADS;
  // One block does it all up to kSmallSchedule pairs (and items): beyond,
  // its loops cost more than the grids' extra launches.
  constexpr uint64_t kSmallSchedule = 4096;
  if (pairs <= kSmallSchedule && items_max <= kSmallSchedule) {
    launch_on(r.stream, rt->kernels[IndexKernel::sched_small], 1, 1, kPlan, 0, &a);
    return;
  }
  // counts and fill (the schedule's lists each: 2 * L with NEAR FIRST)
  CU(cuMemsetD32Async, reinterpret_cast<CUdeviceptr>(a.counts), 0, 2 * size_t(a.near_first ? 2 * L : L), r.stream);
  CU(cuMemsetD32Async, ix->s.items.get(), 0, items_max * sizeof(udf_ivf_work_item_v1) / 4, r.stream);
  const uint64_t cap = uint64_t(rt->info.sm_count) * 16;
  auto blocks = [&](uint64_t threads) { return static_cast<unsigned>(std::min<uint64_t>(cap, (threads + kThreads - 1) / kThreads)); };
  // BLOCK HISTOGRAMS (ivf_index_v1.cu): where lists have 128 pairs or more
  // on average, the count and the scatter count each block's pairs in
  // shared memory, a word a schedule list, if that fits without opting in
  // (48 KB: 12288 lists); else a global add a pair (H100, 1M x 128, 1024
  // lists: batch 10k P128's schedule 0.296 -> 0.118 ms, P32's 0.100 ->
  // 0.071; batch 1000 P128, 125 pairs a list, 0.053 -> 0.059: its few
  // blocks' runs are longer than its adds' contention).
  const size_t lists = a.near_first ? 2 * size_t(L) : L;
  const bool hist = pairs >= 128 * lists && 4 * lists <= 48 * 1024;
  const unsigned hist_smem = hist ? static_cast<unsigned>(4 * lists) : 0u;
  launch_on(r.stream, rt->kernels[IndexKernel::sched_count], blocks(pairs), 1, kThreads, hist_smem, &a);
  launch_on(r.stream, rt->kernels[IndexKernel::sched_plan], 1, 1, kPlan, 0, &a);
  launch_on(r.stream, rt->kernels[IndexKernel::sched_scatter_rows], blocks(std::max<uint64_t>(pairs, uint64_t(nq) * 32)), 1, kThreads, hist_smem, &a);
  launch_on(r.stream, rt->kernels[IndexKernel::sched_query_rows], 1, 1, kPlan, 0, &a);
  launch_on(r.stream, rt->kernels[IndexKernel::sched_fill], blocks(pairs), 1, kThreads, 0, &a);
}

}  // namespace udf::rt
