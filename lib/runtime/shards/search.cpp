// A sharded index's search: each chunk of queries starts the one-index
// search on every shard at once (shards 1 .. on threads of their own when
// the shards' runtimes are distinct), then the shards' results come
// together (shards/search_merge.cpp).
#include <algorithm>
#include <deque>
#include <optional>

#include "cuda/context.h"
#include "cuda/device_array.h"
#include "cuda/launch.h"
#include "cuda/tensors.h"
#include "index/testing_paths.h"
#include "shards/rendezvous.h"
#include "shards/search_state.h"
#include "shards/slice_staging.h"
#include "udf/kernels/ivf_index_v1.h"

namespace udf::rt {

// Host merge for batches up to this many queries (with host outputs).
constexpr uint32_t kHostMergeQueries = 64;
// From this many queries a chunk's coarse probe is shared out between the
// devices (each probes its part of the queries, not all of them).
constexpr uint32_t kShareCoarseQueries = 1024;

// A device buffer grown to `bytes`; a buffer that grows first waits for the
// searches that may still read it.
void ensure(ShardGroup& g, DevBuf& b, size_t bytes, const char* what) {
  if (b.bytes() >= bytes) return;
  g.quiesce();
  b.ensure(bytes, what);
}

// Rows [r0, r0 + m) of a tensor (row_stride kept).
udf_tensor rows_of(const udf_tensor& t, int64_t stride, int64_t r0, int64_t m) {
  udf_tensor s = t;
  s.data = static_cast<std::uint8_t*>(t.data) + size_t(r0) * size_t(stride) * udf_dtype_size(t.dtype);
  s.rows = m;
  return s;
}

namespace {

// A shard's part of a shared coarse probe given up, because another shard
// failed first (that shard's error is the search's).
struct ShardAborted {};

// A chunk's coarse probe shared out (SearchCall::CoarseShare): shard s
// probes part s of every slice of the queries and copies those rows' probes
// to every other shard's on its stream; each shard's schedule then waits
// for every other's copies (their probes_sent events).  The shards' threads
// meet twice: once every probe buffer is known, and once every copy and its
// event is queued.
struct CoarseMeet {
  CoarseMeet(uint32_t shards, uint32_t n_probes) : meet(shards), probes(shards), n_probes(n_probes) {}
  Rendezvous meet;
  std::vector<CUdeviceptr> probes;  // [s]: shard s's probes (published before the first meeting)
  uint32_t n_probes;
};

// Shard s's exchange, on its context and stream, after the probes of its
// rows (`probed`) are queued.
void exchange_probes(ShardGroup& g, CoarseMeet& cm, uint32_t s, CUstream stream, CUdeviceptr probes, const RowRanges& probed) {
  cm.probes[s] = probes;
  if (!cm.meet.arrive_and_wait()) throw ShardAborted{};
  ShardGroup::Shard& sh = *g.per[s];
  const size_t row_bytes = size_t(cm.n_probes) * 4;
  for (uint32_t t = 0; t < cm.probes.size(); ++t) {
    if (t == s) continue;
    for (const auto& [first, end] : probed)
      CU(cuMemcpyPeerAsync, cm.probes[t] + first * row_bytes, g.per[t]->ctx, probes + first * row_bytes, sh.ctx,
         (end - first) * row_bytes, stream);
  }
  sh.probes_sent.record(stream);
  if (!cm.meet.arrive_and_wait()) throw ShardAborted{};
  for (uint32_t t = 0; t < cm.probes.size(); ++t)
    if (t != s) CU(cuStreamWaitEvent, stream, g.per[t]->probes_sent.get(), 0);
}

// A chunk's host queries staged once for every device (slice_staging.h),
// into the first device's pinned h_in: made once every device has uploaded
// the previous chunk's rows from it.  Each device copies and probes the
// slices it owns (i % devices), so the slices come in a multiple of the
// devices, of up to kQuerySliceBytes.
struct SharedStaging {
  SharedStaging(const ShardedSearch& ss, const ShardChunk& c)
      : row_bytes(size_t(ss.ix->dim) * ss.ix->esize), m(c.m), slices(ss.n_shards, slice_count(ss, c, row_bytes)) {
    for (auto& sh : ss.group->per) sh->staged.sync();
    ss.home->h_in.ensure(size_t(c.m) * row_bytes, "staged queries");
  }
  static uint32_t slice_count(const ShardedSearch& ss, const ShardChunk& c, size_t row_bytes) {
    const size_t each = size_t(ss.n_shards) * std::max<size_t>(1, kQuerySliceBytes / row_bytes);
    return ss.n_shards * static_cast<uint32_t>((c.m + each - 1) / each);
  }
  // The first row of slice i (of slices() for the end).
  uint32_t first(uint32_t i) const { return static_cast<uint32_t>(uint64_t(m) * i / slices.slices()); }
  const size_t row_bytes;
  const uint32_t m;
  SliceStaging slices;
};

// Shard s's part of staging the chunk's host queries (the copies of its
// slices, every slice's upload and probe through `ready`), then an event
// after its uploads from them.
void stage_shared(const ShardedSearch& ss, const ShardChunk& c, uint32_t s, SharedStaging& st, CoarseMeet& cm,
                  CUstream stream, const CoarseShare::SliceReady& ready) {
  ShardGroup::Shard& sh = *ss.group->per[s];
  std::uint8_t* dst = ss.home->h_in.as<std::uint8_t>();
  const int64_t stride = row_stride(c.queries);
  try {
    st.slices.stage(
        s, host_pool(shards_of(ss.ix).shards[s]->mod->rt),
        [&](uint32_t slice, size_t part, size_t parts) {
          const int64_t a = st.first(slice), n = st.first(slice + 1) - a;
          host_rows_part(&c.queries, stride, 0, a + n * int64_t(part) / int64_t(parts),
                         a + n * int64_t(part + 1) / int64_t(parts), dst);
        },
        [&](uint32_t slice) {
          const uint32_t a = st.first(slice);
          ready(a, st.first(slice + 1) - a, dst + a * st.row_bytes, st.slices.owner(slice) == s);
        },
        [&] {
          if (cm.meet.broken()) throw ShardAborted{};
        });
  } catch (...) {
    sh.staged.record(stream);
    throw;
  }
  sh.staged.record(stream);
}

udf_tensor device_tensor(CUdeviceptr p, int32_t device, udf_dtype dtype, int64_t rows, int64_t cols) {
  udf_tensor t{};
  t.data = reinterpret_cast<void*>(p);
  t.dtype = dtype;
  t.rows = rows;
  t.cols = cols;
  t.row_stride = cols;
  t.device = device;
  return t;
}

// A device tensor of the first device, as shard `sh` (on another device)
// reads it: a copy in `buf` on its stream.  The rows are contiguous (packed
// first when they were not).
udf_tensor copy_to_shard(ShardGroup& g, ShardGroup::Shard& sh, const udf_tensor& t, DevBuf& buf, const char* what) {
  const size_t bytes = size_t(t.rows) * size_t(t.cols) * udf_dtype_size(t.dtype);
  ensure(g, buf, bytes, what);
  CU(cuMemcpyPeerAsync, buf.get(), sh.ctx, reinterpret_cast<CUdeviceptr>(t.data), g.home_ctx, bytes, sh.stream);
  udf_tensor c = t;
  c.data = buf.as<void>();
  c.row_stride = t.cols;
  int dev = 0;
  CU(cuPointerGetAttribute, &dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, buf.get());
  c.device = dev;
  return c;
}

// Whether a tensor's values are one block of rows * cols elements.
bool contiguous(const udf_tensor& t) { return t.row_stride == 0 || t.row_stride == t.cols || t.rows == 1; }

// Capture bindings as shard `sh` (on another device, of runtime `rt`) takes
// them: device arrays of the first device copied to `bufs` on its stream,
// except a udf_device_array's, which is never written and so read from its
// copy on the shard's device (made by the first search that needs it there).
// `tensors` holds the copies' descriptions while the bindings are used.
std::vector<udf_capture_binding> shard_bindings(ShardGroup& g, ShardGroup::Shard& sh, udf_runtime* rt,
                                                const udf_capture_binding* b, size_t n, DevBuf* bufs, size_t n_bufs,
                                                std::deque<udf_tensor>& tensors) {
  if (n == 0 || b == nullptr) return {};
  std::vector<udf_capture_binding> out(b, b + n);
  for (size_t i = 0; i < n; ++i) {
    const udf_tensor* t = b[i].tensor;
    if (!t || t->device == UDF_HOST_DEVICE || !t->data) continue;
    require(i < n_bufs, "too many capture bindings");
    require(contiguous(*t), [&] {
      return std::string("capture ") + (b[i].name ? b[i].name : "?") +
             ": a strided device array is not taken by a sharded index (make it contiguous or pass host memory)";
    });
    const size_t bytes = size_t(t->rows) * size_t(t->cols) * udf_dtype_size(t->dtype);
    if (std::shared_ptr<DeviceArray> a = find_device_array(t->data, bytes)) {
      udf_tensor c = *t;
      c.data = reinterpret_cast<void*>(a->on(rt, sh.stream));
      c.device = rt->ordinal;
      c.row_stride = t->cols;
      tensors.push_back(c);
    } else {
      tensors.push_back(copy_to_shard(g, sh, *t, bufs[i], "capture copy"));
    }
    out[i].tensor = &tensors.back();
  }
  return out;
}

// By vectors: a shard's m x k results as tie keys (at `keys`) to
// their ids (at `ids`), on its stream (udf_ivf_index_v1_resolve_keys).
void resolve_keys(udf_index* sh, CUstream stream, CUdeviceptr keys, CUdeviceptr ids, size_t n) {
  udf_runtime* rt = sh->mod->rt;
  udf_ivf_resolve_keys_args_v1 a{reinterpret_cast<const long long*>(keys), reinterpret_cast<long long*>(ids),
                                 sh->d_keys.as<const long long>(), sh->d_ids.as<const long long>(),
                                 sh->d_offsets.as<const uint64_t>(), sh->d_sizes.as<const uint32_t>(), n, sh->n_lists, 0};
  const auto grid = static_cast<unsigned>(
      std::min<uint64_t>((n + UDF_IVF_INDEX_V1_THREADS - 1) / UDF_IVF_INDEX_V1_THREADS, uint64_t(1) << 16));
  launch_on(stream, rt->kernels[IndexKernel::resolve_keys], std::max(grid, 1u), 1, UDF_IVF_INDEX_V1_THREADS, 0, &a);
}

// Strided device queries that other devices read: packed on the first
// device (after the previous search, which may read the buffer).
void pack_queries(const ShardedSearch& ss, ShardChunk& c) {
  ShardGroup& g = *ss.group;
  ShardGroup::Home& home = *ss.home;
  const size_t es = ss.ix->esize, row_bytes = size_t(ss.ix->dim) * es;
  ensure(g, home.packed, size_t(c.m) * row_bytes, "packed queries");
  CUDA_MEMCPY2D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcDevice = reinterpret_cast<CUdeviceptr>(c.queries.data);
  copy.srcPitch = size_t(ss.call.query_stride) * es;
  copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.dstDevice = home.packed.get();
  copy.dstPitch = row_bytes;
  copy.WidthInBytes = row_bytes;
  copy.Height = c.m;
  if (!g.done_reached) CU(cuStreamWaitEvent, ss.home_stream, home.done.get(), 0);
  CU(cuMemcpy2DAsync, &copy, ss.home_stream);
  c.queries.data = home.packed.as<void>();
  c.queries.row_stride = ss.ix->dim;
}

// Rows q0 .. q0 + m: their queries, where the merge happens, and the
// first device's gather buffers when the GPU merges.
ShardChunk plan_chunk(const ShardedSearch& ss, int64_t q0, uint32_t m, bool remote_device_queries) {
  ShardGroup& g = *ss.group;
  ShardGroup::Home& home = *ss.home;
  const SearchCall& call = ss.call;
  ShardChunk c;
  c.q0 = q0;
  c.m = m;
  c.per_shard = size_t(m) * ss.k;
  c.queries = rows_of(*call.queries, call.query_stride, q0, m);
  if (remote_device_queries && !contiguous(c.queries)) pack_queries(ss, c);
  c.ids_at = (c.per_shard * 4 + 7) / 8 * 8;
  c.keys_at = ss.by_vectors ? c.ids_at + c.per_shard * 8 : 0;
  c.host_merge = call.blocking && call.out_dists->device == UDF_HOST_DEVICE && call.out_ids->device == UDF_HOST_DEVICE &&
                 m <= kHostMergeQueries;
  if (!c.host_merge) {
    const size_t n = ss.n_shards * c.per_shard;
    ensure(g, home.gather_dists, n * 4, "gathered distances");
    ensure(g, home.gather_ids, n * 8, "gathered ids");
    if (ss.by_vectors) ensure(g, home.gather_keys, n * 8, "gathered tie keys");
  }
  return c;
}

// Shard s's part of the chunk: its search, into its gather slot (or its own
// buffers, or its mapped pinned rows for the host merge), with its part of
// the coarse probe when `cm` shares it out, and of the host queries'
// staging when `st` stages them once.
void start_shard(const ShardedSearch& ss, const ShardChunk& c, uint32_t s, CoarseMeet* cm, SharedStaging* st) {
  ShardGroup& g = *ss.group;
  ShardGroup::Home& home = *ss.home;
  ShardGroup::Shard& sh = *g.per[s];
  udf_index* shard = shards_of(ss.ix).shards[s].get();
  const bool by_vectors = ss.by_vectors;
  const size_t per_shard = c.per_shard;
  CtxGuard sg(sh.ctx);
  const CUstream stream = s == 0 ? ss.home_stream : sh.stream;
  if (s != 0) CU(cuStreamWaitEvent, stream, home.start.get(), 0);
  SearchCall part;
  part.queries = &c.queries;
  part.params = ss.call.params;
  part.stream = stream;
  part.blocking = false;
  udf_tensor queries = c.queries, out_dists, out_ids;
  std::vector<udf_capture_binding> caps, fcaps;
  std::deque<udf_tensor> copies;  // (a deque: the bindings point into it)
  const int32_t dev = shard->mod->rt->ordinal;
  // Where its distances, ids and (by vectors) tie keys go.
  CUdeviceptr d_at = 0, i_at = 0, k_at = 0;
  if (c.host_merge) {
    sh.rows.ensure(c.ids_at + per_shard * (by_vectors ? 16 : 8), "shard rows");
    d_at = sh.rows.device(), i_at = d_at + c.ids_at, k_at = by_vectors ? d_at + c.keys_at : 0;
  } else if (sh.home_device) {
    d_at = home.gather_dists.get() + s * per_shard * 4;
    i_at = home.gather_ids.get() + s * per_shard * 8;
    k_at = by_vectors ? home.gather_keys.get() + s * per_shard * 8 : 0;
  } else {
    ensure(g, sh.dists, per_shard * 4, "shard distances");
    ensure(g, sh.ids, per_shard * 8, "shard ids");
    if (by_vectors) ensure(g, sh.keys, per_shard * 8, "shard tie keys");
    d_at = sh.dists.get(), i_at = sh.ids.get(), k_at = by_vectors ? sh.keys.get() : 0;
  }
  // By vectors the search returns tie keys in place of ids (resolved below).
  out_dists = device_tensor(d_at, dev, UDF_DTYPE_F32, c.m, ss.k);
  out_ids = device_tensor(by_vectors ? k_at : i_at, dev, UDF_DTYPE_I64, c.m, ss.k);
  if (!sh.home_device) {
    const udf_search_params& p = ss.call.params;
    if (queries.device != UDF_HOST_DEVICE) queries = copy_to_shard(g, sh, queries, sh.queries, "query copy");
    caps = shard_bindings(g, sh, shard->mod->rt, p.captures, p.n_captures, sh.caps, 8, copies);
    fcaps = shard_bindings(g, sh, shard->mod->rt, p.filter_captures, p.n_filter_captures, sh.fcaps, 8, copies);
    if (!caps.empty()) part.params.captures = caps.data();
    if (!fcaps.empty()) part.params.filter_captures = fcaps.data();
  }
  part.queries = &queries;
  part.out_dists = &out_dists;
  part.out_ids = &out_ids;
  part.query_stride = row_stride(queries);
  part.dist_stride = part.id_stride = ss.k;
  CoarseShare share;
  if (cm) {
    share.part = s;
    share.parts = ss.n_shards;
    share.exchange = [&g, cm, s, stream](CUdeviceptr probes, const RowRanges& probed) {
      exchange_probes(g, *cm, s, stream, probes, probed);
    };
    if (st)
      share.stage_host = [&ss, &c, s, st, cm, stream](const CoarseShare::SliceReady& ready) {
        stage_shared(ss, c, s, *st, *cm, stream, ready);
      };
    part.coarse_share = &share;
  }
  search_index(shard, part);
  if (by_vectors) resolve_keys(shard, stream, k_at, i_at, per_shard);
  if (s != 0) sh.searched.record(stream);
}

// Whether the shards share out a chunk's coarse probe: shards on threads of
// their own (distinct runtimes), so that they can meet, and chunks of the
// shards' one-chunk size (search_sharded).
bool shares_coarse(const ShardedSearch& ss) {
  return ss.n_shards > 1 && ss.group->distinct_runtimes && !testing_path(kTestingNoCoarseShare);
}

// Every shard's part of the chunk, after what came before on the first
// device's stream (the caller's work, the previous search's merge).
void start_shards(const ShardedSearch& ss, const ShardChunk& c) {
  ShardGroup& g = *ss.group;
  if (!g.done_reached) CU(cuStreamWaitEvent, ss.home_stream, ss.home->done.get(), 0);
  ss.home->start.record(ss.home_stream);
  std::optional<CoarseMeet> cm;
  std::optional<SharedStaging> st;
  if (!c.host_merge && c.m >= kShareCoarseQueries && shares_coarse(ss)) {
    cm.emplace(ss.n_shards, ss.call.params.n_probes);
    if (c.queries.device == UDF_HOST_DEVICE && !testing_path(kTestingNoSharedStaging)) st.emplace(ss, c);
  }
  auto start = [&](uint32_t s) {
    if (!cm) return start_shard(ss, c, s, nullptr, nullptr);
    try {
      start_shard(ss, c, s, &*cm, st ? &*st : nullptr);
    } catch (const ShardAborted&) {  // another shard failed: its error is the search's
    } catch (...) {
      cm->meet.fail();
      throw;
    }
  };
  if (ss.n_shards > 1 && g.distinct_runtimes) {
    if (!g.workers) g.workers = std::make_unique<ShardWorkers>(ss.n_shards - 1);
    g.workers->run(start);
  } else {
    for (uint32_t s = 0; s < ss.n_shards; ++s) start(s);
  }
}

}  // namespace

void search_sharded(udf_index* ix, const SearchCall& call) {
  ShardedIndex& set = shards_of(ix);
  udf_index* first = set.shards[0].get();
  ShardedSearch ss;
  ss.ix = ix;
  ss.group = set.group.get();
  ss.home = set.group->home.get();
  ss.home_rt = first->mod->rt;
  ss.call = call;
  ss.k = call.params.k;
  ss.n_shards = static_cast<uint32_t>(set.shards.size());
  ss.max_order = first->mod->manifest.artifacts[first->metric].order == Order::Max;
  ss.by_vectors = set.by_vectors();
  ss.home_stream = !call.blocking && call.stream ? call.stream : ss.home_rt->stream;
  ShardGroup& g = *ss.group;
  const double t0 = now_ms();
  const int64_t n = call.queries->rows;
  // Chunks of queries whose gathered results stay within 256 MB; each one
  // chunk of the shards' own searches when they share the coarse probe.
  int64_t chunk = std::clamp<int64_t>((int64_t(256) << 20) / (int64_t(ss.n_shards) * ss.k * 12), 1, 65536);
  if (shares_coarse(ss)) chunk = std::min(chunk, search_chunk_queries(first, call.params));
  const bool remote_device_queries = call.queries->device != UDF_HOST_DEVICE &&
                                     std::any_of(g.per.begin(), g.per.end(), [](const auto& s) { return !s->home_device; });
  uint32_t chunks = 0;
  for (int64_t q0 = 0; q0 < n; q0 += chunk, ++chunks) {
    const ShardChunk c = plan_chunk(ss, q0, static_cast<uint32_t>(std::min(chunk, n - q0)), remote_device_queries);
    start_shards(ss, c);
    if (c.host_merge) {
      CU(cuStreamSynchronize, ss.home_stream);
      for (uint32_t s = 1; s < ss.n_shards; ++s) g.per[s]->searched.sync();
      merge_on_host(ss, c);
      g.done_reached = true;
      continue;
    }
    gather_results(ss, c);
    const bool waited = merge_on_device(ss, c);
    if (call.blocking) {  // the wait reaches the end of this search: no `done` to record
      if (!waited) CU(cuStreamSynchronize, ss.home_stream);
      g.done_reached = true;
    } else {
      ss.home->done.record(ss.home_stream);
      g.done_reached = false;
    }
  }
  if (call.blocking) {
    ix->stats = udf_search_stats{};
    ix->stats.total_ms = now_ms() - t0;
    ix->stats.chunks = chunks;
  }
}

}  // namespace udf::rt
