// k-means for an index's centroids: Lloyd iterations on a sample of the
// rows, distances on the GPU (the coarse probe), the balanced assignment on
// the host, each list's sum added up in row order on the GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <unordered_map>

#include "cuda/context.h"
#include "cuda/host_pool.h"
#include "cuda/launch.h"
#include "index/balance.h"
#include "index/list_build.h"

namespace udf::rt {

uint32_t candidates_for(const udf_index* ix) { return ix->balance > 0 ? std::min<uint32_t>(8, ix->n_lists) : 1; }

// balanced_assign for n rows whose candidates and distances came from
// nearest_lists (negated here into keys for IP: smaller is nearer), under
// the index's cap for an index of `total` vectors; the lists settle on the
// runtime's host pool.
std::vector<uint32_t> assign_to_lists(const udf_index* ix, const uint32_t* cand, float* keys, size_t n, uint32_t c,
                                      std::vector<uint64_t>& counts, uint64_t total) {
  if (ix->coarse != UDF_IVF_INDEX_V1_L2)
    for (size_t i = 0; i < n * c; ++i) keys[i] = -keys[i];
  const uint64_t cap =
      ix->balance > 0 ? std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(ix->balance * double(total) / ix->n_lists))) : 0;
  HostPool& pool = host_pool(ix->mod->rt);
  return balanced_assign(cand, keys, n, c, counts, cap,
                         [&](size_t parts, const std::function<void(size_t)>& part) { pool.run(parts, part); });
}

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

// A sample of n_train of rows 0 .. n - 1 without replacement: a partial
// Fisher-Yates shuffle (over a dense array of row numbers, or a sparse map
// of the swapped ones when there are 2^32 rows or more; the same sample
// either way).
std::vector<int64_t> sample_rows(int64_t n, uint64_t n_train, std::mt19937_64& rng) {
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
  return sample;
}

// The k-means sample as f32 rows (normalized for a normalized index) in tf:
// sample row i is data row sample[i].  Rows on this device (the data's own,
// or all of them staged as given) are gathered on the device; host rows are
// gathered on the host pool's threads, then converted on the device; rows of
// another device come one at a time.
void stage_sample(udf_index* ix, const udf_tensor* data, int64_t stride, const std::vector<int64_t>& sample,
                  const RowStaging* staged, DevBuf& tf) {
  udf_runtime* rt = ix->mod->rt;
  const uint32_t dim = ix->dim, el = static_cast<uint32_t>(to_dtype(ix->elem));
  const size_t n_train = sample.size(), row_bytes = static_cast<size_t>(dim) * ix->esize;
  tf.alloc(n_train * dim * 4, "k-means sample (f32)");
  const bool as_staged = staged && staged->keep && staged->staged && !ix->normalize;
  if (data->device == rt->ordinal || as_staged) {
    const CUdeviceptr src = as_staged ? staged->all.get() : reinterpret_cast<CUdeviceptr>(data->data);
    const uint64_t src_stride = as_staged ? dim : static_cast<uint64_t>(stride);
    DevBuf rows;
    std::vector<uint64_t> at(sample.begin(), sample.end());
    upload(rt->stream, rows, at.data(), at.size() * 8, "k-means sample rows");
    convert(rt, rt->stream, src, el, src_stride, tf.get(), 0, static_cast<uint32_t>(n_train), dim, ix->normalize, rows.get());
    sync(rt);  // before `rows` goes
    return;
  }
  std::vector<std::uint8_t> raw(n_train * row_bytes);
  if (data->device == UDF_HOST_DEVICE) {
    const auto* base = static_cast<const std::uint8_t*>(data->data);
    const size_t pitch = static_cast<size_t>(stride) * ix->esize;
    HostPool& pool = host_pool(rt);
    const size_t parts = pool.width();
    pool.run(parts, [&](size_t part) {
      for (size_t i = n_train * part / parts; i < n_train * (part + 1) / parts; ++i)
        std::memcpy(raw.data() + i * row_bytes, base + static_cast<size_t>(sample[i]) * pitch, row_bytes);
    });
  } else {
    for (size_t i = 0; i < n_train; ++i) rows_to_host(rt, data, stride, sample[i], 1, raw.data() + i * row_bytes);
  }
  DevBuf d_raw;
  upload(rt->stream, d_raw, raw.data(), raw.size(), "k-means sample");
  convert(rt, rt->stream, d_raw.get(), el, dim, tf.get(), 0, static_cast<uint32_t>(n_train), dim, ix->normalize);
  sync(rt);  // before `raw` and `d_raw` go
}

