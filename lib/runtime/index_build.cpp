// Index build: k-means on a sample (GPU distances, balanced assignment on the
// host), assignment of every row to a list, and the interleaved list layout
// the scan kernels read (docs/kernels.md), built on the device.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <numeric>
#include <memory>
#include <random>
#include <unordered_map>

#include "index.h"
#include "index_shards.h"
#include "shard_plan.h"
#include "udf/kernels/ivf_flat_v1.h"

namespace udf::rt {

namespace {

// Balanced assignment.  cand/keys: [n][c] candidate lists, nearest first, and
// their keys (smaller is nearer).  counts: lists' current sizes (updated).
// Each row takes its nearest candidate whose list has room under `cap`;
// over-full lists keep their nearest rows and push the others to their next
// candidate; rows out of candidates go to the emptiest list.
std::vector<uint32_t> balanced_assign(const std::vector<uint32_t>& cand, const std::vector<float>& keys, size_t n,
                                      uint32_t c, std::vector<uint64_t>& counts, uint64_t cap) {
  std::vector<uint32_t> label(n), rank(n, 0);
  for (size_t i = 0; i < n; ++i) label[i] = cand[i * c];
  if (cap == 0) {
    for (size_t i = 0; i < n; ++i) ++counts[label[i]];
    return label;
  }
  const size_t n_lists = counts.size();
  std::vector<uint32_t> pending(n), next, leftover, want;
  std::iota(pending.begin(), pending.end(), 0u);
  std::vector<size_t> start(n_lists + 1), fill(n_lists);
  while (!pending.empty()) {
    // The pending rows grouped by their current candidate list, in pending
    // order (a counting sort); rows out of candidates aside.
    std::fill(start.begin(), start.end(), 0);
    leftover.clear();
    for (uint32_t i : pending)
      if (rank[i] < c) ++start[cand[size_t(i) * c + rank[i]] + 1];
    for (size_t l = 0; l < n_lists; ++l) start[l + 1] += start[l];
    want.resize(start[n_lists]);
    std::copy(start.begin(), start.end() - 1, fill.begin());
    for (uint32_t i : pending) {
      if (rank[i] < c)
        want[fill[cand[size_t(i) * c + rank[i]]]++] = i;
      else
        leftover.push_back(i);
    }
    next.clear();
    for (size_t l = 0; l < n_lists; ++l) {
      uint32_t* w = want.data() + start[l];
      size_t m = start[l + 1] - start[l];
      if (m == 0) continue;
      const uint64_t room = counts[l] >= cap ? 0 : cap - counts[l];
      if (m > room) {  // the nearest `room` stay; the others try their next candidate
        std::sort(w, w + m, [&](uint32_t a, uint32_t b) {
          const float ka = keys[size_t(a) * c + rank[a]], kb = keys[size_t(b) * c + rank[b]];
          return ka < kb || (ka == kb && a < b);
        });
        for (size_t j = room; j < m; ++j) {
          ++rank[w[j]];
          next.push_back(w[j]);
        }
        m = room;
      }
      for (size_t j = 0; j < m; ++j) label[w[j]] = static_cast<uint32_t>(l);
      counts[l] += m;
    }
    for (uint32_t i : leftover) {  // out of candidates: the emptiest list
      size_t best = 0;
      for (size_t l = 1; l < n_lists; ++l)
        if (counts[l] < counts[best]) best = l;
      label[i] = static_cast<uint32_t>(best);
      ++counts[best];
    }
    pending.swap(next);
  }
  return label;
}

uint32_t candidates_for(const udf_index* ix) { return ix->balance > 0 ? std::min<uint32_t>(8, ix->n_lists) : 1; }

// balanced_assign for n rows whose candidates and distances came from
// nearest_centroids (negated here into keys for IP: smaller is nearer), under
// the index's cap for an index of `total` vectors.
std::vector<uint32_t> assign_to_lists(const udf_index* ix, const std::vector<uint32_t>& cand, std::vector<float>& keys,
                                      size_t n, uint32_t c, std::vector<uint64_t>& counts, uint64_t total) {
  if (ix->coarse != UDF_IVF_INDEX_V1_L2)
    for (float& k : keys) k = -k;
  const uint64_t cap =
      ix->balance > 0 ? std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(ix->balance * double(total) / ix->n_lists))) : 0;
  return balanced_assign(cand, keys, n, c, counts, cap);
}

}  // namespace

// ---------------------------------------------------------------------------
// The lists on the GPU.  The device layout (docs/kernels.md) is the only copy
// of the lists: rows are assigned and placed there (add_rows), files are
// read into it (upload_lists) and written from it (download_lists).

BuildProfile::BuildProfile(udf_runtime* rt) : rt_(rt), on_(std::getenv("UDF_PROFILE_BUILD") != nullptr) {
  t_ = std::chrono::steady_clock::now();
}

