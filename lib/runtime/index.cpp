// IVF-Flat indexes: build (GPU k-means + balanced assignment), add, save/load
// (versioned file), and search (GPU coarse probe, host list-major schedule,
// UDF scan and merge from the module).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <unordered_map>

#include "api_guard.h"
#include "index_file.h"
#include "internal.h"
#include "udf/kernels/ivf_flat_v1.h"
#include "udf/kernels/ivf_index_v1.h"
#include "udf/support/fs.h"
#include "udf/support/hash.h"

using namespace udf;
using namespace udf::rt;

struct udf_index {
  udf_module* mod = nullptr;
  size_t metric = 0;
  std::string symbol;
  ElemType elem = ElemType::F32;
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
  std::vector<std::vector<std::uint8_t>> vecs;     // per list, row-major [size][dim] elements
  std::vector<std::vector<int64_t>> ids;           // per list
  // device
  DevBuf d_centroids, d_list_data, d_offsets, d_sizes, d_ids;
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> sizes;
  // search scratch
  DevBuf s_queries, s_qnorm, s_qf32, s_probes, s_items, s_pairs, s_rows, s_cd, s_cs, s_od, s_oi, s_cap[8], s_fcap[8];
  udf_search_stats stats{};
};

namespace {

void require(bool ok, const std::string& m) {
  if (!ok) fail(UDF_ERROR_INVALID_ARGUMENT, m);
}

const ModuleArtifact& artifact_of(const udf_index* ix) { return ix->mod->manifest.artifacts[ix->metric]; }

void progress(const udf_index_params& p, double f, const char* stage) {
  if (p.progress) p.progress(p.progress_user, f, stage);
}

std::string dtype_name(udf_dtype t) {
  switch (t) {
    case UDF_DTYPE_F32: return "f32";
    case UDF_DTYPE_F16: return "f16";
    case UDF_DTYPE_I8: return "i8";
    case UDF_DTYPE_U8: return "u8";
    case UDF_DTYPE_I32: return "i32";
    case UDF_DTYPE_I64: return "i64";
  }
  return "dtype " + std::to_string(static_cast<int>(t));
}

// Checks a tensor's shape and memory; returns its row stride in elements.
int64_t check_tensor(udf_runtime* rt, const udf_tensor* t, const char* what, udf_dtype dtype, int64_t cols,
                     int64_t rows = -1) {
  require(t != nullptr, std::string(what) + " is NULL");
  require(t->dtype == dtype, std::string(what) + " has element type " + dtype_name(t->dtype) + ", expected " +
                                 dtype_name(dtype));
  require(t->rows >= 1, std::string(what) + " has " + std::to_string(t->rows) + " rows");
  require(t->cols == cols, std::string(what) + " has " + std::to_string(t->cols) + " columns, expected " +
                               std::to_string(cols) + (cols > 1 ? " (the dimension)" : ""));
  if (rows >= 0) require(t->rows == rows, std::string(what) + " has " + std::to_string(t->rows) + " rows, expected " +
                                              std::to_string(rows));
  const int64_t stride = t->row_stride == 0 ? t->cols : t->row_stride;
  require(stride >= t->cols, std::string(what) + ": row_stride " + std::to_string(t->row_stride) + " < cols");
  require(t->data != nullptr, std::string(what) + ".data is NULL");
  if (t->device != UDF_HOST_DEVICE) {
    require(t->device == rt->ordinal, std::string(what) + " is on device " + std::to_string(t->device) +
                                          "; this runtime uses device " + std::to_string(rt->ordinal));
    unsigned mem_type = 0;
    CUresult r = cuda().cuPointerGetAttribute(&mem_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                              reinterpret_cast<CUdeviceptr>(t->data));
    require(r == CUDA_SUCCESS && (mem_type == CU_MEMORYTYPE_DEVICE || mem_type == CU_MEMORYTYPE_UNIFIED),
            std::string(what) + ".data is not CUDA device memory (device = " + std::to_string(t->device) + ")");
  }
  return stride;
}

// Copies rows [r0, r0 + n) of a (host or device) tensor into contiguous host memory.
void rows_to_host(udf_runtime* rt, const udf_tensor* t, int64_t stride, int64_t r0, int64_t n, std::uint8_t* dst) {
  const size_t es = udf_dtype_size(t->dtype);
  const size_t row_bytes = static_cast<size_t>(t->cols) * es;
  const auto* base = static_cast<const std::uint8_t*>(t->data) + static_cast<size_t>(r0 * stride) * es;
  if (t->device == UDF_HOST_DEVICE) {
    for (int64_t r = 0; r < n; ++r) std::memcpy(dst + r * row_bytes, base + r * stride * es, row_bytes);
  } else if (stride == t->cols) {
    CU(cuMemcpyDtoHAsync, dst, reinterpret_cast<CUdeviceptr>(base), row_bytes * n, rt->stream);
    sync(rt);
  } else {
    for (int64_t r = 0; r < n; ++r)
      CU(cuMemcpyDtoHAsync, dst + r * row_bytes, reinterpret_cast<CUdeviceptr>(base + r * stride * es), row_bytes,
         rt->stream);
    sync(rt);
  }
}

void upload(udf_runtime* rt, DevBuf& b, const void* src, size_t bytes, const char* what) {
  b.ensure(bytes, what);
  if (bytes) CU(cuMemcpyHtoDAsync, b.get(), src, bytes, rt->stream);
}

void convert(udf_runtime* rt, CUdeviceptr src, uint32_t src_elem, uint64_t src_stride, CUdeviceptr dst,
             uint32_t dst_elem, uint32_t rows, uint32_t dim, bool normalize) {
  udf_ivf_convert_args_v1 a{reinterpret_cast<const void*>(src), reinterpret_cast<void*>(dst), src_stride, dim, rows, dim,
                            src_elem, dst_elem, normalize ? 1u : 0u, 0};
  launch(rt, rt->f_convert, rows, 0, &a);
}

uint32_t pow2_at_least(uint32_t n) {
  uint32_t p = 2;
  while (p < n) p <<= 1;
  return p;
}

// n_out nearest centroids of each f32 row (device), keys ascending (L2: distance, IP: -dot).
void nearest(udf_runtime* rt, CUdeviceptr rows, uint32_t n_rows, CUdeviceptr centroids, uint32_t n_lists, uint32_t dim,
             uint32_t metric, uint32_t n_out, CUdeviceptr out_lists, CUdeviceptr out_dists) {
  const uint32_t sort = pow2_at_least(n_lists);
  const size_t smem = UDF_IVF_NEAREST_V1_SMEM_BYTES(sort, dim);
  prepare_smem(rt, rt->f_nearest, smem, "the coarse probe over " + std::to_string(n_lists) + " lists");
  udf_ivf_nearest_args_v1 a{reinterpret_cast<const float*>(rows), reinterpret_cast<const float*>(centroids),
                            reinterpret_cast<uint32_t*>(out_lists), reinterpret_cast<float*>(out_dists),
                            n_rows, dim, n_lists, n_out, metric, sort};
  launch(rt, rt->f_nearest, n_rows, smem, &a);
}

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
  std::vector<uint8_t> placed(n, 0);
  std::vector<size_t> pending(n);
  std::iota(pending.begin(), pending.end(), 0);
  std::vector<std::vector<size_t>> want(n_lists);
  while (!pending.empty()) {
    for (auto& w : want) w.clear();
    std::vector<size_t> leftover;
    for (size_t i : pending) {
      if (rank[i] < c) want[cand[i * c + rank[i]]].push_back(i);
      else leftover.push_back(i);
    }
    std::vector<size_t> next;
    for (size_t l = 0; l < n_lists; ++l) {
      auto& w = want[l];
      if (w.empty()) continue;
      const uint64_t room = counts[l] >= cap ? 0 : cap - counts[l];
      if (w.size() > room) {
        std::sort(w.begin(), w.end(), [&](size_t a, size_t b) {
          const float ka = keys[a * c + rank[a]], kb = keys[b * c + rank[b]];
          return ka < kb || (ka == kb && a < b);
        });
        for (size_t j = room; j < w.size(); ++j) {
          ++rank[w[j]];
          next.push_back(w[j]);
        }
        w.resize(room);
      }
      for (size_t i : w) label[i] = static_cast<uint32_t>(l);
      counts[l] += w.size();
    }
    for (size_t i : leftover) {  // out of candidates: the emptiest list
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

// Prepares rows [0, n) of `data` for the index: normalized when the coarse
// metric is cosine (vectors stored normalized), then assigned to lists.
// Appends them to the host lists.
void assign_and_append(udf_index* ix, const udf_tensor* data, int64_t stride, const int64_t* id_list,
                       const udf_index_params* p) {
  udf_runtime* rt = ix->mod->rt;
  const int64_t n = data->rows;
  const uint32_t c = candidates_for(ix);
  const size_t row_bytes = static_cast<size_t>(ix->dim) * ix->esize;
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(65536, (int64_t(256) << 20) / (ix->dim * 4 + row_bytes)));
  std::vector<std::uint8_t> host(static_cast<size_t>(n) * row_bytes);
  std::vector<uint32_t> cand(static_cast<size_t>(n) * c);
  std::vector<float> keys(static_cast<size_t>(n) * c);
  DevBuf raw, norm, f32, dl, dd;
  raw.alloc(chunk * row_bytes, "vectors");
  f32.alloc(chunk * ix->dim * 4, "vectors (f32)");
  dl.alloc(chunk * c * 4, "candidate lists");
  dd.alloc(chunk * c * 4, "candidate distances");
  if (ix->normalize) norm.alloc(chunk * row_bytes, "normalized vectors");
  const uint32_t el = static_cast<uint32_t>(to_dtype(ix->elem));
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t m = std::min(chunk, n - r0);
    std::uint8_t* h = host.data() + r0 * row_bytes;
    rows_to_host(rt, data, stride, r0, m, h);
    CU(cuMemcpyHtoDAsync, raw.get(), h, m * row_bytes, rt->stream);
    if (ix->normalize) {
      convert(rt, raw.get(), el, ix->dim, norm.get(), el, static_cast<uint32_t>(m), ix->dim, true);
      CU(cuMemcpyDtoHAsync, h, norm.get(), m * row_bytes, rt->stream);
    }
    convert(rt, raw.get(), el, ix->dim, f32.get(), 0, static_cast<uint32_t>(m), ix->dim, ix->normalize);
    nearest(rt, f32.get(), static_cast<uint32_t>(m), ix->d_centroids.get(), ix->n_lists, ix->dim, ix->coarse, c,
            dl.get(), dd.get());
    CU(cuMemcpyDtoHAsync, cand.data() + r0 * c, dl.get(), m * c * 4, rt->stream);
    CU(cuMemcpyDtoHAsync, keys.data() + r0 * c, dd.get(), m * c * 4, rt->stream);
    sync(rt);
    if (p) progress(*p, 0.5 + 0.4 * double(r0 + m) / double(n), "assign");
  }
  if (ix->coarse != UDF_IVF_INDEX_V1_L2)
    for (float& k : keys) k = -k;
  std::vector<uint64_t> counts(ix->n_lists);
  for (uint32_t l = 0; l < ix->n_lists; ++l) counts[l] = ix->ids[l].size();
  const uint64_t total = static_cast<uint64_t>(ix->size + n);
  const uint64_t cap = ix->balance > 0
                           ? std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(ix->balance * double(total) / ix->n_lists)))
                           : 0;
  const std::vector<uint32_t> label = balanced_assign(cand, keys, static_cast<size_t>(n), c, counts, cap);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t l = label[i];
    auto& v = ix->vecs[l];
    v.insert(v.end(), host.begin() + i * row_bytes, host.begin() + (i + 1) * row_bytes);
    const int64_t id = id_list ? id_list[i] : ix->next_id + i;
    ix->ids[l].push_back(id);
  }
  int64_t max_id = ix->next_id - 1;
  if (id_list)
    for (int64_t i = 0; i < n; ++i) max_id = std::max(max_id, id_list[i]);
  else
    max_id = ix->next_id + n - 1;
  ix->next_id = max_id + 1;
  ix->size += n;
}

