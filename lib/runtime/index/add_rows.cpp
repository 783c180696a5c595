// Rows added to an index: pass 1 stages each chunk of rows on the device
// and finds its nearest lists, the host makes the balanced assignment and
// the new layout, pass 2 scatters the rows into it after the old lists.
#include <algorithm>
#include <cstring>
#include <memory>

#include "cuda/context.h"
#include "cuda/launch.h"
#include "index/list_build.h"

namespace udf::rt {

// Copies rows [r0, r0 + m) of a host or device tensor to dst, row_bytes apart, on `stream`.
void copy_rows(CUstream stream, const udf_tensor* t, int64_t stride, int64_t r0, int64_t m, CUdeviceptr dst) {
  const size_t es = udf_dtype_size(t->dtype), row_bytes = size_t(t->cols) * es;
  const auto* base = static_cast<const std::uint8_t*>(t->data) + size_t(r0) * size_t(stride) * es;
  const bool host = t->device == UDF_HOST_DEVICE;
  if (stride == t->cols) {
    if (host)
      CU(cuMemcpyHtoDAsync, dst, base, row_bytes * m, stream);
    else
      CU(cuMemcpyDtoDAsync, dst, reinterpret_cast<CUdeviceptr>(base), row_bytes * m, stream);
    return;
  }
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  if (host)
    c.srcHost = base;
  else
    c.srcDevice = reinterpret_cast<CUdeviceptr>(base);
  c.srcPitch = size_t(stride) * es;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = dst;
  c.dstPitch = row_bytes;
  c.WidthInBytes = row_bytes;
  c.Height = static_cast<size_t>(m);
  CU(cuMemcpy2DAsync, &c, stream);
}

size_t free_device_memory() {
  size_t free = 0, total = 0;
  CU(cuMemGetInfo, &free, &total);
  return free;
}

// copy_rows for rows in device memory of another device than rt's: one peer
// copy when they are contiguous, else through the host.
void copy_rows_from_peer(udf_runtime* rt, const udf_tensor* t, int64_t stride, int64_t r0, int64_t m, CUdeviceptr dst) {
  const size_t es = udf_dtype_size(t->dtype), row_bytes = size_t(t->cols) * es;
  if (stride == t->cols) {
    const auto src = reinterpret_cast<CUdeviceptr>(t->data) + size_t(r0) * row_bytes;
    CUcontext src_ctx = nullptr;
    CU(cuPointerGetAttribute, &src_ctx, CU_POINTER_ATTRIBUTE_CONTEXT, src);
    CU(cuMemcpyPeerAsync, dst, rt->ctx, src, src_ctx, row_bytes * size_t(m), rt->stream);
    return;
  }
  std::vector<std::uint8_t> host(row_bytes * size_t(m));
  rows_to_host(rt, t, stride, r0, m, host.data());
  CU(cuMemcpyHtoDAsync, dst, host.data(), host.size(), rt->stream);
  sync(rt);  // before `host` goes
}

// Each chunk of rows of `st` on the device and its nearest lists: the
// candidates and their distances into cand / keys ([rows][c]).
void nearest_candidates(udf_index* ix, RowStaging& st, uint32_t* cand, float* keys, const udf_index_params* p) {
  udf_runtime* rt = ix->mod->rt;
  const int64_t n = st.data->rows, chunk = st.chunk;
  const uint32_t c = candidates_for(ix);
  const size_t es = ix->esize;
  const uint32_t el = static_cast<uint32_t>(to_dtype(ix->elem));
  DevBuf dl[2], dd[2];
  PinnedBuf hl[2], hd[2];
  for (int b = 0; b < 2; ++b) {
    dl[b].alloc(size_t(chunk) * c * 4, "candidate lists");
    dd[b].alloc(size_t(chunk) * c * 4, "candidate distances");
    hl[b].ensure(size_t(chunk) * c * 4, "candidate lists");
    hd[b].ensure(size_t(chunk) * c * 4, "candidate distances");
  }
  // L2 compares expanded distances, as k-means does (nearest_lists).
  DevBuf norms;
  const bool expanded = ix->coarse == UDF_IVF_INDEX_V1_L2;
  if (expanded) upload_centroid_norms(rt->stream, ix->centroids.data(), ix->n_lists, ix->dim, norms);
  Event ready[2];
  int64_t pending_r0[2] = {-1, -1}, pending_m[2] = {0, 0};
  // The candidates of the chunk in buffer b, to the host arrays: on the
  // host pool, whose threads take the arrays' first-touch page faults too.
  auto drain = [&](int b) {
    if (pending_r0[b] < 0) return;
    ready[b].sync();
    const size_t bytes = size_t(pending_m[b]) * c * 4;
    copy_parallel(rt, reinterpret_cast<std::uint8_t*>(cand + pending_r0[b] * c), hl[b].as<std::uint8_t>(), bytes);
    copy_parallel(rt, reinterpret_cast<std::uint8_t*>(keys + pending_r0[b] * c), hd[b].as<std::uint8_t>(), bytes);
    pending_r0[b] = -1;
  };
  for (int64_t r0 = 0, i = 0; r0 < n; r0 += chunk, ++i) {
    const int b = static_cast<int>(i & 1);
    const int64_t m = std::min(chunk, n - r0);
    drain(b);
    const auto [rows, pitch] = st.stage(r0, m, true);
    if (ix->coarse_copy())
      nearest_lists(rt, rt->stream, st.f32.get(), 0, ix->dim, static_cast<uint32_t>(m), ix->d_centroids.get(), ix->n_lists,
                    ix->dim, ix->coarse, c, dl[b].get(), dd[b].get(), expanded ? norms.get() : 0);
    else
      nearest_lists(rt, rt->stream, rows, el, pitch / es, static_cast<uint32_t>(m), ix->d_centroids.get(), ix->n_lists,
                    ix->dim, ix->coarse, c, dl[b].get(), dd[b].get(), expanded ? norms.get() : 0);
    CU(cuMemcpyDtoHAsync, hl[b].as<void>(), dl[b].get(), size_t(m) * c * 4, rt->stream);
    CU(cuMemcpyDtoHAsync, hd[b].as<void>(), dd[b].get(), size_t(m) * c * 4, rt->stream);
    ready[b].record(rt->stream);
    pending_r0[b] = r0;
    pending_m[b] = m;
    if (p) progress(*p, 0.5 + 0.3 * double(r0 + m) / double(n), "assign");
  }
  drain(0);
  drain(1);
  st.staged = st.keep;
}

// Pass 1: each chunk of rows on the device and its nearest lists; the host
// makes the balanced assignment for lists that hold `counts` vectors now
// (updated) in an index of `total` vectors once these are in.
std::vector<uint32_t> assign_rows(udf_index* ix, RowStaging& st, std::vector<uint64_t>& counts, uint64_t total,
                                  const udf_index_params* p) {
  BuildProfile prof(ix->mod->rt);
  const size_t n = static_cast<size_t>(st.data->rows);
  const uint32_t c = candidates_for(ix);
  // (Not value-initialized: nearest_candidates writes every element.)
  const std::unique_ptr<uint32_t[]> cand(new uint32_t[n * c]);
  const std::unique_ptr<float[]> keys(new float[n * c]);
  nearest_candidates(ix, st, cand.get(), keys.get(), p);
  prof.lap("assign: nearest lists");
  std::vector<uint32_t> label = assign_to_lists(ix, cand.get(), keys.get(), n, c, counts, ix->n_lists, total);
  prof.lap("assign: balance (host)");
  return label;
}

void check_room(const udf_index* ix, int64_t n) {
  if (uint64_t(ix->size) + uint64_t(n) >= 0xFFFFFFFFull)
    fail(UDF_ERROR_UNSUPPORTED, "the index would hold " + std::to_string(ix->size + n) + " vectors; at most 2^32 - 2");
}

// The lists' current sizes as counts (empty before the first rows).
std::vector<uint64_t> current_counts(const udf_index* ix) {
  std::vector<uint64_t> counts(ix->n_lists);
  for (uint32_t l = 0; l < ix->n_lists; ++l) counts[l] = ix->sizes.empty() ? 0 : ix->sizes[l];
  return counts;
}

void scatter_rows(udf_index* ix, const RowSource& from, const uint32_t* slot, const int64_t* id_list, int64_t first_id,
                  DeviceLists& lists) {
  udf_runtime* rt = ix->mod->rt;
  constexpr int64_t kInPlaceChunk = 65536;  // rows a launch takes from a source read in place
  const int64_t chunk = from.st ? from.st->chunk : kInPlaceChunk;
  DevBuf d_slots, d_ids;
  d_slots.alloc(size_t(chunk) * 4, "slots");
  if (id_list) d_ids.alloc(size_t(chunk) * 8, "ids");
  for (int64_t i0 = 0; i0 < from.rows; i0 += chunk) {  // i0: a row of the source; input row from.r0 + i0
    const int64_t m = std::min(chunk, from.rows - i0), r0 = from.r0 + i0;
    if (std::all_of(slot + r0, slot + r0 + m, [](uint32_t x) { return x == UDF_IVF_INDEX_V1_NO_SLOT; }))
      continue;  // none of these rows is this shard's
    const auto [rows, pitch] = from.st ? from.st->stage(i0, m, false)
                                       : std::pair<CUdeviceptr, uint64_t>{from.at + uint64_t(i0) * from.pitch, from.pitch};
    CU(cuMemcpyHtoDAsync, d_slots.get(), slot + r0, size_t(m) * 4, rt->stream);
    if (id_list) CU(cuMemcpyHtoDAsync, d_ids.get(), id_list + r0, size_t(m) * 8, rt->stream);
    list_rows(rt, ix, 0, rows, pitch, id_list ? d_ids.get() : 0, uint64_t(first_id + r0), d_slots.get(),
              static_cast<uint32_t>(m), lists.data.get(), lists.ids.get());
  }
  sync(rt);  // (the buffers are reused in stream order; host ones were copied from pageable memory)
}

void scatter_rows(udf_index* ix, RowStaging& st, const std::vector<uint32_t>& slot, const int64_t* id_list, int64_t first_id,
                  DeviceLists& lists) {
  scatter_rows(ix, RowSource{0, st.data->rows, &st, 0, 0}, slot.data(), id_list, first_id, lists);
}

// Pass 2: a new layout with each list's old rows, then its new ones in input
// order: the rows `own` gives this index.  Ids: id_list, or first_id + the
// row's number.
void place_rows(udf_index* ix, RowStaging& st, const std::vector<uint32_t>& label, Owners own, const int64_t* id_list,
                int64_t first_id) {
  place_rows(ix, {RowSource{0, st.data->rows, &st, 0, 0}}, label, own, id_list, first_id);
}

void place_rows(udf_index* ix, const std::vector<RowSource>& from, const std::vector<uint32_t>& label, Owners own,
                const int64_t* id_list, int64_t first_id) {
  udf_runtime* rt = ix->mod->rt;
  BuildProfile prof(rt);
  const auto n = static_cast<int64_t>(label.size());
  std::vector<uint64_t> counts = current_counts(ix);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i)
    if (own.mine(size_t(i))) ++counts[label[i]], ++kept;
  std::vector<uint32_t> sizes(ix->n_lists);
  for (uint32_t l = 0; l < ix->n_lists; ++l) {
    if (counts[l] > 0xFFFFFFFFull) fail(UDF_ERROR_UNSUPPORTED, "list " + std::to_string(l) + " would hold more than 2^32 - 1 vectors");
    sizes[l] = static_cast<uint32_t>(counts[l]);
  }
  std::vector<uint64_t> offsets;
  const uint64_t slots = plan_offsets(sizes, offsets);
  std::vector<uint32_t> slot(static_cast<size_t>(n), UDF_IVF_INDEX_V1_NO_SLOT);
  {
    std::vector<uint64_t> next(ix->n_lists);
    for (uint32_t l = 0; l < ix->n_lists; ++l) next[l] = offsets[l] + (ix->sizes.empty() ? 0 : ix->sizes[l]);
    for (int64_t i = 0; i < n; ++i)
      if (own.mine(size_t(i))) slot[i] = static_cast<uint32_t>(next[label[i]]++);
  }
  DeviceLists lists;
  lists.alloc(rt, ix, slots);
  if (ix->size > 0) {  // the old lists move first; the new rows follow them in each list
    DevBuf d_old_off, d_new_off, d_old_sizes;
    upload(rt->stream, d_old_off, ix->offsets.data(), ix->n_lists * 8, "list offsets");
    upload(rt->stream, d_new_off, offsets.data(), ix->n_lists * 8, "list offsets");
    upload(rt->stream, d_old_sizes, ix->sizes.data(), ix->n_lists * 4, "list sizes");
    udf_ivf_move_lists_args_v1 a{ix->d_list_data.as<const void>(), lists.data.as<void>(), ix->d_ids.as<const void>(),
                                 lists.ids.as<void>(), d_old_off.as<const uint64_t>(), d_new_off.as<const uint64_t>(),
                                 d_old_sizes.as<const uint32_t>(), group_bytes(ix), ix->n_lists, 0};
    launch(rt, rt->kernels[IndexKernel::move_lists], ix->n_lists, 0, &a);
    sync(rt);  // before the offsets are freed
  }
  for (const RowSource& f : from) scatter_rows(ix, f, slot.data(), id_list, first_id, lists);
  prof.lap("place: move + scatter");
  install(ix, lists, std::move(sizes), std::move(offsets));
  ix->size += kept;
}

