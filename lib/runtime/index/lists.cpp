// The lists on the GPU.  The device layout (docs/kernels.md) is the only
// copy of the lists: rows are assigned and placed there (index/add_rows.cpp),
// files are read into it (upload_lists) and written from it
// (download_lists).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cuda/context.h"
#include "cuda/launch.h"
#include "index/list_build.h"
#include "udf/kernels/ivf_flat_v1.h"

udf_index::~udf_index() {
  try {
    quiesce();
  } catch (...) {
  }
}

void udf_index::quiesce() { scratch.done.sync(); }

namespace udf::rt {

// Lists' offsets (in slots, each a multiple of 32) for `sizes`; the slot count.
uint64_t plan_offsets(const std::vector<uint32_t>& sizes, std::vector<uint64_t>& offsets) {
  offsets.assign(sizes.size(), 0);
  uint64_t slots = 0;
  for (size_t l = 0; l < sizes.size(); ++l) {
    offsets[l] = slots;
    slots += (uint64_t(sizes[l]) + 31) / 32 * 32;
  }
  if (slots >= 0xFFFFFFFFull)
    fail(UDF_ERROR_UNSUPPORTED, "the index would need " + std::to_string(slots) + " slots; at most 2^32 - 1");
  return slots;
}

// Rows <-> slots (udf_ivf_index_v1_list_rows) on rt's stream.
void list_rows(udf_runtime* rt, const udf_index* ix, uint32_t direction, CUdeviceptr rows, uint64_t row_stride,
               CUdeviceptr ids, uint64_t next_id, CUdeviceptr slots, uint32_t m, CUdeviceptr data, CUdeviceptr list_ids) {
  const uint32_t chunks = static_cast<uint32_t>(slot_bytes(ix) / 16);
  udf_ivf_list_rows_args_v1 a{reinterpret_cast<void*>(rows), reinterpret_cast<void*>(ids),
                              reinterpret_cast<const uint32_t*>(slots), reinterpret_cast<void*>(data),
                              reinterpret_cast<void*>(list_ids),
                              row_stride, group_bytes(ix), next_id, m,
                              static_cast<uint32_t>(size_t(ix->dim) * ix->esize), chunks, direction};
  const uint64_t threads = uint64_t(m) * chunks;
  const auto grid = static_cast<unsigned>(std::min<uint64_t>((threads + UDF_IVF_INDEX_V1_THREADS - 1) / UDF_IVF_INDEX_V1_THREADS,
                                                             uint64_t(1) << 20));
  launch(rt, rt->kernels[IndexKernel::list_rows], grid, 0, &a);
}

// Makes `lists`, sizes and offsets the index's (after the work on rt's
// stream that fills them); uploads the sizes, offsets and centroids.
void install(udf_index* ix, DeviceLists& lists, std::vector<uint32_t> sizes, std::vector<uint64_t> offsets) {
  udf_runtime* rt = ix->mod->rt;
  DevBuf d_offsets, d_sizes, d_centroids;
  upload(rt->stream, d_offsets, offsets.data(), offsets.size() * 8, "list offsets");
  upload(rt->stream, d_sizes, sizes.data(), sizes.size() * 4, "list sizes");
  upload(rt->stream, d_centroids, ix->centroids.data(), ix->centroids.size() * 4, "centroids");
  sync(rt);
  ix->quiesce();  // no search still reads the lists being replaced
  ix->d_list_data = std::move(lists.data);
  ix->d_ids = std::move(lists.ids);
  ix->d_offsets = std::move(d_offsets);
  ix->d_sizes = std::move(d_sizes);
  ix->d_centroids = std::move(d_centroids);
  ix->offsets = std::move(offsets);
  ix->sizes = std::move(sizes);
  ix->max_list_size = ix->sizes.empty() ? 0 : *std::max_element(ix->sizes.begin(), ix->sizes.end());
}

void upload_lists(udf_index* ix, const std::vector<std::vector<int64_t>>& ids, const std::vector<std::vector<std::uint8_t>>& vecs,
                  const ListPart& part) {
  udf_runtime* rt = ix->mod->rt;
  const size_t row_bytes = size_t(ix->dim) * ix->esize;
  std::vector<uint32_t> sizes(ix->n_lists);
  std::vector<uint32_t> first(ix->n_lists, 0);
  for (uint32_t l = 0; l < ix->n_lists; ++l) {
    const auto [b, e] = part ? part(l) : std::make_pair(0u, static_cast<uint32_t>(ids[l].size()));
    first[l] = b;
    sizes[l] = e - b;
  }
  std::vector<uint64_t> offsets;
  const uint64_t slots = plan_offsets(sizes, offsets);
  DeviceLists lists;
  lists.alloc(rt, ix, slots);
  // Lists a batch of about `chunk` rows at a time: rows, ids and slots gathered on the host.
  const size_t chunk = std::max<size_t>(1, (size_t(64) << 20) / row_bytes);
  std::vector<std::uint8_t> h_rows;
  std::vector<int64_t> h_ids;
  std::vector<uint32_t> h_slots;
  DevBuf d_rows, d_ids, d_slots;
  auto flush = [&] {
    if (h_slots.empty()) return;
    const size_t m = h_slots.size();
    upload(rt->stream, d_rows, h_rows.data(), h_rows.size(), "vectors");
    upload(rt->stream, d_ids, h_ids.data(), m * 8, "ids");
    upload(rt->stream, d_slots, h_slots.data(), m * 4, "slots");
    list_rows(rt, ix, 0, d_rows.get(), row_bytes, d_ids.get(), 0, d_slots.get(), static_cast<uint32_t>(m), lists.data.get(),
              lists.ids.get());
    sync(rt);
    h_rows.clear();
    h_ids.clear();
    h_slots.clear();
  };
  for (uint32_t l = 0; l < ix->n_lists; ++l) {
    if (sizes[l] == 0) continue;
    h_rows.insert(h_rows.end(), vecs[l].begin() + size_t(first[l]) * row_bytes,
                  vecs[l].begin() + size_t(first[l] + sizes[l]) * row_bytes);
    h_ids.insert(h_ids.end(), ids[l].begin() + first[l], ids[l].begin() + first[l] + sizes[l]);
    for (uint32_t i = 0; i < sizes[l]; ++i) h_slots.push_back(static_cast<uint32_t>(offsets[l] + i));
    if (h_slots.size() >= chunk) flush();
  }
  flush();
  install(ix, lists, std::move(sizes), std::move(offsets));
}

void copy_lists(udf_index* dst, const udf_index* src) {
  udf_runtime* rt = dst->mod->rt;
  const uint64_t slots = slot_count(src);
  DeviceLists lists;
  lists.data.alloc(slots * slot_bytes(src), "list data");
  lists.ids.alloc(slots * 8, "ids");
  CU(cuMemcpyDtoDAsync, lists.data.get(), src->d_list_data.get(), slots * slot_bytes(src), rt->stream);
  CU(cuMemcpyDtoDAsync, lists.ids.get(), src->d_ids.get(), slots * 8, rt->stream);
  install(dst, lists, src->sizes, src->offsets);
}

void download_lists(const udf_index* ix, const std::function<void(uint32_t, const int64_t*, const std::uint8_t*)>& sink) {
  udf_runtime* rt = ix->mod->rt;
  const size_t row_bytes = size_t(ix->dim) * ix->esize, pitch = slot_bytes(ix);
  const size_t chunk = std::max<size_t>(1, (size_t(64) << 20) / pitch);
  DevBuf d_rows, d_ids, d_slots;
  std::vector<std::uint8_t> h_rows, row_major;
  std::vector<int64_t> h_ids;
  std::vector<uint32_t> h_slots;
  for (uint32_t l0 = 0; l0 < ix->n_lists;) {
    uint32_t l1 = l0;
    h_slots.clear();
    do {  // at least one list a batch
      for (uint32_t i = 0; i < ix->sizes[l1]; ++i) h_slots.push_back(static_cast<uint32_t>(ix->offsets[l1] + i));
      ++l1;
    } while (l1 < ix->n_lists && h_slots.size() + ix->sizes[l1] <= chunk);
    const size_t m = h_slots.size();
    if (m > 0) {
      d_rows.ensure(m * pitch, "vectors");
      d_ids.ensure(m * 8, "ids");
      upload(rt->stream, d_slots, h_slots.data(), m * 4, "slots");
      list_rows(rt, ix, 1, d_rows.get(), pitch, d_ids.get(), 0, d_slots.get(), static_cast<uint32_t>(m),
                ix->d_list_data.get(), ix->d_ids.get());
      h_rows.resize(m * pitch);
      h_ids.resize(m);
      CU(cuMemcpyDtoHAsync, h_rows.data(), d_rows.get(), m * pitch, rt->stream);
      CU(cuMemcpyDtoHAsync, h_ids.data(), d_ids.get(), m * 8, rt->stream);
      sync(rt);
    }
    size_t at = 0;
    for (uint32_t l = l0; l < l1; ++l) {
      const uint32_t k = ix->sizes[l];
      row_major.resize(size_t(k) * row_bytes);
      for (uint32_t i = 0; i < k; ++i) std::memcpy(row_major.data() + size_t(i) * row_bytes, h_rows.data() + (at + i) * pitch, row_bytes);
      sink(l, h_ids.data() + at, row_major.data());
      at += k;
    }
    l0 = l1;
  }
}

std::unique_ptr<udf_index> new_index(udf_module* m, const char* metric, uint32_t dim, uint32_t n_lists, bool coarse) {
  require(m != nullptr, "module is NULL");
  require(metric != nullptr, "metric is NULL");
  const size_t mi = find_metric(m, metric);
  const ModuleArtifact& a = m->manifest.artifacts[mi];
  auto ix = std::make_unique<udf_index>();
  ix->mod = m;
  ix->metric = mi;
  ix->symbol = a.symbol;
  ix->elem = a.elem;
  ix->esize = elem_size(a.elem);
  ix->dim = dim;
  ix->dim_padded = UDF_IVF_V1_DIM_PADDED(dim, static_cast<uint32_t>(ix->esize));
  ix->n_lists = n_lists;
  ix->coarse = a.coarse_metric == CoarseMetric::L2 ? UDF_IVF_INDEX_V1_L2 : UDF_IVF_INDEX_V1_IP;
  ix->normalize = coarse && a.coarse_metric == CoarseMetric::Cosine;
  if (ix->normalize && (a.elem == ElemType::I8 || a.elem == ElemType::U8))
    fail(UDF_ERROR_UNSUPPORTED, "metric " + a.symbol + ": the cosine coarse metric needs f32 or f16 elements (vectors are "
                                "stored normalized); this one has " + std::string(to_string(a.elem)));
  return ix;
}

void set_coarse_weights(udf_index* ix, const float* w) {
  if (w == nullptr) return;
  if (ix->normalize)
    fail(UDF_ERROR_UNSUPPORTED, "metric " + ix->symbol + ": coarse_weights need an l2 or inner_product coarse metric; "
                                "this one's is cosine");
  ix->coarse_weights.assign(w, w + ix->dim);
  std::vector<float> scale(ix->dim);
  for (uint32_t d = 0; d < ix->dim; ++d) scale[d] = std::sqrt(ix->coarse_weights[d]);
  upload(ix->mod->rt->stream, ix->d_coarse_scale, scale.data(), scale.size() * 4, "coarse scale");
  CU(cuStreamSynchronize, ix->mod->rt->stream);  // before `scale` goes
}

void check_ids(udf_runtime* rt, const udf_tensor* ids, int64_t n, std::vector<int64_t>& out) {
  if (!ids) return;
  require(ids->dtype == UDF_DTYPE_I64, "ids must be i64, got " + dtype_name(ids->dtype));
  require(ids->rows * ids->cols == n && (ids->rows == 1 || ids->cols == 1),
          "ids has " + std::to_string(ids->rows) + " x " + std::to_string(ids->cols) + " values; expected " +
              std::to_string(n));
  udf_tensor t = *ids;
  t.rows = n;
  t.cols = 1;
  t.row_stride = 1;
  check_tensor(rt, &t, "ids", UDF_DTYPE_I64, 1);
  out.resize(static_cast<size_t>(n));
  rows_to_host(rt, &t, 1, 0, n, reinterpret_cast<std::uint8_t*>(out.data()));
}

}  // namespace udf::rt
