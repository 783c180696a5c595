// Index build: k-means on a sample (GPU distances, balanced assignment on the
// host), assignment of every row to a list, and the interleaved list layout
// the scan kernels read (docs/kernels.md), uploaded to the device.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <memory>
#include <random>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "index.h"
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

}  // namespace

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
  DevBuf raw, norm, f32, dl, dd, coarse_keys;
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
      convert(rt, rt->stream, raw.get(), el, ix->dim, norm.get(), el, static_cast<uint32_t>(m), ix->dim, true);
      CU(cuMemcpyDtoHAsync, h, norm.get(), m * row_bytes, rt->stream);
    }
    convert(rt, rt->stream, raw.get(), el, ix->dim, f32.get(), 0, static_cast<uint32_t>(m), ix->dim, ix->normalize);
    nearest_centroids(rt, rt->stream, f32.get(), 0, ix->dim, static_cast<uint32_t>(m), ix->d_centroids.get(), ix->n_lists,
                      ix->dim, ix->coarse, c, dl.get(), dd.get(), coarse_keys);
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
  for (uint32_t l = 0; l < ix->n_lists; ++l) {  // counts: the lists' sizes after this batch
    ix->vecs[l].reserve(counts[l] * row_bytes);
    ix->ids[l].reserve(counts[l]);
  }
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

namespace {

// Lists [l0, l1) in the kernel layout (docs/kernels.md): per group of 32
// slots, 16-byte chunks of dimensions, slot-interleaved; padding zeroed,
// padding slots id -1.  `data` and `ids` are the whole index's arrays.
void pack_lists(const udf_index* ix, uint32_t l0, uint32_t l1, std::uint8_t* data, int64_t* ids) noexcept {
  const size_t es = ix->esize, row_bytes = size_t(ix->dim) * es;
  const size_t group_bytes = size_t(32) * ix->dim_padded * es;
  const size_t full = row_bytes / 16, tail = row_bytes % 16;  // whole 16-byte chunks of a row, and the rest
  for (uint32_t l = l0; l < l1; ++l) {
    const uint64_t first = ix->offsets[l], n = ix->sizes[l], slots = (n + 31) / 32 * 32;
    std::memset(data + first / 32 * group_bytes, 0, slots / 32 * group_bytes);
    std::fill(ids + first + n, ids + first + slots, int64_t(-1));
    const std::uint8_t* v = ix->vecs[l].data();
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t s = first + i;
      ids[s] = ix->ids[l][i];
      std::uint8_t* g = data + s / 32 * group_bytes + (s % 32) * 16;
      const std::uint8_t* row = v + i * row_bytes;
      for (size_t j = 0; j < full; ++j) std::memcpy(g + j * 32 * 16, row + j * 16, 16);
      if (tail) std::memcpy(g + full * 32 * 16, row + full * 16, tail);
    }
  }
}

}  // namespace

// Interleaves the host lists into the kernel layout (on a few threads for
// large indexes) and uploads everything.
void pack_and_upload(udf_index* ix) {
  udf_runtime* rt = ix->mod->rt;
  ix->quiesce();  // a search may still read the lists being replaced
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
  const size_t bytes = static_cast<size_t>(slots) * ix->dim_padded * ix->esize;
  std::unique_ptr<std::uint8_t[]> data(new std::uint8_t[bytes]);  // every byte written by pack_lists
  std::vector<int64_t> ids(static_cast<size_t>(slots));
  // Ranges of lists with about equal slots, one a thread (this one takes the last).
  const uint32_t n_threads = bytes < (size_t(64) << 20) ? 1u : std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  for (uint32_t t = 0, l0 = 0; t < n_threads && l0 < ix->n_lists; ++t) {
    uint32_t l1 = l0;
    const uint64_t until = slots * (t + 1) / n_threads;
    while (l1 < ix->n_lists && (t + 1 == n_threads || ix->offsets[l1] < until)) ++l1;
    ranges.emplace_back(l0, l1);
    l0 = l1;
  }
  auto work = [&](std::pair<uint32_t, uint32_t> r) { pack_lists(ix, r.first, r.second, data.get(), ids.data()); };
  std::vector<std::thread> pool;
  size_t started = 0;
  try {
    for (; started + 1 < ranges.size(); ++started) pool.emplace_back(work, ranges[started]);
  } catch (const std::system_error&) {  // no more threads: the rest here
  }
  for (size_t i = started; i < ranges.size(); ++i) work(ranges[i]);
  for (std::thread& th : pool) th.join();
  CtxGuard g(rt->ctx);
  ix->d_list_data.alloc(bytes, "list data");
  ix->d_ids.alloc(ids.size() * 8, "ids");
  ix->d_offsets.alloc(ix->n_lists * 8, "list offsets");
  ix->d_sizes.alloc(ix->n_lists * 4, "list sizes");
  ix->d_centroids.alloc(ix->centroids.size() * 4, "centroids");
  CU(cuMemcpyHtoDAsync, ix->d_list_data.get(), data.get(), bytes, rt->stream);
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
  DevBuf raw, tf, cl, cd, lab, sums, counts, coarse_keys;
  raw.alloc(train_raw.size(), "k-means sample");
  tf.alloc(n_train * dim * 4, "k-means sample (f32)");
  CU(cuMemcpyHtoDAsync, raw.get(), train_raw.data(), train_raw.size(), rt->stream);
  convert(rt, rt->stream, raw.get(), static_cast<uint32_t>(to_dtype(ix->elem)), dim, tf.get(), 0, static_cast<uint32_t>(n_train), dim,
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
    nearest_centroids(rt, rt->stream, tf.get(), 0, dim, static_cast<uint32_t>(n_train), ix->d_centroids.get(), L, dim,
                      ix->coarse, c, cl.get(), cd.get(), coarse_keys);
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

}  // namespace udf::rt