void BuildProfile::lap(const char* what) {
  if (!on_) return;
  sync(rt_);
  const auto now = std::chrono::steady_clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - t_).count();
  t_ = now;
  for (Phase& p : phases_)
    if (p.what == what) {
      p.ms += ms;
      ++p.laps;
      return;
    }
  phases_.push_back(Phase{what, ms, 1});
}

BuildProfile::~BuildProfile() {
  for (const Phase& p : phases_) std::fprintf(stderr, "udf build: %-32s %9.1f ms (%u)\n", p.what.c_str(), p.ms, p.laps);
}

namespace {

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

size_t slot_bytes(const udf_index* ix) { return size_t(ix->dim_padded) * ix->esize; }
// The slots of the index's layout (0 before its first rows).
uint64_t slot_count(const udf_index* ix) {
  return ix->offsets.empty() ? 0 : ix->offsets.back() + (uint64_t(ix->sizes.back()) + 31) / 32 * 32;
}
uint64_t group_bytes(const udf_index* ix) { return 32ull * slot_bytes(ix); }

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
  launch(rt, rt->f_list_rows, grid, 0, &a);
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
    chunk = std::max<int64_t>(1, std::min<int64_t>(65536, (int64_t(256) << 20) / (ix->dim * 4 + row_bytes)));
    other_device = data->device != UDF_HOST_DEVICE && data->device != rt->ordinal;
    in_place = data->device != UDF_HOST_DEVICE && !other_device && !ix->normalize;
    // UDF_BUILD_RESTAGE (a test hook) takes the path of rows that do not fit.
    keep = two_passes && !in_place && std::getenv("UDF_BUILD_RESTAGE") == nullptr &&
           size_t(n) * row_bytes + extra_bytes + (size_t(1) << 30) < free_device_memory();
    if (keep)
      all.alloc(size_t(n) * row_bytes, "vectors");
    else if (!in_place)
      buf.alloc(size_t(chunk) * row_bytes, "vectors");
    if (ix->normalize) f32.alloc(size_t(chunk) * ix->dim * 4, "vectors (f32)");
  }
  // Rows [r0, r0 + m) on the device, normalized; their address and pitch in
  // bytes.  `coarse`: also their normalized f32 copy in f32 (the coarse keys
  // of a normalized index).  Rows kept since the assignment are not copied again.
  std::pair<CUdeviceptr, uint64_t> stage(int64_t r0, int64_t m, bool coarse) {
    udf_runtime* rt = ix->mod->rt;
    const size_t es = ix->esize, row_bytes = size_t(ix->dim) * es;
    const uint32_t el = static_cast<uint32_t>(to_dtype(ix->elem));
    if (in_place) return {reinterpret_cast<CUdeviceptr>(data->data) + size_t(r0) * size_t(stride) * es, size_t(stride) * es};
    const CUdeviceptr dst = keep ? all.get() + size_t(r0) * row_bytes : buf.get();
    if (keep && staged) return {dst, row_bytes};
    if (other_device)
      copy_rows_from_peer(rt, data, stride, r0, m, dst);
    else
      copy_rows(rt->stream, data, stride, r0, m, dst);
    if (ix->normalize) {
      if (coarse) convert(rt, rt->stream, dst, el, ix->dim, f32.get(), 0, static_cast<uint32_t>(m), ix->dim, true);
      convert(rt, rt->stream, dst, el, ix->dim, dst, el, static_cast<uint32_t>(m), ix->dim, true);  // in place
    }
    return {dst, row_bytes};
  }
};