// Interleaves the host lists into the kernel layout and uploads everything.
void pack_and_upload(udf_index* ix) {
  udf_runtime* rt = ix->mod->rt;
  const uint32_t V = static_cast<uint32_t>(16 / ix->esize);
  ix->offsets.assign(ix->n_lists, 0);
  ix->sizes.assign(ix->n_lists, 0);
  uint64_t slots = 0;
  for (uint32_t l = 0; l < ix->n_lists; ++l) {
    ix->offsets[l] = slots;
    ix->sizes[l] = static_cast<uint32_t>(ix->ids[l].size());
    slots += (ix->ids[l].size() + 31) / 32 * 32;
  }
  if (slots >= 0xFFFFFFFFull)
    fail(UDF_ERROR_UNSUPPORTED, "the index would need " + std::to_string(slots) + " slots; at most 2^32 - 1");
  const size_t group_elems = size_t(32) * ix->dim_padded;
  std::vector<std::uint8_t> data(static_cast<size_t>(slots) * ix->dim_padded * ix->esize, 0);
  std::vector<int64_t> ids(static_cast<size_t>(slots), -1);
  const size_t es = ix->esize;
  for (uint32_t l = 0; l < ix->n_lists; ++l) {
    const auto& v = ix->vecs[l];
    for (size_t i = 0; i < ix->ids[l].size(); ++i) {
      const uint64_t s = ix->offsets[l] + i;
      ids[s] = ix->ids[l][i];
      std::uint8_t* g = data.data() + (s / 32) * group_elems * es;
      for (uint32_t d = 0; d < ix->dim; ++d)
        std::memcpy(g + ((d / V) * 32 * V + (s % 32) * V + d % V) * es, v.data() + (i * ix->dim + d) * es, es);
    }
  }
  CtxGuard g(rt->ctx);
  ix->d_list_data.alloc(data.size(), "list data");
  ix->d_ids.alloc(ids.size() * 8, "ids");
  ix->d_offsets.alloc(ix->n_lists * 8, "list offsets");
  ix->d_sizes.alloc(ix->n_lists * 4, "list sizes");
  ix->d_centroids.alloc(ix->centroids.size() * 4, "centroids");
  CU(cuMemcpyHtoDAsync, ix->d_list_data.get(), data.data(), data.size(), rt->stream);
  CU(cuMemcpyHtoDAsync, ix->d_ids.get(), ids.data(), ids.size() * 8, rt->stream);
  CU(cuMemcpyHtoDAsync, ix->d_offsets.get(), ix->offsets.data(), ix->n_lists * 8, rt->stream);
  CU(cuMemcpyHtoDAsync, ix->d_sizes.get(), ix->sizes.data(), ix->n_lists * 4, rt->stream);
  CU(cuMemcpyHtoDAsync, ix->d_centroids.get(), ix->centroids.data(), ix->centroids.size() * 4, rt->stream);
  sync(rt);
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
  ix->vecs.resize(n_lists);
  ix->ids.resize(n_lists);
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

void kmeans(udf_index* ix, const udf_tensor* data, int64_t stride, const udf_index_params& p) {
  udf_runtime* rt = ix->mod->rt;
  const int64_t n = data->rows;
  const uint32_t L = ix->n_lists, dim = ix->dim;
  const size_t row_bytes = static_cast<size_t>(dim) * ix->esize;
  uint64_t n_train = p.max_train_rows ? p.max_train_rows : uint64_t(256) * L;
  n_train = std::max<uint64_t>(L, std::min<uint64_t>(n_train, static_cast<uint64_t>(n)));
  std::mt19937_64 rng(p.seed);
  // A sample without replacement (partial Fisher-Yates over a sparse map).
  std::vector<int64_t> sample;
  if (n_train == static_cast<uint64_t>(n)) {
    sample.resize(n);
    std::iota(sample.begin(), sample.end(), 0);
    std::shuffle(sample.begin(), sample.end(), rng);
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
  std::vector<std::uint8_t> row(row_bytes);
  for (uint64_t i = 0; i < n_train; ++i) rows_to_host(rt, data, stride, sample[i], 1, train_raw.data() + i * row_bytes);
  CtxGuard g(rt->ctx);
  DevBuf raw, tf, cl, cd, lab, sums, counts;
  raw.alloc(train_raw.size(), "k-means sample");
  tf.alloc(n_train * dim * 4, "k-means sample (f32)");
  CU(cuMemcpyHtoDAsync, raw.get(), train_raw.data(), train_raw.size(), rt->stream);
  convert(rt, raw.get(), static_cast<uint32_t>(to_dtype(ix->elem)), dim, tf.get(), 0, static_cast<uint32_t>(n_train), dim,
          ix->normalize);
  std::vector<float> train(n_train * dim);
  CU(cuMemcpyDtoHAsync, train.data(), tf.get(), train.size() * 4, rt->stream);
  sync(rt);
  raw.release();
  // Initial centroids: the first L rows of the shuffled sample.
  ix->centroids.assign(train.begin(), train.begin() + size_t(L) * dim);
  ix->d_centroids.alloc(ix->centroids.size() * 4, "centroids");
  const uint32_t c = candidates_for(ix);
  cl.alloc(n_train * c * 4, "k-means candidates");
  cd.alloc(n_train * c * 4, "k-means distances");
  lab.alloc(n_train * 4, "k-means labels");
  sums.alloc(size_t(L) * dim * 4, "k-means sums");
  counts.alloc(size_t(L) * 4, "k-means counts");
  std::vector<uint32_t> cand(n_train * c), cnt(L);
  std::vector<float> keys(n_train * c), sum(size_t(L) * dim);
  const uint64_t cap =
      ix->balance > 0 ? std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(ix->balance * double(n_train) / L))) : 0;
  for (uint32_t it = 0; it < p.kmeans_iters; ++it) {
    CU(cuMemcpyHtoDAsync, ix->d_centroids.get(), ix->centroids.data(), ix->centroids.size() * 4, rt->stream);
    nearest(rt, tf.get(), static_cast<uint32_t>(n_train), ix->d_centroids.get(), L, dim, ix->coarse, c, cl.get(), cd.get());
    CU(cuMemcpyDtoHAsync, cand.data(), cl.get(), cand.size() * 4, rt->stream);
    CU(cuMemcpyDtoHAsync, keys.data(), cd.get(), keys.size() * 4, rt->stream);
    sync(rt);
    if (ix->coarse != UDF_IVF_INDEX_V1_L2)
      for (float& k : keys) k = -k;
    std::vector<uint64_t> sizes(L, 0);
    const std::vector<uint32_t> label = balanced_assign(cand, keys, n_train, c, sizes, cap);
    CU(cuMemcpyHtoDAsync, lab.get(), label.data(), label.size() * 4, rt->stream);
    CU(cuMemsetD32Async, sums.get(), 0, size_t(L) * dim, rt->stream);
    CU(cuMemsetD32Async, counts.get(), 0, L, rt->stream);
    udf_ivf_accumulate_args_v1 a{tf.as<const float>(), lab.as<const uint32_t>(), sums.as<float>(), counts.as<uint32_t>(),
                                 static_cast<uint32_t>(n_train), dim};
    launch(rt, rt->f_accumulate, static_cast<uint32_t>(n_train), 0, &a);
    CU(cuMemcpyDtoHAsync, sum.data(), sums.get(), sum.size() * 4, rt->stream);
    CU(cuMemcpyDtoHAsync, cnt.data(), counts.get(), cnt.size() * 4, rt->stream);
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
        std::copy_n(train.data() + pick * dim, dim, cen);
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
    progress(p, 0.5 * double(it + 1) / p.kmeans_iters, "kmeans");
  }
  CU(cuMemcpyHtoDAsync, ix->d_centroids.get(), ix->centroids.data(), ix->centroids.size() * 4, rt->stream);
  sync(rt);
}

