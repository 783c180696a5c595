// k-means for an index's centroids: Lloyd iterations on a sample of the
// rows, distances on the GPU (the coarse probe), the balanced assignment on
// the host, each list's sum added up in row order on the GPU.  Asked for
// (udf_index_params.kmeans_mesoclusters), it runs in two levels:
// mesoclusters first, each one's share of the lists trained on its rows
// alone, then a few iterations of every list over the whole sample.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <system_error>
#include <thread>
#include <utility>

#include "cuda/context.h"
#include "cuda/host_pool.h"
#include "cuda/launch.h"
#include "index/balance.h"
#include "index/list_build.h"
#include "index/sample.h"

namespace udf::rt {

// The `parallel` of balance.h's functions: parts on the runtime's host pool.
static auto on_host_pool(udf_runtime* rt) {
  return [&pool = host_pool(rt)](size_t parts, const std::function<void(size_t)>& part) { pool.run(parts, part); };
}

uint32_t candidates_for(const udf_index* ix) { return ix->balance > 0 ? std::min<uint32_t>(8, ix->n_lists) : 1; }

// balanced_assign for n rows whose candidates and distances came from
// nearest_lists (negated here into keys for IP: smaller is nearer), under
// the index's cap for n_lists lists of `total` vectors; the lists settle on
// the runtime's host pool.
std::vector<uint32_t> assign_to_lists(const udf_index* ix, const uint32_t* cand, float* keys, size_t n, uint32_t c,
                                      std::vector<uint64_t>& counts, uint32_t n_lists, uint64_t total) {
  if (ix->coarse != UDF_IVF_INDEX_V1_L2)
    for (size_t i = 0; i < n * c; ++i) keys[i] = -keys[i];
  const uint64_t cap =
      ix->balance > 0 ? std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(ix->balance * double(total) / n_lists))) : 0;
  return balanced_assign(cand, keys, n, c, counts, cap, on_host_pool(ix->mod->rt));
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

KmeansStart::KmeansStart(udf_index* ix, int64_t rows, const udf_index_params& p, bool on_thread)
    : rng(p.seed), ix_(ix), rows_(rows) {
  const uint32_t n_lists = ix->n_lists;
  const uint64_t want = p.max_train_rows ? p.max_train_rows : uint64_t(256) * n_lists;
  n_train_ = std::max<uint64_t>(n_lists, std::min<uint64_t>(want, static_cast<uint64_t>(rows)));
  if (on_thread) {
    try {
      thread_ = std::thread([this] { run(); });
      return;
    } catch (const std::system_error&) {  // no thread: here, then
    }
  }
  run();
}

KmeansStart::~KmeansStart() {
  if (thread_.joinable()) thread_.join();
}

void KmeansStart::finish() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void KmeansStart::run() noexcept {
  try {
    sample = sample_rows(rows_, n_train_, rng);
    // Pinned memory for the index's context (pinning takes as long as a
    // copy, so it overlaps the rows' staging too).
    CtxGuard g(ix_->mod->rt->ctx);
    const uint32_t c = candidates_for(ix_);
    cand.ensure(n_train_ * c * 4, "k-means candidates");
    keys.ensure(n_train_ * c * 4, "k-means distances");
    order.ensure(n_train_ * 4, "k-means rows by list");
    sums.ensure(size_t(ix_->n_lists) * ix_->dim * 4, "k-means sums");
  } catch (...) {
    error_ = std::current_exception();
  }
}