// Pass 1: each chunk of rows on the device and its nearest lists; the host
// makes the balanced assignment for lists that hold `counts` vectors now
// (updated) in an index of `total` vectors once these are in.
std::vector<uint32_t> assign_rows(udf_index* ix, RowStaging& st, std::vector<uint64_t>& counts, uint64_t total,
                                  const udf_index_params* p) {
  udf_runtime* rt = ix->mod->rt;
  BuildProfile prof(rt);
  const int64_t n = st.data->rows, chunk = st.chunk;
  const uint32_t c = candidates_for(ix);
  const size_t es = ix->esize;
  const uint32_t el = static_cast<uint32_t>(to_dtype(ix->elem));
  DevBuf dl[2], dd[2], coarse_keys;
  PinnedBuf hl[2], hd[2];
  for (int b = 0; b < 2; ++b) {
    dl[b].alloc(size_t(chunk) * c * 4, "candidate lists");
    dd[b].alloc(size_t(chunk) * c * 4, "candidate distances");
    hl[b].ensure(size_t(chunk) * c * 4, "candidate lists");
    hd[b].ensure(size_t(chunk) * c * 4, "candidate distances");
  }
  std::vector<uint32_t> cand(size_t(n) * c);
  std::vector<float> keys(size_t(n) * c);
  Event ready[2];
  int64_t pending_r0[2] = {-1, -1}, pending_m[2] = {0, 0};
  auto drain = [&](int b) {  // the candidates of the chunk in buffer b, to the host arrays
    if (pending_r0[b] < 0) return;
    ready[b].sync();
    std::memcpy(cand.data() + pending_r0[b] * c, hl[b].as<uint32_t>(), size_t(pending_m[b]) * c * 4);
    std::memcpy(keys.data() + pending_r0[b] * c, hd[b].as<float>(), size_t(pending_m[b]) * c * 4);
    pending_r0[b] = -1;
  };
  for (int64_t r0 = 0, i = 0; r0 < n; r0 += chunk, ++i) {
    const int b = static_cast<int>(i & 1);
    const int64_t m = std::min(chunk, n - r0);
    drain(b);
    const auto [rows, pitch] = st.stage(r0, m, true);
    if (ix->normalize)
      nearest_centroids(rt, rt->stream, st.f32.get(), 0, ix->dim, static_cast<uint32_t>(m), ix->d_centroids.get(), ix->n_lists,
                        ix->dim, ix->coarse, c, dl[b].get(), dd[b].get(), coarse_keys);
    else
      nearest_centroids(rt, rt->stream, rows, el, pitch / es, static_cast<uint32_t>(m), ix->d_centroids.get(), ix->n_lists,
                        ix->dim, ix->coarse, c, dl[b].get(), dd[b].get(), coarse_keys);
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
  prof.lap("assign: nearest lists");
  std::vector<uint32_t> label = assign_to_lists(ix, cand, keys, static_cast<size_t>(n), c, counts, total);
  prof.lap("assign: balance (host)");
  return label;
}

// The lists' current sizes as counts (empty before the first rows).
std::vector<uint64_t> current_counts(const udf_index* ix) {
  std::vector<uint64_t> counts(ix->n_lists);
  for (uint32_t l = 0; l < ix->n_lists; ++l) counts[l] = ix->sizes.empty() ? 0 : ix->sizes[l];
  return counts;
}

// Rows of `st` to their slots of `lists` (slot[i], or none: NO_SLOT), with
// ids id_list[i] (or first_id + i); returns when they are there.
void scatter_rows(udf_index* ix, RowStaging& st, const std::vector<uint32_t>& slot, const int64_t* id_list, int64_t first_id,
                  DeviceLists& lists) {
  udf_runtime* rt = ix->mod->rt;
  const int64_t n = st.data->rows, chunk = st.chunk;
  DevBuf d_slots, d_ids;
  d_slots.alloc(size_t(chunk) * 4, "slots");
  if (id_list) d_ids.alloc(size_t(chunk) * 8, "ids");
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t m = std::min(chunk, n - r0);
    if (std::all_of(slot.begin() + r0, slot.begin() + r0 + m, [](uint32_t x) { return x == UDF_IVF_INDEX_V1_NO_SLOT; }))
      continue;  // none of these rows is this shard's
    const auto [rows, pitch] = st.stage(r0, m, false);
    CU(cuMemcpyHtoDAsync, d_slots.get(), slot.data() + r0, size_t(m) * 4, rt->stream);
    if (id_list) CU(cuMemcpyHtoDAsync, d_ids.get(), id_list + r0, size_t(m) * 8, rt->stream);
    list_rows(rt, ix, 0, rows, pitch, id_list ? d_ids.get() : 0, uint64_t(first_id + r0), d_slots.get(),
              static_cast<uint32_t>(m), lists.data.get(), lists.ids.get());
  }
  sync(rt);  // (the buffers are reused in stream order; host ones were copied from pageable memory)
}

// Which shard takes each row: none (NULL: every row is this index's), or
// owner[i] for row i (a sharded index's; rows of other shards are theirs).
struct Owners {
  const std::vector<std::uint8_t>* owner = nullptr;
  std::uint8_t me = 0;
  bool mine(size_t i) const { return owner == nullptr || (*owner)[i] == me; }
};

// Pass 2: a new layout with each list's old rows, then its new ones in input
// order: the rows `own` gives this index.  Ids: id_list, or first_id + the
// row's number.
void place_rows(udf_index* ix, RowStaging& st, const std::vector<uint32_t>& label, Owners own, const int64_t* id_list,
                int64_t first_id) {
  udf_runtime* rt = ix->mod->rt;
  BuildProfile prof(rt);
  const int64_t n = st.data->rows;
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
    launch(rt, rt->f_move_lists, ix->n_lists, 0, &a);
    sync(rt);  // before the offsets are freed
  }
  scatter_rows(ix, st, slot, id_list, first_id, lists);
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

// The shard of list l of an index sharded by lists.
std::uint8_t list_owner(const udf_index* ix, uint32_t l) {
  const auto& b = ix->shard_lists;
  return static_cast<std::uint8_t>(std::upper_bound(b.begin() + 1, b.end(), l) - (b.begin() + 1));
}