// ---------------------------------------------------------------- files

struct Writer {
  Bytes b;
  template <class T> void put(const T& v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
  }
  void raw(const void* p, size_t n) {
    const auto* q = static_cast<const std::uint8_t*>(p);
    b.insert(b.end(), q, q + n);
  }
  void str(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
};

// ---------------------------------------------------------------- search

struct Schedule {
  std::vector<udf_ivf_work_item_v1> items;
  std::vector<udf_ivf_pair_v1> pairs;
  std::vector<uint32_t> query_rows;
};

// Binds `decl` (a metric's or filter's captures, ABI order) from `bindings`
// by name into `out`: every declared one bound once, none unknown, types
// checked.  Arrays: length `array_len` (a metric's: dim), or any length >= 1
// when 0 (a filter's); host arrays are copied into `bufs`.
void bind_captures(udf_index* ix, const std::vector<Capture>& decl, const udf_capture_binding* bindings, size_t n,
                   const std::string& owner, uint32_t array_len, DevBuf* bufs, udf_capture_v1* out) {
  udf_runtime* rt = ix->mod->rt;
  for (size_t i = 0; i < n; ++i) {
    require(bindings != nullptr, "captures of " + owner + " are NULL with a count > 0");
    const char* name = bindings[i].name;
    if (!name) fail(UDF_ERROR_CAPTURE, "capture binding " + std::to_string(i) + " of " + owner + " has no name");
    const bool known = std::any_of(decl.begin(), decl.end(), [&](const Capture& c) { return c.name == name; });
    if (!known) {
      std::string d;
      for (const auto& c : decl) d += (d.empty() ? "" : ", ") + to_string(c);
      fail(UDF_ERROR_CAPTURE, std::string("capture '") + name + "' is not declared by " + owner +
                                  " (declared: " + (d.empty() ? "none" : d) + ")");
    }
    for (size_t j = 0; j < i; ++j)
      if (bindings[j].name && std::strcmp(bindings[j].name, name) == 0)
        fail(UDF_ERROR_CAPTURE, std::string("capture '") + name + "' of " + owner + " is bound twice");
  }
  for (size_t ci = 0; ci < decl.size(); ++ci) {
    const Capture& c = decl[ci];
    const udf_capture_binding* b = nullptr;
    for (size_t i = 0; i < n; ++i)
      if (std::strcmp(bindings[i].name, c.name.c_str()) == 0) b = &bindings[i];
    const std::string what = "capture '" + to_string(c) + "' of " + owner;
    if (!b) fail(UDF_ERROR_CAPTURE, what + " is not bound");
    udf_dtype want = c.type == CaptureType::F32 ? UDF_DTYPE_F32
                     : c.type == CaptureType::F16 ? UDF_DTYPE_F16
                     : c.type == CaptureType::I32 ? UDF_DTYPE_I32
                                                   : UDF_DTYPE_U8;
    if (c.array) {
      const udf_tensor* t = b->tensor;
      if (!t || !t->data) fail(UDF_ERROR_CAPTURE, what + ": an array capture needs a tensor");
      if (t->dtype != want)
        fail(UDF_ERROR_CAPTURE, what + ": bound to a " + dtype_name(t->dtype) + " tensor, expected " + dtype_name(want));
      const bool vec = (t->rows == 1 || t->cols == 1) && t->rows >= 1 && t->cols >= 1;
      if (!vec || (array_len != 0 && t->rows * t->cols != static_cast<int64_t>(array_len)))
        fail(UDF_ERROR_CAPTURE, what + ": length " + std::to_string(t->rows) + " x " + std::to_string(t->cols) +
                                    (array_len ? ", expected dim = " + std::to_string(array_len) : std::string(", expected a 1-D array")));
      if (t->rows > 1 && t->row_stride != 0 && t->row_stride != 1)
        fail(UDF_ERROR_CAPTURE, what + ": must be contiguous");
      const int64_t len = t->rows * t->cols;
      const size_t bytes = size_t(len) * udf_dtype_size(want);
      if (t->device == UDF_HOST_DEVICE) {
        upload(rt, bufs[ci], t->data, bytes, "a capture");
        out[ci].ptr = bufs[ci].as<const void>();
      } else {
        udf_tensor flat = *t;
        flat.rows = 1;
        flat.cols = len;
        flat.row_stride = 0;
        try {
          check_tensor(rt, &flat, "capture", want, len);
        } catch (const RuntimeFailure& f) {
          fail(UDF_ERROR_CAPTURE, what + ": " + f.what());
        }
        out[ci].ptr = t->data;
      }
    } else {
      if (want != UDF_DTYPE_F32 && want != UDF_DTYPE_I32) fail(UDF_ERROR_CAPTURE, what + ": bad scalar type");
      if (b->tensor) {
        const udf_tensor* t = b->tensor;
        if (t->dtype != want || t->rows != 1 || t->cols != 1 || t->device != UDF_HOST_DEVICE || !t->data)
          fail(UDF_ERROR_CAPTURE, what + ": a scalar capture takes a 1 x 1 host tensor of " + dtype_name(want) +
                                      " (or the value in the binding)");
        std::memcpy(&out[ci].bits, t->data, 4);
      } else if (want == UDF_DTYPE_F32) {
        out[ci].f32 = b->f32;
      } else {
        out[ci].i32 = b->i32;
      }
    }
  }
}

// The list-major schedule of docs/kernels.md (same rule as test/gpu/scan_check.cpp).
Schedule build_schedule(const udf_index* ix, const uint32_t* probes, uint32_t nq, uint32_t P, uint32_t qpi, uint32_t sms) {
  Schedule s;
  const uint32_t L = ix->n_lists;
  // Counting sort of (query, list) pairs by list.
  std::vector<uint32_t> start(L + 1, 0);
  for (size_t i = 0; i < size_t(nq) * P; ++i) ++start[probes[i] + 1];
  for (uint32_t l = 0; l < L; ++l) start[l + 1] += start[l];
  std::vector<uint32_t> by_list(size_t(nq) * P);
  {
    std::vector<uint32_t> fill(start.begin(), start.end() - 1);
    for (uint32_t q = 0; q < nq; ++q)
      for (uint32_t j = 0; j < P; ++j) by_list[fill[probes[size_t(q) * P + j]]++] = q;
  }
  uint64_t base_items = 0, probed_groups = 0;
  for (uint32_t l = 0; l < L; ++l) {
    const uint64_t nql = start[l + 1] - start[l];
    if (nql == 0 || ix->sizes[l] == 0) continue;
    const uint64_t items = (nql + qpi - 1) / qpi;
    base_items += items;
    probed_groups += (ix->sizes[l] + 31) / 32 * items;
  }
  const uint64_t target = 4ull * sms;
  uint32_t tile = 0xFFFFFFFFu;
  if (base_items < target && probed_groups > 0)
    tile = static_cast<uint32_t>(std::max<uint64_t>(4, (probed_groups + target - 1) / target));
  std::vector<uint32_t> rows_of(nq, 0);
  // First pass: items and the number of rows per query.
  for (uint32_t l = 0; l < L; ++l) {
    const uint32_t b = start[l], e = start[l + 1];
    const uint32_t groups = (ix->sizes[l] + 31) / 32;
    if (b == e || groups == 0) continue;  // empty lists: their queries get no rows from them
    for (uint32_t c = b; c < e; c += qpi) {
      const uint32_t cnt = std::min(qpi, e - c);
      uint32_t g = 0;
      do {
        const uint32_t ge = tile == 0xFFFFFFFFu ? 0xFFFFFFFFu : std::min(groups, g + tile);
        s.items.push_back(udf_ivf_work_item_v1{l, g, ge, static_cast<uint32_t>(s.pairs.size()), cnt, 0});
        for (uint32_t j = 0; j < cnt; ++j) {
          s.pairs.push_back(udf_ivf_pair_v1{by_list[c + j], 0});
          ++rows_of[by_list[c + j]];
        }
        g = ge;
      } while (g < groups);
    }
  }
  s.query_rows.assign(size_t(nq) + 1, 0);
  for (uint32_t q = 0; q < nq; ++q) s.query_rows[q + 1] = s.query_rows[q] + rows_of[q];
  std::vector<uint32_t> next(s.query_rows.begin(), s.query_rows.end() - 1);
  for (auto& p : s.pairs) p.row = next[p.query]++;
  return s;
}

}  // namespace