namespace {

// The k-means sample as f32 rows in tf (n rows, allocated), gathered from a
// sharded build's shares: each share's sample rows in sample order on its
// own device, copied together to ix's device, then put in sample order
// there.  The same values as a gather from one device's rows.
void gather_sample(udf_index* ix, const std::vector<StagedShare>& shares, const std::vector<int64_t>& sample, DevBuf& tf) {
  udf_runtime* rt = ix->mod->rt;
  const uint32_t dim = ix->dim, el = static_cast<uint32_t>(to_dtype(ix->elem));
  const size_t n_train = sample.size(), f32_row = size_t(dim) * 4;
  // Sample row i is row local[j][..] of share j = which[i], and row pos[i]
  // of the shares' rows together (share j's from base[j]).
  std::vector<std::vector<uint64_t>> local(shares.size());
  std::vector<uint32_t> which(n_train);
  std::vector<uint64_t> pos(n_train);
  for (size_t i = 0; i < n_train; ++i) {
    const auto it = std::upper_bound(shares.begin(), shares.end(), sample[i],
                                     [](int64_t r, const StagedShare& sh) { return r < sh.r0; });
    const auto j = static_cast<uint32_t>(it - shares.begin()) - 1;
    which[i] = j;
    pos[i] = local[j].size();
    local[j].push_back(static_cast<uint64_t>(sample[i] - shares[j].r0));
  }
  std::vector<uint64_t> base(shares.size() + 1, 0);
  for (size_t j = 0; j < shares.size(); ++j) base[j + 1] = base[j] + local[j].size();
  for (size_t i = 0; i < n_train; ++i) pos[i] += base[which[i]];
  DevBuf together;
  together.alloc(n_train * f32_row, "k-means sample (by share)");
  for (size_t j = 0; j < shares.size(); ++j) {
    if (local[j].empty()) continue;
    const StagedShare& sh = shares[j];
    udf_runtime* srt = sh.ix->mod->rt;
    CtxGuard g(srt->ctx);
    const auto m = static_cast<uint32_t>(local[j].size());
    DevBuf rows, part;
    upload(srt->stream, rows, local[j].data(), local[j].size() * 8, "k-means sample rows");
    const bool here = srt->ordinal == rt->ordinal;
    const CUdeviceptr dst = here ? together.get() + base[j] * f32_row : (part.alloc(m * f32_row, "k-means sample (share)"), part.get());
    convert(srt, srt->stream, sh.at, el, sh.pitch / ix->esize, dst, 0, m, dim, false, rows.get());
    if (!here) CU(cuMemcpyPeerAsync, together.get() + base[j] * f32_row, rt->ctx, dst, srt->ctx, m * f32_row, srt->stream);
    sync(srt);  // before `rows` and `part` go
  }
  DevBuf at;
  upload(rt->stream, at, pos.data(), pos.size() * 8, "k-means sample order");
  convert(rt, rt->stream, together.get(), 0, dim, tf.get(), 0, static_cast<uint32_t>(n_train), dim, false, at.get(),
          ix->coarse_scale());
  sync(rt);  // before `at` and `together` go
}

// The k-means sample as f32 rows (normalized for a normalized index, scaled
// for coarse weights) in tf:
// sample row i is data row sample[i].  Rows on this device (the data's own,
// or all of them staged as given) are gathered on the device, and so are a
// sharded build's shares (help, gather_sample); host rows are
// gathered on the host pool's threads, then converted on the device; rows of
// another device come one at a time.
void stage_sample(udf_index* ix, const udf_tensor* data, int64_t stride, const std::vector<int64_t>& sample,
                  const RowStaging* staged, const KmeansHelp* help, DevBuf& tf) {
  udf_runtime* rt = ix->mod->rt;
  const uint32_t dim = ix->dim, el = static_cast<uint32_t>(to_dtype(ix->elem));
  const size_t n_train = sample.size(), row_bytes = static_cast<size_t>(dim) * ix->esize;
  tf.alloc(n_train * dim * 4, "k-means sample (f32)");
  if (help && !help->shares.empty() && !ix->normalize) return gather_sample(ix, help->shares, sample, tf);
  const bool as_staged = staged && staged->keep && staged->staged && !ix->normalize;
  if (data->device == rt->ordinal || as_staged) {
    const CUdeviceptr src = as_staged ? staged->all.get() : reinterpret_cast<CUdeviceptr>(data->data);
    const uint64_t src_stride = as_staged ? dim : static_cast<uint64_t>(stride);
    DevBuf rows;
    std::vector<uint64_t> at(sample.begin(), sample.end());
    upload(rt->stream, rows, at.data(), at.size() * 8, "k-means sample rows");
    convert(rt, rt->stream, src, el, src_stride, tf.get(), 0, static_cast<uint32_t>(n_train), dim, ix->normalize, rows.get(),
            ix->coarse_scale());
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
  convert(rt, rt->stream, d_raw.get(), el, dim, tf.get(), 0, static_cast<uint32_t>(n_train), dim, ix->normalize, 0,
          ix->coarse_scale());
  sync(rt);  // before `raw` and `d_raw` go
}

// A part of the sample whose rows move only among its own centers: rows
// [row0, row0 + rows) and centers [c0, c0 + centers).
struct Segment {
  uint64_t row0, rows;
  uint32_t c0, centers;
};

// Lloyd iterations on f32 sample rows on the device (dim apart): each
// segment's rows go to the nearest of its own centers (on the GPU), the
// host groups them by center in row order (a counting sort), each center's
// sum is added up in that order on the GPU, the same bits in every run.
//
// Indexes on other devices (KmeansHelp::devices) help with the nearest
// centers: device d of D finds them for part d of every segment's rows, on
// its copy of the rows.  A row's nearest centers do not depend on the
// device, so the labels are the same bits as one device's.
class Lloyd {
 public:
  // Buffers for up to n rows and max_centers centers, here and on each
  // helper; the host's are the start's, which sized them for its sample
  // and the index's lists (n and max_centers at most).
  Lloyd(udf_index* ix, uint64_t n, uint32_t max_centers, KmeansStart& host, BuildProfile& prof,
        const std::vector<udf_index*>& helpers)
      : ix_(ix), rt_(ix->mod->rt), prof_(prof), cand_(host.cand), keys_(host.keys), order_(host.order), sum_(host.sums) {
    const uint32_t c = candidates_for(ix);
    cl_.alloc(n * c * 4, "k-means candidates");
    cd_.alloc(n * c * 4, "k-means distances");
    d_order_.alloc(n * 4, "k-means rows by list");
    d_starts_.alloc((size_t(max_centers) + 1) * 4, "k-means list starts");
    sums_.alloc(size_t(max_centers) * ix->dim * 4, "k-means sums");
    d_cen_.alloc(size_t(max_centers) * ix->dim * 4, "k-means centers");
    for (udf_index* h : helpers) {
      auto x = std::make_unique<Helper>();
      x->rt = h->mod->rt;
      CtxGuard g(x->rt->ctx);
      x->rows.alloc(n * ix->dim * 4, "k-means sample (copy)");
      x->cl.alloc(n * c * 4, "k-means candidates");
      x->cd.alloc(n * c * 4, "k-means distances");
      x->cen.alloc(size_t(max_centers) * ix->dim * 4, "k-means centers");
      helpers_.push_back(std::move(x));
    }
  }
  Lloyd(const Lloyd&) = delete;
  Lloyd& operator=(const Lloyd&) = delete;
  ~Lloyd() {
    for (auto& h : helpers_) {  // each helper's buffers under its own context
      CtxGuard g(h->rt->ctx);
      h.reset();
    }
  }

  // The rows the next calls work on: n (at most the constructor's) f32
  // rows, dim apart (copied to each helper once they are written).
  void on(CUdeviceptr rows, uint64_t n) {
    rows_ = rows;
    n_ = n;
    if (helpers_.empty()) return;
    sync(rt_);
    for (auto& h : helpers_) {
      CtxGuard g(h->rt->ctx);
      CU(cuMemcpyPeerAsync, h->rows.get(), h->rt->ctx, rows, rt_->ctx, n * ix_->dim * 4, h->rt->stream);
    }
  }

  // `iters` iterations of cen (segments' centers x dim, row-major).
  // balanced: each segment's balanced assignment, under the index's cap
  // over the segment's rows (candidates_for(ix) candidates, at most the
  // smallest segment's centers); otherwise each row's nearest center.
  // done() after each iteration.
  void iterate(std::vector<float>& cen, const std::vector<Segment>& segs, uint32_t iters, bool balanced,
               std::mt19937_64& rng, const std::function<void()>& done) {
    for (uint32_t it = 0; it < iters; ++it) {
      uint32_t c = 1;
      if (balanced) {
        c = candidates_for(ix_);
        for (const Segment& s : segs) c = std::min(c, s.centers);
      }
      find(cen, segs, c, balanced);
      prof_.lap("k-means: nearest lists");
      std::vector<uint32_t> label;
      if (balanced) {
        label = balanced_labels(segs, c);
        prof_.lap("k-means: balance (host)");
      } else {
        label = labels(segs);
      }
      update(cen, label, segs, rng);
      prof_.lap("k-means: update");
      done();
    }
  }

  // Each row's nearest center of its segment.
  std::vector<uint32_t> nearest(const std::vector<float>& cen, const std::vector<Segment>& segs) {
    find(cen, segs, 1, false);
    return labels(segs);
  }

 private:
  // Each segment's rows' c nearest centers (segment-local ids) into cand_
  // (and keys_ when `keys`), [row][c].
  void find(const std::vector<float>& cen, const std::vector<Segment>& segs, uint32_t c, bool keys) {
    const uint32_t dim = ix_->dim, n_centers = static_cast<uint32_t>(cen.size() / dim);
    // L2 compares expanded distances (|x|^2 + |c|^2 - 2 x.c): the centers'
    // squared norms go up with them.
    const bool expanded = ix_->coarse == UDF_IVF_INDEX_V1_L2;
    const size_t n_dev = helpers_.size() + 1;
    // Device d's part: rows [row0 + rows * d / n_dev, row0 + rows * (d + 1) / n_dev) of each segment.
    auto part = [&](size_t d, udf_runtime* rt, CUdeviceptr rows, CUdeviceptr d_cen, DevBuf& norms, CUdeviceptr cl, CUdeviceptr cd) {
      CU(cuMemcpyHtoDAsync, d_cen, cen.data(), cen.size() * 4, rt->stream);
      if (expanded) upload_centroid_norms(rt->stream, cen.data(), n_centers, dim, norms);
      for (const Segment& s : segs) {
        const uint64_t a = s.row0 + s.rows * d / n_dev, b = s.row0 + s.rows * (d + 1) / n_dev;
        if (b == a) continue;
        nearest_lists(rt, rt->stream, rows + a * dim * 4, 0, dim, static_cast<uint32_t>(b - a), d_cen + size_t(s.c0) * dim * 4,
                      s.centers, dim, ix_->coarse, c, cl + a * c * 4, keys ? cd + a * c * 4 : 0,
                      expanded ? norms.get() + size_t(s.c0) * 4 : 0);
        if (n_dev == 1) continue;  // one copy of every row's, below
        CU(cuMemcpyDtoHAsync, cand_.as<uint32_t>() + a * c, cl + a * c * 4, (b - a) * c * 4, rt->stream);
        if (keys) CU(cuMemcpyDtoHAsync, keys_.as<float>() + a * c, cd + a * c * 4, (b - a) * c * 4, rt->stream);
      }
    };
    part(0, rt_, rows_, d_cen_.get(), d_norms_, cl_.get(), cd_.get());
    if (n_dev == 1) {
      CU(cuMemcpyDtoHAsync, cand_.as<void>(), cl_.get(), n_ * c * 4, rt_->stream);
      if (keys) CU(cuMemcpyDtoHAsync, keys_.as<void>(), cd_.get(), n_ * c * 4, rt_->stream);
    }
    for (size_t d = 1; d < n_dev; ++d) {
      Helper& h = *helpers_[d - 1];
      CtxGuard g(h.rt->ctx);
      part(d, h.rt, h.rows.get(), h.cen.get(), h.norms, h.cl.get(), h.cd.get());
    }
    sync(rt_);
    for (auto& h : helpers_) sync(h->rt);
  }

  // The balanced assignment of each segment's rows to its centers (c
  // candidates a row from find()), under the index's cap over the segment.
  std::vector<uint32_t> balanced_labels(const std::vector<Segment>& segs, uint32_t c) {
    std::vector<uint32_t> label(n_);
    for (const Segment& s : segs) {
      std::vector<uint64_t> sizes(s.centers, 0);
      const std::vector<uint32_t> sub = assign_to_lists(ix_, cand_.as<uint32_t>() + s.row0 * c, keys_.as<float>() + s.row0 * c,
                                                        s.rows, c, sizes, s.centers, s.rows);
      for (uint64_t i = 0; i < s.rows; ++i) label[s.row0 + i] = s.c0 + sub[i];
    }
    return label;
  }

  // The nearest centers find() gave (one candidate a row), as center ids.
  std::vector<uint32_t> labels(const std::vector<Segment>& segs) const {
    std::vector<uint32_t> label(n_);
    const uint32_t* cand = cand_.as<uint32_t>();
    for (const Segment& s : segs)
      for (uint64_t i = s.row0; i < s.row0 + s.rows; ++i) label[i] = s.c0 + cand[i];
    return label;
  }

  // The centers as their rows' means (normalized for a normalized index);
  // an empty center moves to a random row of its segment's largest one.
  void update(std::vector<float>& cen, const std::vector<uint32_t>& label, const std::vector<Segment>& segs,
              std::mt19937_64& rng) {
    const uint32_t dim = ix_->dim, n_centers = static_cast<uint32_t>(cen.size() / dim);
    // The rows grouped by center, in row order (a counting sort by parts of
    // the rows, on the host pool).
    std::vector<uint32_t> cnt, starts;
    group_by_label(label.data(), n_, n_centers, order_.as<uint32_t>(), cnt, starts, on_host_pool(rt_));
    CU(cuMemcpyHtoDAsync, d_order_.get(), order_.as<void>(), n_ * 4, rt_->stream);
    CU(cuMemcpyHtoDAsync, d_starts_.get(), starts.data(), starts.size() * 4, rt_->stream);
    udf_ivf_accumulate_args_v1 a{reinterpret_cast<const float*>(rows_), d_order_.as<const uint32_t>(),
                                 d_starts_.as<const uint32_t>(), sums_.as<float>(), n_centers, dim};
    launch(rt_, rt_->kernels[IndexKernel::accumulate], n_centers, 0, &a);
    CU(cuMemcpyDtoHAsync, sum_.as<void>(), sums_.get(), size_t(n_centers) * dim * 4, rt_->stream);
    sync(rt_);
    for (const Segment& s : segs) {
      uint32_t largest = s.c0;
      for (uint32_t l = s.c0 + 1; l < s.c0 + s.centers; ++l)
        if (cnt[l] > cnt[largest]) largest = l;
      for (uint32_t l = s.c0; l < s.c0 + s.centers; ++l) {
        float* ce = cen.data() + size_t(l) * dim;
        if (cnt[l] == 0) {
          std::vector<uint64_t> members;
          for (uint64_t i = s.row0; i < s.row0 + s.rows; ++i)
            if (label[i] == largest) members.push_back(i);
          const uint64_t pick = members.empty() ? s.row0 + rng() % s.rows : members[rng() % members.size()];
          CU(cuMemcpyDtoHAsync, ce, rows_ + pick * dim * 4, size_t(dim) * 4, rt_->stream);
          sync(rt_);
          continue;
        }
        const float* sum = sum_.as<float>() + size_t(l) * dim;
        for (uint32_t d = 0; d < dim; ++d) ce[d] = sum[d] / static_cast<float>(cnt[l]);
        if (ix_->normalize) {
          double q = 0;
          for (uint32_t d = 0; d < dim; ++d) q += double(ce[d]) * ce[d];
          if (q > 0)
            for (uint32_t d = 0; d < dim; ++d) ce[d] = static_cast<float>(ce[d] / std::sqrt(q));
        }
      }
    }
  }

  // Another device's buffers: its copy of the rows, its part's candidates
  // and distances, the centers and their norms.
  struct Helper {
    udf_runtime* rt = nullptr;
    DevBuf rows, cl, cd, cen, norms;
  };
  udf_index* ix_;
  udf_runtime* rt_;
  BuildProfile& prof_;
  std::vector<std::unique_ptr<Helper>> helpers_;
  CUdeviceptr rows_ = 0;
  uint64_t n_ = 0;
  DevBuf cl_, cd_, d_order_, d_starts_, sums_, d_cen_, d_norms_;
  PinnedBuf &cand_, &keys_;
  PinnedBuf &order_, &sum_;  // the update's copies: rows by center up, sums down
};

// Rows a mesocluster's k-means trains on (the sample's first ones).
constexpr uint64_t kMesoTrainRows = 1024;

void kmeans(udf_index* ix, const udf_tensor* data, int64_t stride, const udf_index_params& p, const RowStaging* staged,
            const KmeansHelp* help, KmeansStart& start) {
  udf_runtime* rt = ix->mod->rt;
  const uint32_t n_lists = ix->n_lists, dim = ix->dim;
  BuildProfile prof(rt);
  start.finish();
  const uint64_t n_train = start.sample.size();
  std::mt19937_64& rng = start.rng;
  CtxGuard g(rt->ctx);
  DevBuf tf;
  stage_sample(ix, data, stride, start.sample, staged, help, tf);
  // Initial centers: the sample's first rows (it is shuffled).
  auto first_rows = [&](CUdeviceptr rows, uint64_t m, float* out) {
    CU(cuMemcpyDtoHAsync, out, rows, m * dim * 4, rt->stream);
  };
  // udf_index_params.kmeans_mesoclusters: 0 and 1 are the flat k-means.
  const uint32_t n_meso = p.kmeans_iters == 0 ? 1 : std::max<uint32_t>(p.kmeans_mesoclusters, 1);
  // Two levels: kmeans_iters for the mesoclusters, half as many for each
  // one's lists, a quarter (at least 2) for every list together.
  const uint32_t seg_iters = std::max<uint32_t>(p.kmeans_iters / 2, 1), all_iters = std::max<uint32_t>(p.kmeans_iters / 4, 2);
  const uint32_t total_iters = n_meso > 1 ? p.kmeans_iters + seg_iters + all_iters : p.kmeans_iters;
  uint32_t done_iters = 0;
  auto done = [&] { progress(p, 0.5 * double(++done_iters) / total_iters, "kmeans"); };
  std::vector<float> cen(size_t(n_lists) * dim);
  Lloyd lloyd(ix, n_train, n_lists, start, prof, help ? help->devices : std::vector<udf_index*>{});
  if (n_meso <= 1) {
    // Flat: every list over the whole sample, every iteration.
    first_rows(tf.get(), n_lists, cen.data());
    sync(rt);
    prof.lap("k-means: sample");
    lloyd.on(tf.get(), n_train);
    lloyd.iterate(cen, {Segment{0, n_train, 0, n_lists}}, p.kmeans_iters, true, rng, done);
  } else {
    // Hierarchical: n_meso mesoclusters on a part of the sample, every
    // sample row to its nearest one, each one's share of the lists trained
    // on its rows alone, then a few balanced iterations of every list over
    // the whole sample.
    std::vector<float> meso(size_t(n_meso) * dim);
    first_rows(tf.get(), n_meso, meso.data());
    sync(rt);
    prof.lap("k-means: sample");
    const uint64_t m = std::min<uint64_t>(n_train, kMesoTrainRows * n_meso);
    lloyd.on(tf.get(), m);
    lloyd.iterate(meso, {Segment{0, m, 0, n_meso}}, p.kmeans_iters, false, rng, done);
    lloyd.on(tf.get(), n_train);
    const std::vector<uint32_t> label = lloyd.nearest(meso, {Segment{0, n_train, 0, n_meso}});
    // The sample grouped by mesocluster, in sample order.
    std::vector<uint64_t> sizes(n_meso, 0), at(n_meso + 1, 0);
    for (uint32_t x : label) ++sizes[x];
    for (uint32_t j = 0; j < n_meso; ++j) at[j + 1] = at[j] + sizes[j];
    std::vector<uint64_t> order(n_train);
    {
      std::vector<uint64_t> fill(at.begin(), at.end() - 1);
      for (uint64_t i = 0; i < n_train; ++i) order[fill[label[i]]++] = i;
    }
    DevBuf tg, d_rows;
    tg.alloc(n_train * dim * 4, "k-means sample by mesocluster");
    udf::rt::upload(rt->stream, d_rows, order.data(), order.size() * 8, "k-means sample order");
    convert(rt, rt->stream, tf.get(), 0, dim, tg.get(), 0, static_cast<uint32_t>(n_train), dim, false, d_rows.get());
    const std::vector<uint32_t> k = share_centers(sizes, n_lists);
    std::vector<Segment> segs;
    uint32_t c0 = 0;
    for (uint32_t j = 0; j < n_meso; ++j) {
      if (k[j] == 0) continue;
      segs.push_back(Segment{at[j], sizes[j], c0, k[j]});
      first_rows(tg.get() + at[j] * dim * 4, k[j], cen.data() + size_t(c0) * dim);
      c0 += k[j];
    }
    sync(rt);  // before d_rows goes
    tf.release();
    prof.lap("k-means: group");
    lloyd.on(tg.get(), n_train);
    lloyd.iterate(cen, segs, seg_iters, false, rng, done);
    lloyd.iterate(cen, {Segment{0, n_train, 0, n_lists}}, all_iters, true, rng, done);
  }
  ix->centroids = std::move(cen);
  upload(rt->stream, ix->d_centroids, ix->centroids.data(), ix->centroids.size() * 4, "centroids");
  sync(rt);
}

}  // namespace

void make_centroids(udf_index* ix, const udf_tensor* data, int64_t stride, const udf_index_params& p,
                    const RowStaging* staged, const KmeansHelp* help, KmeansStart* start) {
  if (!p.centroids) {
    if (start) return kmeans(ix, data, stride, p, staged, help, *start);
    KmeansStart here(ix, data->rows, p, false);
    return kmeans(ix, data, stride, p, staged, help, here);
  }
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