// SHARDS BY VECTORS: the shard of each new row (labels `label`) when shard
// s holds sizes[l] rows of list l already (old[l] in all): each list's new
// rows, in input order, fill the shards that fall shortest of an equal part
// of the list's new size, in shard order; each shard's new rows of a list
// are one run of positions, appended to its runs (`runs_out`, [shard][list],
// for the caller to keep once the rows are placed).
std::vector<std::uint8_t> vector_owners(const udf_index* ix, const std::vector<uint32_t>& label,
                                        const std::vector<uint64_t>& old,
                                        std::vector<std::vector<std::vector<std::pair<uint32_t, uint32_t>>>>& runs_out) {
  const size_t S = ix->shards.size(), L = ix->n_lists;
  std::vector<uint64_t> added(L, 0);
  for (uint32_t l : label) ++added[l];
  // give[l * S + s]: the new rows of list l shard s takes.
  std::vector<uint32_t> give(L * S, 0);
  runs_out.assign(S, std::vector<std::vector<std::pair<uint32_t, uint32_t>>>(L));
  std::vector<uint64_t> has(S);
  for (size_t l = 0; l < L; ++l) {
    if (added[l] == 0) continue;
    for (size_t s = 0; s < S; ++s) has[s] = ix->shards[s]->sizes.empty() ? 0 : ix->shards[s]->sizes[l];
    const std::vector<uint64_t> g = plan_vector_adds(has, added[l]);
    uint64_t pos = old[l], given = 0;
    for (size_t s = 0; s < S; ++s) {
      give[l * S + s] = static_cast<uint32_t>(g[s]);
      if (g[s] > 0) runs_out[s][l].push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(g[s])});
      pos += g[s];
      given += g[s];
    }
    if (given != added[l]) fail(UDF_ERROR_INTERNAL, "shard by vectors: list " + std::to_string(l) + " has rows no shard takes");
  }
  std::vector<std::uint8_t> owner(label.size());
  std::vector<uint32_t> at(L, 0);  // per list: the shard its next new row goes to
  for (size_t i = 0; i < label.size(); ++i) {
    const uint32_t l = label[i];
    while (give[size_t(l) * S + at[l]] == 0) ++at[l];
    owner[i] = static_cast<std::uint8_t>(at[l]);
    --give[size_t(l) * S + at[l]];
  }
  return owner;
}

// A sharded index's own list sizes, size and next id after its shards
// placed their rows (they keep those lists each; the parent holds the whole's).
void set_sharded_totals(udf_index* ix, const std::vector<uint64_t>& counts, int64_t size, int64_t next_id) {
  std::vector<uint32_t> sizes(ix->n_lists);
  for (uint32_t l = 0; l < ix->n_lists; ++l) sizes[l] = static_cast<uint32_t>(counts[l]);
  ix->sizes = std::move(sizes);
  ix->max_list_size = *std::max_element(ix->sizes.begin(), ix->sizes.end());
  ix->size = size;
  ix->next_id = next_id;
  for (auto& sh : ix->shards) sh->next_id = next_id;
}

}  // namespace

// A shard's tie keys (udf_index::d_keys) from its runs and layout.
void upload_keys(udf_index* sh) {
  std::vector<int64_t> keys(slot_count(sh), -1);
  for (uint32_t l = 0; l < sh->n_lists; ++l) {
    uint64_t slot = sh->offsets[l];
    for (const auto& [first, count] : sh->runs[l])
      for (uint32_t i = 0; i < count; ++i) keys[slot++] = int64_t(uint64_t(l) << 32 | (uint64_t(first) + i));
    if (slot != sh->offsets[l] + sh->sizes[l])
      fail(UDF_ERROR_INTERNAL, "shard by vectors: list " + std::to_string(l) + " holds " + std::to_string(sh->sizes[l]) +
                                   " vectors and " + std::to_string(slot - sh->offsets[l]) + " tie keys");
  }
  sh->quiesce();
  sh->d_keys.alloc(keys.size() * 8, "tie keys");  // (never null, even for no slots: it marks the shard)
  if (!keys.empty()) CU(cuMemcpyHtoDAsync, sh->d_keys.get(), keys.data(), keys.size() * 8, sh->mod->rt->stream);
  sync(sh->mod->rt);
}

void keep_equal_parts(udf_index* sh, size_t s, size_t shards, const std::vector<uint64_t>& sizes) {
  sh->runs.assign(sh->n_lists, {});
  for (uint32_t l = 0; l < sh->n_lists; ++l)
    if (sh->sizes[l] > 0) sh->runs[l].push_back({static_cast<uint32_t>(part_begin(sizes[l], s, shards)), sh->sizes[l]});
  upload_keys(sh);
}

// Pass 1 puts each chunk of rows on the device (normalized when the index
// stores normalized vectors) and finds its nearest lists; the host makes the
// balanced assignment and the new layout; pass 2 scatters the rows into it
// (after the old lists are moved there).  The rows stay on the device
// between the passes when they fit, else pass 2 copies them again.
void add_rows(udf_index* ix, const udf_tensor* data, int64_t stride, const int64_t* id_list, const udf_index_params* p) {
  const int64_t n = data->rows;
  if (uint64_t(ix->size) + uint64_t(n) >= 0xFFFFFFFFull)
    fail(UDF_ERROR_UNSUPPORTED, "the index would hold " + std::to_string(ix->size + n) + " vectors; at most 2^32 - 2");
  // New sizes come after the assignment; the layout is at most this big.
  const uint64_t layout_max = (slot_count(ix) + uint64_t(n) + 32ull * ix->n_lists) * slot_bytes(ix);
  RowStaging st(ix, data, stride, true, layout_max);
  std::vector<uint64_t> counts = current_counts(ix);
  const std::vector<uint32_t> label = assign_rows(ix, st, counts, static_cast<uint64_t>(ix->size + n), p);
  if (p) progress(*p, 0.8, "pack");
  place_rows(ix, st, label, Owners{}, id_list, ix->next_id);
  ix->next_id = next_id_after(ix->next_id, id_list, n);
  if (p) progress(*p, 1.0, "upload");
}