extern "C" {

UDF_API void udf_index_params_default(udf_index_params* p) {
  if (!p) return;
  *p = udf_index_params{};
  p->n_lists = 1024;
  p->kmeans_iters = 20;
  p->seed = 1234;
  p->balance = 2.0;
}

UDF_API void udf_search_params_default(udf_search_params* p) {
  if (!p) return;
  *p = udf_search_params{};
  p->k = 10;
  p->n_probes = 32;
}

UDF_API udf_status udf_index_build(udf_module* m, const char* metric, const udf_tensor* data, const udf_tensor* ids,
                                   const udf_index_params* params, udf_index** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    require(m != nullptr, "module is NULL");
    require(params != nullptr, "params is NULL");
    require(data != nullptr, "data is NULL");
    const udf_index_params& p = *params;
    require(p.n_lists >= 1 && p.n_lists <= kMaxLists,
            "n_lists = " + std::to_string(p.n_lists) + " must be in 1 .. " + std::to_string(kMaxLists));
    require(std::isfinite(p.balance) && (p.balance == 0 || p.balance >= 1.0),
            "balance = " + std::to_string(p.balance) + " must be 0 (no cap) or >= 1");
    require(data->cols >= 1 && data->cols <= 65536, "data has " + std::to_string(data->cols) + " columns (dim must be 1 .. 65536)");
    udf_runtime* rt = m->rt;
    CtxGuard g(rt->ctx);
    auto ix = new_index(m, metric, static_cast<uint32_t>(data->cols), p.n_lists);
    ix->balance = p.balance;
    const int64_t stride = check_tensor(rt, data, "data", to_dtype(ix->elem), data->cols);
    require(data->rows >= p.n_lists, "data has " + std::to_string(data->rows) + " rows: fewer than n_lists = " +
                                         std::to_string(p.n_lists));
    std::vector<int64_t> id_list;
    check_ids(rt, ids, data->rows, id_list);
    kmeans(ix.get(), data, stride, p);
    assign_and_append(ix.get(), data, stride, ids ? id_list.data() : nullptr, &p);
    progress(p, 0.9, "pack");
    pack_and_upload(ix.get());
    progress(p, 1.0, "upload");
    ++m->live_indexes;
    *out = ix.release();
  });
}

