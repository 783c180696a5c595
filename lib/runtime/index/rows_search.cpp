// Exact search and refine on a rows index (index/rows_search.h): the
// dataset bound (in place, or a copy with padded rows), the lists made, and
// the call run through the index search's pipeline, whose coarse stage
// writes every query's probes instead (index/search_stages.cpp).
#include <algorithm>

#include "cuda/launch.h"
#include "cuda/tensors.h"
#include "index/rows_search.h"
#include "index/schedule_plan.h"

namespace udf::rt {

namespace {

// The module's rows index of metric `metric` for the dataset's rows (a new
// one when the dimension changed).
udf_index* rows_index_of(udf_module* m, const char* metric, const udf_tensor* dataset) {
  require(dataset != nullptr, "dataset is NULL");
  require(dataset->cols >= 1 && dataset->cols <= 65536,
          [&] { return "dataset has " + std::to_string(dataset->cols) + " columns; expected 1 .. 65536"; });
  require(m != nullptr, "module is NULL");
  require(metric != nullptr, "metric is NULL");
  const auto dim = static_cast<uint32_t>(dataset->cols);
  const size_t mi = find_metric(m, metric);
  if (m->rows_indexes.size() < m->metrics.size()) m->rows_indexes.resize(m->metrics.size());
  std::shared_ptr<udf_index>& slot = m->rows_indexes[mi];
  if (!slot || slot->dim != dim) slot = std::shared_ptr<udf_index>(new_index(m, metric, dim, 1, false).release());
  return slot.get();
}

// The dataset's rows where the rows scans read them: the dataset itself when
// it is device memory whose rows are dim_padded elements apart from a
// 16-byte boundary, else a copy in d_list_data with rows padded so (the
// padding zero).
void bind_dataset(udf_index* ix, const udf_tensor* dataset) {
  udf_runtime* rt = ix->mod->rt;
  const int64_t stride = check_tensor(rt, dataset, "dataset", to_dtype(ix->elem), ix->dim);
  const int64_t n = dataset->rows;
  require(n >= 1, "dataset has no rows");
  require(n < (int64_t(1) << 32) - 64,
          [&] { return "dataset has " + std::to_string(n) + " rows; at most 2^32 - 64 are searched at once"; });
  ix->quiesce();  // the previous call's scan may read the copy
  const auto at = reinterpret_cast<std::uintptr_t>(dataset->data);
  if (dataset->device != UDF_HOST_DEVICE && stride == int64_t(ix->dim_padded) && at % 16 == 0) {
    ix->rows_data = static_cast<CUdeviceptr>(at);
    return;
  }
  const size_t row_bytes = size_t(ix->dim_padded) * ix->esize;
  ix->d_list_data.ensure(size_t(n) * row_bytes, "the dataset's rows (a copy with padded rows)");
  if (ix->dim != ix->dim_padded) CU(cuMemsetD8Async, ix->d_list_data.get(), 0, size_t(n) * row_bytes, rt->stream);
  const bool host = dataset->device == UDF_HOST_DEVICE;
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  if (host)
    c.srcHost = dataset->data;
  else
    c.srcDevice = static_cast<CUdeviceptr>(at);
  c.srcPitch = size_t(stride) * ix->esize;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = ix->d_list_data.get();
  c.dstPitch = row_bytes;
  c.WidthInBytes = size_t(ix->dim) * ix->esize;
  c.Height = static_cast<size_t>(n);
  CU(cuMemcpy2DAsync, &c, rt->stream);
  ix->rows_data = ix->d_list_data.get();
}

// Launches a rows kernel over `threads` threads (grid capped).
void launch_rows(udf_runtime* rt, IndexKernel k, uint64_t threads, udf_ivf_rows_args_v1& a) {
  const auto grid = static_cast<unsigned>(std::clamp<uint64_t>((threads + UDF_IVF_INDEX_V1_THREADS - 1) / UDF_IVF_INDEX_V1_THREADS,
                                                               1, uint64_t(rt->info.sm_count) * 32));
  launch(rt, rt->kernels[k], grid, 0, &a);
}

// The list tables from the host: n_lists lists of the given sizes and offsets.
void set_lists(udf_index* ix, std::vector<uint32_t> sizes, std::vector<uint64_t> offsets) {
  udf_runtime* rt = ix->mod->rt;
  upload(rt->stream, ix->d_sizes, sizes.data(), sizes.size() * 4, "list sizes");
  upload(rt->stream, ix->d_offsets, offsets.data(), offsets.size() * 8, "list offsets");
  ix->n_lists = static_cast<uint32_t>(sizes.size());
  ix->max_list_size = *std::max_element(sizes.begin(), sizes.end());
  ix->sizes = std::move(sizes);
  ix->offsets = std::move(offsets);
}

// Where candidates[q][j] (host or device) is, and its value, for a message.
std::string candidate_text(udf_runtime* rt, const udf_tensor* candidates, int64_t stride, uint64_t q, uint64_t j) {
  long long id = 0;
  const auto* p = static_cast<const long long*>(candidates->data) + q * uint64_t(stride) + j;
  if (candidates->device == UDF_HOST_DEVICE) {
    id = *p;
  } else {
    CU(cuMemcpyDtoHAsync, &id, reinterpret_cast<CUdeviceptr>(p), 8, rt->stream);
    sync(rt);
  }
  return "candidates[" + std::to_string(q) + "][" + std::to_string(j) + "] = " + std::to_string(id);
}

}  // namespace

udf_index* exact_index(udf_module* m, const char* metric, const udf_tensor* dataset, int64_t n_queries, uint32_t k) {
  udf_index* ix = rows_index_of(m, metric, dataset);
  bind_dataset(ix, dataset);
  const uint64_t n = static_cast<uint64_t>(dataset->rows);
  const uint64_t tile = exact_tile_rows(n, exact_tiles(m->rt->info.sm_count, n_queries, k));
  std::vector<uint32_t> sizes;
  std::vector<uint64_t> offsets;
  for (uint64_t r = 0; r < n; r += tile) {
    offsets.push_back(r);
    sizes.push_back(static_cast<uint32_t>(std::min(tile, n - r)));
  }
  // The previous call's tiles (the same dataset size and batch) are on the device already.
  if (ix->rows_mode != udf_index::RowsMode::Exact || ix->sizes != sizes || ix->offsets != offsets)
    set_lists(ix, std::move(sizes), std::move(offsets));
  // The slots' rows: 0 .. n-1, the last group's padding row 0.
  if (ix->rows_iota != n) {
    const uint64_t slots = (n + 31) / 32 * 32;
    ix->d_ids.ensure(slots * 8, "the rows of the slots");
    udf_ivf_rows_args_v1 a{};
    a.ids = ix->d_ids.as<long long>();
    a.n_rows = n;
    a.n_slots = slots;
    launch_rows(ix->mod->rt, IndexKernel::rows_iota, slots, a);
    ix->rows_iota = n;
  }
  ix->rows_mode = udf_index::RowsMode::Exact;
  return ix;
}

udf_index* refine_index(udf_module* m, const char* metric, const udf_tensor* dataset, const udf_tensor* candidates,
                        int64_t n_queries) {
  udf_index* ix = rows_index_of(m, metric, dataset);
  udf_runtime* rt = ix->mod->rt;
  require(candidates != nullptr, "candidates is NULL");
  require(candidates->cols >= 1 && candidates->cols <= 65536,
          [&] { return "candidates has " + std::to_string(candidates->cols) + " columns; expected 1 .. 65536 a query"; });
  require(n_queries >= 1 && n_queries <= 100000000, "too many queries");
  const int64_t stride = check_tensor(rt, candidates, "candidates", UDF_DTYPE_I64, candidates->cols, n_queries);
  bind_dataset(ix, dataset);
  const uint32_t m_cols = static_cast<uint32_t>(candidates->cols), m_pad = (m_cols + 31) / 32 * 32;
  const uint64_t nq = static_cast<uint64_t>(n_queries);
  require(nq * m_pad < 0xFFFFFFFFull - 64, "too many candidates in one call (queries x candidates rounded up to 32 "
                                           "is 2^32 or more): refine fewer queries at once");
  udf_ivf_rows_args_v1 a{};
  if (candidates->device == UDF_HOST_DEVICE) {
    upload(rt->stream, ix->d_candidates, candidates->data, nq * uint64_t(stride) * 8, "candidates");
    a.candidates = ix->d_candidates.as<const long long>();
  } else {
    a.candidates = static_cast<const long long*>(candidates->data);
  }
  ix->d_ids.ensure(nq * m_pad * 8, "the candidates' rows");
  ix->d_sizes.ensure(nq * 4, "candidate counts");
  ix->d_offsets.ensure(nq * 8, "candidate offsets");
  ix->d_bad.ensure(8, "the first bad candidate");
  ix->rows_iota = 0;
  CU(cuMemsetD8Async, ix->d_bad.get(), 0xFF, 8, rt->stream);
  a.ids = ix->d_ids.as<long long>();
  a.sizes = ix->d_sizes.as<uint32_t>();
  a.offsets = ix->d_offsets.as<uint64_t>();
  a.bad = ix->d_bad.as<unsigned long long>();
  a.cand_stride = static_cast<uint64_t>(stride);
  a.n_rows = static_cast<uint64_t>(dataset->rows);
  a.n_queries = static_cast<uint32_t>(nq);
  a.m = m_cols;
  a.m_pad = m_pad;
  launch(rt, rt->kernels[IndexKernel::rows_candidates], static_cast<unsigned>(nq), 0, &a);
  // The scans read only the rows the kernel kept; whether it dropped a bad
  // id comes back behind the search (check_candidates).
  ix->h_bad.ensure(8, "the first bad candidate");
  CU(cuMemcpyDtoHAsync, ix->h_bad.as<void>(), ix->d_bad.get(), 8, rt->stream);
  ix->n_lists = static_cast<uint32_t>(nq);
  ix->max_list_size = m_cols;
  ix->sizes.clear();
  ix->offsets.clear();
  ix->rows_mode = udf_index::RowsMode::Refine;
  return ix;
}

void search_rows(udf_index* ix, SearchCall call) {
  call.params.n_probes = ix->rows_mode == udf_index::RowsMode::Exact ? ix->n_lists : 1;
  search_index(ix, call);
}

void check_candidates(udf_index* ix, const udf_tensor* dataset, const udf_tensor* candidates) {
  udf_runtime* rt = ix->mod->rt;
  sync(rt);  // the search has waited for its stream already (refine is blocking): this returns at once
  const unsigned long long bad = *ix->h_bad.as<unsigned long long>();
  if (bad == ~0ull) return;
  const auto m_cols = static_cast<uint64_t>(candidates->cols);
  fail(UDF_ERROR_INVALID_ARGUMENT, candidate_text(rt, candidates, row_stride(*candidates), bad / m_cols, bad % m_cols) +
                                       " is not a row of the dataset (0 .. " + std::to_string(dataset->rows - 1) +
                                       "; -1 pads)");
}

}  // namespace udf::rt