void add_rows_sharded(udf_index* ix, const udf_tensor* data, int64_t stride, const int64_t* id_list, const udf_index_params* p) {
  const int64_t n = data->rows;
  if (uint64_t(ix->size) + uint64_t(n) >= 0xFFFFFFFFull)
    fail(UDF_ERROR_UNSUPPORTED, "the index would hold " + std::to_string(ix->size + n) + " vectors; at most 2^32 - 2");
  // The assignment on the first shard's device, against the whole index's
  // lists: the labels a one-GPU index would give.  Then each shard places
  // the rows of its lists (the first one from the rows the assignment kept
  // on its device, when they fit).
  const std::vector<uint64_t> old = current_counts(ix);
  std::vector<uint64_t> counts = old;
  std::vector<uint32_t> label;
  std::vector<std::uint8_t> owner;
  std::vector<std::vector<std::vector<std::pair<uint32_t, uint32_t>>>> runs;  // by vectors: [shard][list] new runs
  for (size_t s = 0; s < ix->shards.size(); ++s) {
    udf_index* sh = ix->shards[s].get();
    CtxGuard g(sh->mod->rt->ctx);
    const uint64_t layout_max = (slot_count(sh) + uint64_t(n) + 32ull * sh->n_lists) * slot_bytes(sh);
    RowStaging st(sh, data, stride, s == 0, layout_max);
    if (s == 0) {
      label = assign_rows(sh, st, counts, static_cast<uint64_t>(ix->size + n), p);
      if (p) progress(*p, 0.8, "pack");
      if (ix->by_vectors()) {
        owner = vector_owners(ix, label, old, runs);
      } else {
        if (ix->shard_lists.empty())  // a new index: the shards' lists, by the assignment's sizes
          ix->shard_lists = plan_shard_lists(counts, static_cast<uint32_t>(ix->shards.size()));
        owner.resize(label.size());
        for (size_t i = 0; i < label.size(); ++i) owner[i] = list_owner(ix, label[i]);
      }
    }
    place_rows(sh, st, label, Owners{&owner, static_cast<std::uint8_t>(s)}, id_list, ix->next_id);
    if (ix->by_vectors()) {
      sh->runs.resize(ix->n_lists);
      for (uint32_t l = 0; l < ix->n_lists; ++l)
        for (const auto& r : runs[s][l]) sh->runs[l].push_back(r);
      upload_keys(sh);
    }
  }
  set_sharded_totals(ix, counts, ix->size + n, next_id_after(ix->next_id, id_list, n));
  if (p) progress(*p, 1.0, "upload");
}

void share_centroids(udf_index* ix) {
  ix->centroids = ix->shards[0]->centroids;
  for (size_t s = 1; s < ix->shards.size(); ++s) {
    udf_index* sh = ix->shards[s].get();
    CtxGuard g(sh->mod->rt->ctx);
    sh->centroids = ix->centroids;
    upload(sh->mod->rt->stream, sh->d_centroids, sh->centroids.data(), sh->centroids.size() * 4, "centroids");
    sync(sh->mod->rt);
  }
}