UDF_API udf_status udf_index_add(udf_index* ix, const udf_tensor* data, const udf_tensor* ids) {
  return guarded([&] {
    require(ix != nullptr, "index is NULL");
    udf_runtime* rt = ix->mod->rt;
    CtxGuard g(rt->ctx);
    const int64_t stride = check_tensor(rt, data, "data", to_dtype(ix->elem), ix->dim);
    std::vector<int64_t> id_list;
    check_ids(rt, ids, data->rows, id_list);
    assign_and_append(ix, data, stride, ids ? id_list.data() : nullptr, nullptr);
    pack_and_upload(ix);
  });
}

UDF_API udf_status udf_index_save(const udf_index* ix, const char* path) {
  return guarded([&] {
    require(ix != nullptr, "index is NULL");
    require(path != nullptr && *path, "path is NULL or empty");
    const ModuleArtifact& a = artifact_of(ix);
    Writer w;
    w.raw(kIndexFileMagic, 8);
    w.put(kIndexFileMajor);
    w.put(kIndexFileMinor);
    w.put(static_cast<uint32_t>(to_dtype(ix->elem)));
    w.put(ix->dim);
    w.put(ix->n_lists);
    w.put(ix->coarse | (ix->normalize ? 0x100u : 0u));
    w.put(ix->size);
    w.put(ix->next_id);
    w.put(ix->balance);
    w.str(ix->symbol);
    w.str(a.cache_key);
    w.raw(ix->centroids.data(), ix->centroids.size() * 4);
    for (uint32_t l = 0; l < ix->n_lists; ++l) w.put(static_cast<uint64_t>(ix->ids[l].size()));
    for (uint32_t l = 0; l < ix->n_lists; ++l) {
      w.raw(ix->ids[l].data(), ix->ids[l].size() * 8);
      w.raw(ix->vecs[l].data(), ix->vecs[l].size());
    }
    const Sha256 h = sha256(w.b);
    w.raw(h.data(), h.size());
    auto r = write_file_atomic(path, w.b);
    if (!r) fail(UDF_ERROR_IO, r.error().message());
  });
}