// The ids after rows given id_list (or none: first_id onwards).
int64_t next_id_after(int64_t first_id, const int64_t* id_list, int64_t n) {
  int64_t max_id = first_id - 1;
  if (id_list)
    for (int64_t i = 0; i < n; ++i) max_id = std::max(max_id, id_list[i]);
  else
    max_id = first_id + n - 1;
  return max_id + 1;
}

// Pass 1 puts each chunk of rows on the device (normalized when the index
// stores normalized vectors) and finds its nearest lists; the host makes the
// balanced assignment and the new layout; pass 2 scatters the rows into it
// (after the old lists are moved there).  The rows stay on the device
// between the passes when they fit, else pass 2 copies them again.
namespace {

// The rows of `data` staged for an add to ix: kept on the device between the
// passes when they fit with the new layout (at most this big: new sizes come
// after the assignment).
RowStaging staging_for_add(udf_index* ix, const udf_tensor* data, int64_t stride) {
  check_room(ix, data->rows);
  return RowStaging(ix, data, stride, true, layout_bytes_after(ix, uint64_t(data->rows)));
}

}  // namespace

void RowStaging::upload_all() {
  if (!keep || staged || ix->normalize || data->device != UDF_HOST_DEVICE) return;
  udf_runtime* rt = ix->mod->rt;
  const size_t row_bytes = size_t(ix->dim) * ix->esize;
  const int64_t n = data->rows;
  // Small pinned buffers (pinning memory costs about as much as copying it),
  // four in flight.
  constexpr int kBuffers = 4;
  const int64_t per_buffer = std::max<int64_t>(1, int64_t(16 << 20) / int64_t(row_bytes));
  const int64_t slice = std::max<int64_t>(1, int64_t(4 << 20) / int64_t(row_bytes));
  PinnedBuf pinned[kBuffers];
  Event copied[kBuffers];
  bool busy[kBuffers] = {};
  for (int64_t r0 = 0, i = 0; r0 < n; r0 += per_buffer, ++i) {
    const int b = static_cast<int>(i % kBuffers);
    const int64_t m = std::min(per_buffer, n - r0);
    if (busy[b]) copied[b].sync();  // its previous rows are on the device
    pinned[b].ensure(size_t(m) * row_bytes, "vectors (staging)");
    std::uint8_t* host = pinned[b].as<std::uint8_t>();
    host_rows_in_slices(rt, data, stride, r0, m, host, slice, [&](int64_t first, int64_t rows) {
      CU(cuMemcpyHtoDAsync, all.get() + size_t(r0 + first) * row_bytes, host + size_t(first) * row_bytes,
         size_t(rows) * row_bytes, rt->stream);
    });
    copied[b].record(rt->stream);
    busy[b] = true;
  }
  sync(rt);  // before the pinned buffers go
  staged = true;
}