void build_in_chunks(udf_index* ix, size_t n_chunks, const ChunkSource& source, const udf_index_params& p) {
  require(n_chunks >= 1, "n_chunks = 0: there must be at least one chunk");
  const bool sharded = ix->sharded();
  const size_t S = sharded ? ix->shards.size() : 1;
  auto shard = [&](size_t s) { return sharded ? ix->shards[s].get() : ix; };
  udf_index* first = shard(0);
  udf_runtime* hrt = first->mod->rt;
  struct Chunk {
    udf_tensor data{}, ids{};
    int64_t stride = 0;
    std::vector<int64_t> id_list;
    const int64_t* id_ptr() const { return ids.data ? id_list.data() : nullptr; }
  };
  auto fetch = [&](size_t c, Chunk& ch) {
    ch = Chunk{};
    source(c, ch.data, ch.ids);
    const std::string what = "chunk " + std::to_string(c);
    CtxGuard g(hrt->ctx);
    ch.stride = check_tensor(hrt, &ch.data, (what + " data").c_str(), to_dtype(ix->elem), ix->dim);
    require(ch.data.rows >= 1, what + " has no rows");
    check_ids(hrt, ch.ids.data ? &ch.ids : nullptr, ch.data.rows, ch.id_list);
  };
  // Pass 1: the centroids (chunk 0), then each chunk's balanced assignment
  // against the counts of the chunks before it and itself, as an add's.
  std::vector<uint64_t> counts(ix->n_lists, 0);
  std::vector<std::vector<uint32_t>> labels(n_chunks);
  std::vector<int64_t> rows(n_chunks), first_ids(n_chunks);
  int64_t next_id = 0;
  uint64_t total = 0;
  for (size_t c = 0; c < n_chunks; ++c) {
    Chunk ch;
    fetch(c, ch);
    if (total + uint64_t(ch.data.rows) >= 0xFFFFFFFFull)
      fail(UDF_ERROR_UNSUPPORTED, "the index would hold " + std::to_string(total + ch.data.rows) + " vectors; at most 2^32 - 2");
    rows[c] = ch.data.rows;
    total += uint64_t(ch.data.rows);
    CtxGuard g(hrt->ctx);
    if (c == 0) {
      make_centroids(first, &ch.data, ch.stride, p);
      if (sharded) share_centroids(ix);
    }
    RowStaging st(first, &ch.data, ch.stride, false, 0);
    labels[c] = assign_rows(first, st, counts, total, nullptr);
    first_ids[c] = next_id;
    next_id = next_id_after(next_id, ch.id_ptr(), ch.data.rows);
    progress(p, 0.5 + 0.3 * double(c + 1) / double(n_chunks), "assign");
  }
  // Pass 2: each device's layout at its final sizes, then every chunk's rows
  // placed in it (each list's rows in chunk and row order, as adds leave them).
  // Shard s keeps, of list l, the one index's positions [part(s, l), part(s + 1, l)):
  // by lists the whole list or nothing, by vectors an equal part.
  const bool by_vectors = ix->by_vectors();
  if (sharded && !by_vectors) ix->shard_lists = plan_shard_lists(counts, static_cast<uint32_t>(S));
  auto part = [&](size_t s, uint32_t l) -> uint64_t {
    if (!sharded) return s == 0 ? 0 : counts[l];
    if (by_vectors) return part_begin(counts[l], s, S);
    return s <= list_owner(ix, l) ? 0 : counts[l];
  };
  struct Layout {
    std::vector<uint32_t> sizes;
    std::vector<uint64_t> offsets, next;
    DeviceLists lists;
    int64_t size = 0;
  };
  std::vector<Layout> lay(S);
  for (size_t s = 0; s < S; ++s) {
    udf_index* sh = shard(s);
    CtxGuard g(sh->mod->rt->ctx);
    Layout& L = lay[s];
    L.sizes.assign(ix->n_lists, 0);
    for (uint32_t l = 0; l < ix->n_lists; ++l) {
      if (counts[l] > 0xFFFFFFFFull) fail(UDF_ERROR_UNSUPPORTED, "list " + std::to_string(l) + " would hold more than 2^32 - 1 vectors");
      L.sizes[l] = static_cast<uint32_t>(part(s + 1, l) - part(s, l));
      L.size += int64_t(L.sizes[l]);
    }
    L.lists.alloc(sh->mod->rt, sh, plan_offsets(L.sizes, L.offsets));
    L.next = L.offsets;
  }
  std::vector<uint64_t> placed(ix->n_lists, 0);  // per list: the rows of the chunks so far (their positions)
  std::vector<uint32_t> owner_at(ix->n_lists, 0);  // per list: the shard of its next row
  for (size_t c = 0; c < n_chunks; ++c) {
    Chunk ch;
    fetch(c, ch);
    if (ch.data.rows != rows[c])
      fail(UDF_ERROR_INVALID_ARGUMENT, "chunk " + std::to_string(c) + " has " + std::to_string(ch.data.rows) +
                                           " rows now and had " + std::to_string(rows[c]) +
                                           " in the assignment pass: each call for a chunk must give the same rows");
    const std::vector<uint32_t>& label = labels[c];
    std::vector<std::uint8_t> owner(label.size());
    for (size_t i = 0; i < label.size(); ++i) {
      const uint32_t l = label[i];
      while (placed[l] >= part(owner_at[l] + 1, l)) ++owner_at[l];
      owner[i] = static_cast<std::uint8_t>(owner_at[l]);
      ++placed[l];
    }
    for (size_t s = 0; s < S; ++s) {
      udf_index* sh = shard(s);
      Layout& L = lay[s];
      std::vector<uint32_t> slot(label.size(), UDF_IVF_INDEX_V1_NO_SLOT);
      for (size_t i = 0; i < label.size(); ++i)
        if (owner[i] == s) slot[i] = static_cast<uint32_t>(L.next[label[i]]++);
      CtxGuard g(sh->mod->rt->ctx);
      RowStaging st(sh, &ch.data, ch.stride, false, 0);
      scatter_rows(sh, st, slot, ch.id_ptr(), first_ids[c], L.lists);
    }
    std::vector<uint32_t>().swap(labels[c]);
    progress(p, 0.8 + 0.2 * double(c + 1) / double(n_chunks), "pack");
  }
  for (size_t s = 0; s < S; ++s) {
    udf_index* sh = shard(s);
    CtxGuard g(sh->mod->rt->ctx);
    install(sh, lay[s].lists, std::move(lay[s].sizes), std::move(lay[s].offsets));
    sh->size = lay[s].size;
    sh->next_id = next_id;
    if (by_vectors) keep_equal_parts(sh, s, S, counts);
  }
  if (sharded) set_sharded_totals(ix, counts, static_cast<int64_t>(total), next_id);
  progress(p, 1.0, "upload");
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

std::unique_ptr<udf_index> new_index(udf_module* m, const char* metric, uint32_t dim, uint32_t n_lists) {
  require(m != nullptr, "module is NULL");
  require(metric != nullptr, "metric is NULL");
  size_t mi = 0;
  if (udf_module_find_metric(m, metric, &mi) != UDF_OK) fail(UDF_ERROR_INVALID_ARGUMENT, udf_last_error());
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
  ix->normalize = a.coarse_metric == CoarseMetric::Cosine;
  if (ix->normalize && (a.elem == ElemType::I8 || a.elem == ElemType::U8))
    fail(UDF_ERROR_UNSUPPORTED, "metric " + a.symbol + ": the cosine coarse metric needs f32 or f16 elements (vectors are "
                                "stored normalized); this one has " + std::string(to_string(a.elem)));
  return ix;
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

namespace {

void kmeans(udf_index* ix, const udf_tensor* data, int64_t stride, const udf_index_params& p) {
  udf_runtime* rt = ix->mod->rt;
  const int64_t n = data->rows;
  const uint32_t L = ix->n_lists, dim = ix->dim;
  const size_t row_bytes = static_cast<size_t>(dim) * ix->esize;
  uint64_t n_train = p.max_train_rows ? p.max_train_rows : uint64_t(256) * L;
  n_train = std::max<uint64_t>(L, std::min<uint64_t>(n_train, static_cast<uint64_t>(n)));
  BuildProfile prof(rt);
  std::mt19937_64 rng(p.seed);
  // A sample without replacement: a partial Fisher-Yates shuffle (over a
  // dense array of row numbers, or a sparse map of the swapped ones when
  // there are 2^32 rows or more; the same sample either way).
  std::vector<int64_t> sample;
  if (n_train == static_cast<uint64_t>(n)) {
    sample.resize(n);
    std::iota(sample.begin(), sample.end(), 0);
    std::shuffle(sample.begin(), sample.end(), rng);
  } else if (n < (int64_t(1) << 32)) {
    std::vector<uint32_t> rows(static_cast<size_t>(n));
    std::iota(rows.begin(), rows.end(), 0u);
    sample.resize(n_train);
    for (uint64_t i = 0; i < n_train; ++i) {
      const uint64_t j = i + rng() % (n - i);
      std::swap(rows[i], rows[j]);
      sample[i] = rows[i];
    }
  } else {
    std::unordered_map<int64_t, int64_t> swapped;
    for (uint64_t i = 0; i < n_train; ++i) {
      const int64_t j = static_cast<int64_t>(i + rng() % (n - i));
      auto at = [&](int64_t x) { auto it = swapped.find(x); return it == swapped.end() ? x : it->second; };
      const int64_t vi = at(i), vj = at(j);
      swapped[j] = vi;
      sample.push_back(vj);
    }
  }
  std::vector<std::uint8_t> train_raw(n_train * row_bytes);
  {  // copied in row order (sequential reads), each to its place in the sample
    std::vector<uint32_t> order(n_train);
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return sample[a] < sample[b]; });
    for (uint32_t i : order) rows_to_host(rt, data, stride, sample[i], 1, train_raw.data() + size_t(i) * row_bytes);
  }
  CtxGuard g(rt->ctx);
  DevBuf raw, tf, cl, cd, d_order, d_starts, sums, coarse_keys;
  raw.alloc(train_raw.size(), "k-means sample");
  tf.alloc(n_train * dim * 4, "k-means sample (f32)");
  CU(cuMemcpyHtoDAsync, raw.get(), train_raw.data(), train_raw.size(), rt->stream);
  convert(rt, rt->stream, raw.get(), static_cast<uint32_t>(to_dtype(ix->elem)), dim, tf.get(), 0, static_cast<uint32_t>(n_train), dim,
          ix->normalize);
  // Initial centroids: the first L rows of the shuffled sample.
  ix->centroids.resize(size_t(L) * dim);
  CU(cuMemcpyDtoHAsync, ix->centroids.data(), tf.get(), ix->centroids.size() * 4, rt->stream);
  sync(rt);
  raw.release();
  std::vector<std::uint8_t>().swap(train_raw);
  prof.lap("k-means: sample");
  ix->d_centroids.alloc(ix->centroids.size() * 4, "centroids");
  const uint32_t c = candidates_for(ix);
  cl.alloc(n_train * c * 4, "k-means candidates");
  cd.alloc(n_train * c * 4, "k-means distances");
  d_order.alloc(n_train * 4, "k-means rows by list");
  d_starts.alloc((size_t(L) + 1) * 4, "k-means list starts");
  sums.alloc(size_t(L) * dim * 4, "k-means sums");
  std::vector<uint32_t> cand(n_train * c), cnt(L), order(n_train), starts(size_t(L) + 1);
  std::vector<float> keys(n_train * c), sum(size_t(L) * dim);
  for (uint32_t it = 0; it < p.kmeans_iters; ++it) {
    CU(cuMemcpyHtoDAsync, ix->d_centroids.get(), ix->centroids.data(), ix->centroids.size() * 4, rt->stream);
    nearest_centroids(rt, rt->stream, tf.get(), 0, dim, static_cast<uint32_t>(n_train), ix->d_centroids.get(), L, dim,
                      ix->coarse, c, cl.get(), cd.get(), coarse_keys);
    CU(cuMemcpyDtoHAsync, cand.data(), cl.get(), cand.size() * 4, rt->stream);
    CU(cuMemcpyDtoHAsync, keys.data(), cd.get(), keys.size() * 4, rt->stream);
    sync(rt);
    prof.lap("k-means: nearest lists");
    std::vector<uint64_t> sizes(L, 0);
    const std::vector<uint32_t> label = assign_to_lists(ix, cand, keys, n_train, c, sizes, n_train);
    prof.lap("k-means: balance (host)");
    // The rows grouped by list, in row order (a counting sort): each list's
    // sum is added up in that order, the same bits in every run.
    std::fill(cnt.begin(), cnt.end(), 0u);
    for (uint32_t x : label) ++cnt[x];
    starts[0] = 0;
    for (uint32_t l = 0; l < L; ++l) starts[l + 1] = starts[l] + cnt[l];
    {
      std::vector<uint32_t> fill(starts.begin(), starts.end() - 1);
      for (uint64_t i = 0; i < n_train; ++i) order[fill[label[i]]++] = static_cast<uint32_t>(i);
    }
    CU(cuMemcpyHtoDAsync, d_order.get(), order.data(), order.size() * 4, rt->stream);
    CU(cuMemcpyHtoDAsync, d_starts.get(), starts.data(), starts.size() * 4, rt->stream);
    udf_ivf_accumulate_args_v1 a{tf.as<const float>(), d_order.as<const uint32_t>(), d_starts.as<const uint32_t>(),
                                 sums.as<float>(), L, dim};
    launch(rt, rt->f_accumulate, L, 0, &a);
    CU(cuMemcpyDtoHAsync, sum.data(), sums.get(), sum.size() * 4, rt->stream);
    sync(rt);
    uint32_t largest = 0;
    for (uint32_t l = 1; l < L; ++l)
      if (cnt[l] > cnt[largest]) largest = l;
    for (uint32_t l = 0; l < L; ++l) {
      float* cen = ix->centroids.data() + size_t(l) * dim;
      if (cnt[l] == 0) {
        // Empty list: re-seed at a random member of the largest list.
        std::vector<uint64_t> members;
        for (uint64_t i = 0; i < n_train; ++i)
          if (label[i] == largest) members.push_back(i);
        const uint64_t pick = members.empty() ? rng() % n_train : members[rng() % members.size()];
        CU(cuMemcpyDtoHAsync, cen, tf.get() + pick * dim * 4, size_t(dim) * 4, rt->stream);
        sync(rt);
        continue;
      }
      for (uint32_t d = 0; d < dim; ++d) cen[d] = sum[size_t(l) * dim + d] / static_cast<float>(cnt[l]);
      if (ix->normalize) {
        double s = 0;
        for (uint32_t d = 0; d < dim; ++d) s += double(cen[d]) * cen[d];
        if (s > 0)
          for (uint32_t d = 0; d < dim; ++d) cen[d] = static_cast<float>(cen[d] / std::sqrt(s));
      }
    }
    prof.lap("k-means: update");
    progress(p, 0.5 * double(it + 1) / p.kmeans_iters, "kmeans");
  }
  CU(cuMemcpyHtoDAsync, ix->d_centroids.get(), ix->centroids.data(), ix->centroids.size() * 4, rt->stream);
  sync(rt);
}

}  // namespace

void make_centroids(udf_index* ix, const udf_tensor* data, int64_t stride, const udf_index_params& p) {
  if (!p.centroids) return kmeans(ix, data, stride, p);
  const size_t n = size_t(ix->n_lists) * ix->dim;
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(p.centroids[i]))
      fail(UDF_ERROR_INVALID_ARGUMENT, "centroids: element " + std::to_string(i) + " (list " + std::to_string(i / ix->dim) +
                                           ", dimension " + std::to_string(i % ix->dim) + ") is not finite");
  ix->centroids.assign(p.centroids, p.centroids + n);
  udf_runtime* rt = ix->mod->rt;
  upload(rt->stream, ix->d_centroids, ix->centroids.data(), n * 4, "centroids");
  sync(rt);
  progress(p, 0.5, "kmeans");
}

}  // namespace udf::rt