UDF_API udf_status udf_index_load(udf_module* m, const char* path, udf_index** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    require(path != nullptr && *path, "path is NULL or empty");
    auto bytes = read_file(path);
    if (!bytes) fail(UDF_ERROR_IO, bytes.error().message());
    const std::string P = path;
    auto header = parse_index_file_header(*bytes, P);
    if (!header) fail(UDF_ERROR_BAD_FORMAT, header.error().message());
    const IndexFileHeader& h = *header;
    const std::string& symbol = h.symbol;
    const std::string& key = h.cache_key;
    // The file is checked before the module, so a corrupt file is reported as such.
    require(m != nullptr, "module is NULL");
    size_t mi = 0;
    if (udf_module_find_metric(m, symbol.c_str(), &mi) != UDF_OK)
      fail(UDF_ERROR_MISMATCH, P + ": index was built with metric '" + symbol + "': " + udf_last_error());
    const ModuleArtifact& a = m->manifest.artifacts[mi];
    if (a.cache_key != key)
      fail(UDF_ERROR_MISMATCH, P + ": index was built with a different artifact for metric '" + symbol +
                                   "' (cache key " + key.substr(0, 16) + "..., module has " + a.cache_key.substr(0, 16) +
                                   "...)");
    if (static_cast<uint32_t>(to_dtype(a.elem)) != h.elem)
      fail(UDF_ERROR_MISMATCH, P + ": element type differs from metric '" + symbol + "'");
    CtxGuard g(m->rt->ctx);
    auto ix = new_index(m, symbol.c_str(), h.dim, h.n_lists);
    if ((h.coarse & 0xFF) != ix->coarse || ((h.coarse & 0x100) != 0) != ix->normalize)
      fail(UDF_ERROR_MISMATCH, P + ": coarse metric differs from metric '" + symbol + "'");
    ix->size = h.size;
    ix->next_id = h.next_id;
    ix->balance = h.balance;
    auto lists = parse_index_file_lists(*bytes, h, P);
    if (!lists) fail(UDF_ERROR_BAD_FORMAT, lists.error().message());
    ix->centroids = std::move(lists->centroids);
    ix->ids = std::move(lists->ids);
    ix->vecs = std::move(lists->vecs);
    pack_and_upload(ix.get());
    ++m->live_indexes;
    *out = ix.release();
  });
}

UDF_API udf_status udf_index_with_metric(const udf_index* ix, udf_module* m, const char* metric, udf_index** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    require(ix != nullptr, "index is NULL");
    require(m != nullptr, "module is NULL");
    require(m->rt == ix->mod->rt, "the module was loaded by another runtime than the index's");
    CtxGuard g(m->rt->ctx);
    auto nx = new_index(m, metric, ix->dim, ix->n_lists);
    if (nx->elem != ix->elem)
      fail(UDF_ERROR_MISMATCH, "metric " + nx->symbol + " takes " + std::string(to_string(nx->elem)) + " elements; the index (metric " +
                                   ix->symbol + ") holds " + std::string(to_string(ix->elem)));
    if (nx->coarse != ix->coarse || nx->normalize != ix->normalize)
      fail(UDF_ERROR_MISMATCH, "metric " + nx->symbol + " has another coarse metric than the index's (metric " +
                                   ix->symbol + "): its lists were clustered for that one");
    nx->balance = ix->balance;
    nx->size = ix->size;
    nx->next_id = ix->next_id;
    nx->centroids = ix->centroids;
    nx->vecs = ix->vecs;
    nx->ids = ix->ids;
    pack_and_upload(nx.get());
    ++m->live_indexes;
    *out = nx.release();
  });
}

UDF_API void udf_index_destroy(udf_index* ix) {
  if (!ix) return;
  udf_module* m = ix->mod;
  try {
    CtxGuard g(m->rt->ctx);
    delete ix;
  } catch (...) {
  }
  --m->live_indexes;
  if (m->released) udf_module_destroy(m);  // the module was destroyed while this index lived
}

UDF_API udf_status udf_index_info_get(const udf_index* ix, udf_index_info* out) {
  return guarded([&] {
    require(ix && out, "index or out is NULL");
    out->metric = ix->symbol.c_str();
    out->elem = to_dtype(ix->elem);
    out->dim = ix->dim;
    out->n_lists = ix->n_lists;
    out->max_list_size = ix->sizes.empty() ? 0 : *std::max_element(ix->sizes.begin(), ix->sizes.end());
    out->size = ix->size;
  });
}

UDF_API udf_status udf_index_list_sizes(const udf_index* ix, uint32_t* sizes, size_t n) {
  return guarded([&] {
    require(ix && sizes, "index or sizes is NULL");
    require(n >= ix->n_lists, "sizes has room for " + std::to_string(n) + " lists; the index has " + std::to_string(ix->n_lists));
    std::copy(ix->sizes.begin(), ix->sizes.end(), sizes);
  });
}

UDF_API udf_status udf_index_last_search_stats(const udf_index* ix, udf_search_stats* out) {
  return guarded([&] {
    require(ix && out, "index or out is NULL");
    *out = ix->stats;
  });
}