void kmeans(udf_index* ix, const udf_tensor* data, int64_t stride, const udf_index_params& p, const RowStaging* staged) {
  udf_runtime* rt = ix->mod->rt;
  const int64_t n = data->rows;
  const uint32_t n_lists = ix->n_lists, dim = ix->dim;
  uint64_t n_train = p.max_train_rows ? p.max_train_rows : uint64_t(256) * n_lists;
  n_train = std::max<uint64_t>(n_lists, std::min<uint64_t>(n_train, static_cast<uint64_t>(n)));
  BuildProfile prof(rt);
  std::mt19937_64 rng(p.seed);
  CtxGuard g(rt->ctx);
  DevBuf tf, cl, cd, d_order, d_starts, sums;
  stage_sample(ix, data, stride, sample_rows(n, n_train, rng), staged, tf);
  // Initial centroids: the first n_lists rows of the shuffled sample.
  ix->centroids.resize(size_t(n_lists) * dim);
  CU(cuMemcpyDtoHAsync, ix->centroids.data(), tf.get(), ix->centroids.size() * 4, rt->stream);
  sync(rt);
  prof.lap("k-means: sample");
  ix->d_centroids.alloc(ix->centroids.size() * 4, "centroids");
  const uint32_t c = candidates_for(ix);
  cl.alloc(n_train * c * 4, "k-means candidates");
  cd.alloc(n_train * c * 4, "k-means distances");
  d_order.alloc(n_train * 4, "k-means rows by list");
  d_starts.alloc((size_t(n_lists) + 1) * 4, "k-means list starts");
  sums.alloc(size_t(n_lists) * dim * 4, "k-means sums");
  PinnedBuf cand, keys;  // each iteration's candidates on the host
  cand.ensure(n_train * c * 4, "k-means candidates");
  keys.ensure(n_train * c * 4, "k-means distances");
  std::vector<uint32_t> cnt(n_lists), order(n_train), starts(size_t(n_lists) + 1);
  std::vector<float> sum(size_t(n_lists) * dim);
  // L2 k-means compares expanded distances (|x|^2 + |c|^2 - 2 x.c): the
  // centroids' squared norms go up with them.
  const bool expanded = ix->coarse == UDF_IVF_INDEX_V1_L2;
  std::vector<float> norms(expanded ? n_lists : 0);
  DevBuf d_norms;
  for (uint32_t it = 0; it < p.kmeans_iters; ++it) {
    CU(cuMemcpyHtoDAsync, ix->d_centroids.get(), ix->centroids.data(), ix->centroids.size() * 4, rt->stream);
    if (expanded) {
      for (uint32_t l = 0; l < n_lists; ++l) {
        double s = 0;
        for (uint32_t d = 0; d < dim; ++d) s += double(ix->centroids[size_t(l) * dim + d]) * ix->centroids[size_t(l) * dim + d];
        norms[l] = static_cast<float>(s);
      }
      upload(rt->stream, d_norms, norms.data(), norms.size() * 4, "centroid norms");
    }
    nearest_lists(rt, rt->stream, tf.get(), 0, dim, static_cast<uint32_t>(n_train), ix->d_centroids.get(), n_lists, dim,
                  ix->coarse, c, cl.get(), cd.get(), expanded ? d_norms.get() : 0);
    CU(cuMemcpyDtoHAsync, cand.as<void>(), cl.get(), n_train * c * 4, rt->stream);
    CU(cuMemcpyDtoHAsync, keys.as<void>(), cd.get(), n_train * c * 4, rt->stream);
    sync(rt);
    prof.lap("k-means: nearest lists");
    std::vector<uint64_t> sizes(n_lists, 0);
    const std::vector<uint32_t> label = assign_to_lists(ix, cand.as<uint32_t>(), keys.as<float>(), n_train, c, sizes, n_train);
    prof.lap("k-means: balance (host)");
    // The rows grouped by list, in row order (a counting sort): each list's
    // sum is added up in that order, the same bits in every run.
    std::fill(cnt.begin(), cnt.end(), 0u);
    for (uint32_t x : label) ++cnt[x];
    starts[0] = 0;
    for (uint32_t l = 0; l < n_lists; ++l) starts[l + 1] = starts[l] + cnt[l];
    {
      std::vector<uint32_t> fill(starts.begin(), starts.end() - 1);
      for (uint64_t i = 0; i < n_train; ++i) order[fill[label[i]]++] = static_cast<uint32_t>(i);
    }
    CU(cuMemcpyHtoDAsync, d_order.get(), order.data(), order.size() * 4, rt->stream);
    CU(cuMemcpyHtoDAsync, d_starts.get(), starts.data(), starts.size() * 4, rt->stream);
    udf_ivf_accumulate_args_v1 a{tf.as<const float>(), d_order.as<const uint32_t>(), d_starts.as<const uint32_t>(),
                                 sums.as<float>(), n_lists, dim};
    launch(rt, rt->kernels[IndexKernel::accumulate], n_lists, 0, &a);
    CU(cuMemcpyDtoHAsync, sum.data(), sums.get(), sum.size() * 4, rt->stream);
    sync(rt);
    uint32_t largest = 0;
    for (uint32_t l = 1; l < n_lists; ++l)
      if (cnt[l] > cnt[largest]) largest = l;
    for (uint32_t l = 0; l < n_lists; ++l) {
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

void make_centroids(udf_index* ix, const udf_tensor* data, int64_t stride, const udf_index_params& p,
                    const RowStaging* staged) {
  if (!p.centroids) return kmeans(ix, data, stride, p, staged);
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