void add_staged_rows(udf_index* ix, RowStaging& st, const int64_t* id_list, const udf_index_params* p) {
  const int64_t n = st.data->rows;
  std::vector<uint64_t> counts = current_counts(ix);
  const std::vector<uint32_t> label = assign_rows(ix, st, counts, static_cast<uint64_t>(ix->size + n), p);
  if (p) progress(*p, 0.8, "pack");
  place_rows(ix, st, label, Owners{}, id_list, ix->next_id);
  ix->next_id = next_id_after(ix->next_id, id_list, n);
  if (p) progress(*p, 1.0, "upload");
}

void add_rows(udf_index* ix, const udf_tensor* data, int64_t stride, const int64_t* id_list, const udf_index_params* p) {
  RowStaging st = staging_for_add(ix, data, stride);
  add_staged_rows(ix, st, id_list, p);
}

void build_rows(udf_index* ix, const udf_tensor* data, int64_t stride, const int64_t* id_list, const udf_index_params& p) {
  RowStaging st = staging_for_add(ix, data, stride);
  BuildProfile prof(ix->mod->rt);
  // The k-means' start (its sample's draw, its host buffers) on a thread of
  // its own while the rows go up.
  std::unique_ptr<KmeansStart> start = p.centroids ? nullptr : std::make_unique<KmeansStart>(ix, data->rows, p);
  if (!p.centroids) st.upload_all();
  prof.lap("stage the rows");
  make_centroids(ix, data, stride, p, &st, nullptr, start.get());
  add_staged_rows(ix, st, id_list, &p);
}

}  // namespace udf::rt