UDF_API udf_status udf_index_search(udf_index* ix, const udf_tensor* queries, const udf_search_params* params,
                                    const udf_tensor* out_distances, const udf_tensor* out_ids) {
  return guarded([&] {
    require(ix != nullptr, "index is NULL");
    require(params != nullptr, "params is NULL");
    udf_runtime* rt = ix->mod->rt;
    const udf_module* mod = ix->mod;
    const ModuleArtifact& art = artifact_of(ix);
    const udf_search_params& p = *params;
    const uint32_t max_k = mod->metrics[ix->metric].info.max_k;
    require(p.k >= 1, "k = 0: k must be at least 1");
    require(p.k <= max_k, "k = " + std::to_string(p.k) + " exceeds the largest k of metric " + ix->symbol + " (" +
                              std::to_string(max_k) + ")");
    require(p.n_probes >= 1 && p.n_probes <= ix->n_lists,
            "n_probes = " + std::to_string(p.n_probes) + " must be in 1 .. n_lists (" + std::to_string(ix->n_lists) + ")");
    require(p.queries_per_item <= 64, "queries_per_item = " + std::to_string(p.queries_per_item) + " is above 64");
    CtxGuard g(rt->ctx);
    require(queries != nullptr, "queries is NULL");
    if (queries->cols != static_cast<int64_t>(ix->dim))
      fail(UDF_ERROR_INVALID_ARGUMENT, "queries have dimension " + std::to_string(queries->cols) + "; the index has " +
                                           std::to_string(ix->dim));
    const int64_t qstride = check_tensor(rt, queries, "queries", to_dtype(ix->elem), ix->dim);
    const int64_t nq_total = queries->rows;
    require(nq_total <= 100000000, "too many queries");
    const int64_t dstride = check_tensor(rt, out_distances, "out_distances", UDF_DTYPE_F32, p.k, nq_total);
    const int64_t istride = check_tensor(rt, out_ids, "out_ids", UDF_DTYPE_I64, p.k, nq_total);

    // Captures, by name, in ABI order: the metric's, then the filter's.
    udf_capture_v1 caps[UDF_ABI_METRIC_V1_MAX_CAPTURES] = {};
    bind_captures(ix, art.captures, p.captures, p.n_captures, "metric " + ix->symbol, ix->dim, ix->s_cap, caps);
    int filter = -1;
    udf_capture_v1 fcaps[UDF_ABI_FILTER_V1_MAX_CAPTURES] = {};
    if (p.filter) {
      size_t fi = 0;
      if (udf_module_find_filter(mod, p.filter, &fi) != UDF_OK) fail(UDF_ERROR_INVALID_ARGUMENT, udf_last_error());
      filter = static_cast<int>(fi);
      const ModuleFilter& mfilter = mod->manifest.filters[fi];
      bind_captures(ix, mfilter.captures, p.filter_captures, p.n_filter_captures, "filter " + mfilter.symbol, 0, ix->s_fcap,
                    fcaps);
    } else if (p.n_filter_captures > 0) {
      fail(UDF_ERROR_CAPTURE, "filter captures are bound (n_filter_captures = " + std::to_string(p.n_filter_captures) +
                                  ") but no filter is named");
    }

    // Kernels: the smallest k_max >= k with a merge of the same k_max.
    const udf_module::Scan* scan = nullptr;
    for (const auto& s : mod->scans)
      if (s.artifact == static_cast<int>(ix->metric) && s.filter == filter && s.k_max >= static_cast<int>(p.k) &&
          (!scan || s.k_max < scan->k_max) &&
          std::any_of(mod->merges.begin(), mod->merges.end(),
                      [&](const udf_module::Merge& m) { return m.order == art.order && m.k_max == s.k_max; }))
        scan = &s;
    if (!scan && filter >= 0 &&
        std::none_of(mod->scans.begin(), mod->scans.end(), [&](const udf_module::Scan& s) {
          return s.artifact == static_cast<int>(ix->metric) && s.filter == filter;
        }))
      fail(UDF_ERROR_MISMATCH, std::string("filter ") + p.filter + " is not linked with metric " + ix->symbol + " in module " +
                                   mod->name + ": link them together (udf-link --pair " + ix->symbol + ":" + p.filter + ")");
    if (!scan) fail(UDF_ERROR_UNSUPPORTED, "no scan kernel for k = " + std::to_string(p.k));
    const udf_module::Merge* merge = nullptr;
    for (const auto& m : mod->merges)
      if (m.order == art.order && m.k_max == scan->k_max) merge = &m;
    const uint32_t S = UDF_IVF_V1_SORT_CAPACITY(static_cast<uint32_t>(scan->k_max));
    const size_t merge_smem = UDF_IVF_MERGE_V1_SMEM_BYTES(S);
    prepare_smem(rt, merge->fn, merge_smem, "the merge for k = " + std::to_string(p.k));

    const uint32_t P = p.n_probes, k = p.k;
    const uint32_t el = static_cast<uint32_t>(to_dtype(ix->elem));
    int64_t chunk = p.max_batch ? p.max_batch : std::clamp<int64_t>((int64_t(512) << 20) / (int64_t(P) * k * 8), 256, 65536);
    chunk = std::min(chunk, nq_total);
    ix->stats = udf_search_stats{};
    const double t_start = now_ms();
    std::vector<uint32_t> probes;
    std::vector<std::uint8_t> staging;
    std::vector<float> hd;
    std::vector<int64_t> hi;
    const size_t row_bytes = size_t(ix->dim) * ix->esize;
    ix->s_qf32.ensure(size_t(chunk) * ix->dim * 4, "queries (f32)");
    ix->s_probes.ensure(size_t(chunk) * P * 4, "probes");
    for (int64_t q0 = 0; q0 < nq_total; q0 += chunk) {
      const uint32_t nq = static_cast<uint32_t>(std::min(chunk, nq_total - q0));
      double t0 = now_ms();
      // Queries on the device.
      CUdeviceptr qdev;
      uint64_t qs;
      if (queries->device == UDF_HOST_DEVICE) {
        staging.resize(size_t(nq) * row_bytes);
        rows_to_host(rt, queries, qstride, q0, nq, staging.data());
        upload(rt, ix->s_queries, staging.data(), staging.size(), "queries");
        qdev = ix->s_queries.get();
        qs = ix->dim;
      } else {
        qdev = reinterpret_cast<CUdeviceptr>(queries->data) + size_t(q0 * qstride) * ix->esize;
        qs = static_cast<uint64_t>(qstride);
      }
      if (ix->normalize) {
        ix->s_qnorm.ensure(size_t(nq) * row_bytes, "normalized queries");
        convert(rt, qdev, el, qs, ix->s_qnorm.get(), el, nq, ix->dim, true);
        qdev = ix->s_qnorm.get();
        qs = ix->dim;
      }
      convert(rt, qdev, el, qs, ix->s_qf32.get(), 0, nq, ix->dim, false);
      nearest(rt, ix->s_qf32.get(), nq, ix->d_centroids.get(), ix->n_lists, ix->dim, ix->coarse, P, ix->s_probes.get(), 0);
      probes.resize(size_t(nq) * P);
      CU(cuMemcpyDtoHAsync, probes.data(), ix->s_probes.get(), probes.size() * 4, rt->stream);
      sync(rt);
      double t1 = now_ms();
      ix->stats.coarse_ms += t1 - t0;
      // Schedule.
      uint32_t qpi = p.queries_per_item;
      if (qpi == 0) {
        const double per_list = double(nq) * P / ix->n_lists;
        qpi = per_list < 8 ? 1 : static_cast<uint32_t>(std::min(8, std::max(1, scan->recommended_qpi)));
      }
      const size_t filter_smem = filter >= 0 ? UDF_IVF_SCAN_V1_FILTER_SMEM_BYTES : 0;
      size_t scan_smem = UDF_IVF_SCAN_V1_SMEM_BYTES(qpi, S, ix->dim_padded) + filter_smem;
      while (qpi > 1 && scan_smem > static_cast<size_t>(rt->max_smem_optin) - 1024) {
        qpi /= 2;
        scan_smem = UDF_IVF_SCAN_V1_SMEM_BYTES(qpi, S, ix->dim_padded) + filter_smem;
      }
      prepare_smem(rt, scan->fn, scan_smem,
                   "the scan for k = " + std::to_string(k) + ", dim = " + std::to_string(ix->dim) + ", " +
                       std::to_string(qpi) + " queries per item");
      Schedule s = build_schedule(ix, probes.data(), nq, P, qpi, static_cast<uint32_t>(rt->info.sm_count));
      const size_t n_rows = s.query_rows.back();
      upload(rt, ix->s_items, s.items.data(), s.items.size() * sizeof(udf_ivf_work_item_v1), "work items");
      upload(rt, ix->s_pairs, s.pairs.data(), s.pairs.size() * sizeof(udf_ivf_pair_v1), "pairs");
      upload(rt, ix->s_rows, s.query_rows.data(), s.query_rows.size() * 4, "query rows");
      ix->s_cd.ensure(std::max<size_t>(1, n_rows) * k * 4, "candidate distances");
      ix->s_cs.ensure(std::max<size_t>(1, n_rows) * k * 4, "candidate slots");
      double t2 = now_ms();
      ix->stats.schedule_ms += t2 - t1;
      // Scan.
      udf_ivf_scan_args_v1 sa{};
      sa.list_data = ix->d_list_data.as<const void>();
      sa.list_offsets = ix->d_offsets.as<const uint64_t>();
      sa.list_sizes = ix->d_sizes.as<const uint32_t>();
      sa.queries = reinterpret_cast<const void*>(qdev);
      sa.items = ix->s_items.as<const udf_ivf_work_item_v1>();
      sa.pairs = ix->s_pairs.as<const udf_ivf_pair_v1>();
      sa.cand_dists = ix->s_cd.as<float>();
      sa.cand_slots = ix->s_cs.as<uint32_t>();
      sa.query_stride = qs;
      sa.n_items = static_cast<uint32_t>(s.items.size());
      sa.dim = ix->dim;
      sa.dim_padded = ix->dim_padded;
      sa.k = k;
      sa.queries_per_item = qpi;
      if (art.acc == AccType::F32) {
        const float f = static_cast<float>(art.initial.value);
        std::memcpy(&sa.acc_init, &f, 4);
      } else {
        const int32_t i = static_cast<int32_t>(art.initial.value);
        std::memcpy(&sa.acc_init, &i, 4);
      }
      sa.n_captures = static_cast<uint32_t>(art.captures.size());
      std::copy(std::begin(caps), std::end(caps), sa.captures);
      sa.ids = ix->d_ids.as<const long long>();
      sa.query_base = static_cast<uint32_t>(q0);
      sa.n_filter_captures = filter >= 0 ? static_cast<uint32_t>(mod->manifest.filters[filter].captures.size()) : 0;
      std::copy(std::begin(fcaps), std::end(fcaps), sa.filter_captures);
      launch(rt, scan->fn, sa.n_items, scan_smem, &sa);
      sync(rt);
      double t3 = now_ms();
      ix->stats.scan_ms += t3 - t2;
      // Merge, straight into device outputs when they are contiguous on this device.
      const bool direct = out_distances->device != UDF_HOST_DEVICE && out_ids->device != UDF_HOST_DEVICE &&
                          dstride == k && istride == k;
      udf_ivf_merge_args_v1 ma{};
      ma.cand_dists = ix->s_cd.as<const float>();
      ma.cand_slots = ix->s_cs.as<const uint32_t>();
      ma.query_rows = ix->s_rows.as<const uint32_t>();
      ma.ids = ix->d_ids.as<const long long>();
      if (direct) {
        ma.out_dists = static_cast<float*>(out_distances->data) + size_t(q0) * k;
        ma.out_ids = static_cast<long long*>(out_ids->data) + size_t(q0) * k;
      } else {
        ix->s_od.ensure(size_t(nq) * k * 4, "distances");
        ix->s_oi.ensure(size_t(nq) * k * 8, "ids");
        ma.out_dists = ix->s_od.as<float>();
        ma.out_ids = ix->s_oi.as<long long>();
      }
      ma.n_queries = nq;
      ma.k = k;
      launch(rt, merge->fn, nq, merge_smem, &ma);
      if (!direct) {
        hd.resize(size_t(nq) * k);
        hi.resize(size_t(nq) * k);
        CU(cuMemcpyDtoHAsync, hd.data(), ix->s_od.get(), hd.size() * 4, rt->stream);
        CU(cuMemcpyDtoHAsync, hi.data(), ix->s_oi.get(), hi.size() * 8, rt->stream);
        sync(rt);
        auto put = [&](const udf_tensor* t, int64_t stride, const void* src, size_t es) {
          auto* base = static_cast<std::uint8_t*>(t->data) + size_t(q0 * stride) * es;
          for (uint32_t q = 0; q < nq; ++q) {
            const auto* from = static_cast<const std::uint8_t*>(src) + size_t(q) * k * es;
            if (t->device == UDF_HOST_DEVICE)
              std::memcpy(base + size_t(q) * stride * es, from, k * es);
            else
              CU(cuMemcpyHtoDAsync, reinterpret_cast<CUdeviceptr>(base + size_t(q) * stride * es), from, k * es, rt->stream);
          }
        };
        put(out_distances, dstride, hd.data(), 4);
        put(out_ids, istride, hi.data(), 8);
      }
      sync(rt);
      ix->stats.merge_ms += now_ms() - t3;
      ix->stats.chunks += 1;
      ix->stats.queries_per_item = qpi;
      ix->stats.work_items += s.items.size();
    }
    ix->stats.total_ms = now_ms() - t_start;
  });
}

}  // extern "C"
