// A sharded index's rows: an add (the assignment on the first device, each
// shard placing its rows), its centroids shared, and a file's lists cut
// between the shards.
#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <thread>

#include "cuda/context.h"
#include "cuda/launch.h"
#include "index/list_build.h"
#include "index/testing_paths.h"
#include "shards/shard_plan.h"
#include "shards/sharded_index.h"

namespace udf::rt {

std::uint8_t list_owner(const udf_index* ix, uint32_t l) {
  const auto& b = shards_of(ix).lists;
  return static_cast<std::uint8_t>(std::upper_bound(b.begin() + 1, b.end(), l) - (b.begin() + 1));
}

namespace {

// By vectors: the shard of each new row (labels `label`) when shard
// s holds sizes[l] rows of list l already (old[l] in all): each list's new
// rows, in input order, fill the shards that fall shortest of an equal part
// of the list's new size, in shard order; each shard's new rows of a list
// are one run of positions, appended to its runs (`runs_out`, [shard][list],
// for the caller to keep once the rows are placed).
std::vector<std::uint8_t> vector_owners(const udf_index* ix, const std::vector<uint32_t>& label,
                                        const std::vector<uint64_t>& old,
                                        std::vector<std::vector<std::vector<std::pair<uint32_t, uint32_t>>>>& runs_out) {
  const size_t n_shards = shards_of(ix).shards.size(), n_lists = ix->n_lists;
  std::vector<uint64_t> added(n_lists, 0);
  for (uint32_t l : label) ++added[l];
  // give[l * n_shards + s]: the new rows of list l shard s takes.
  std::vector<uint32_t> give(n_lists * n_shards, 0);
  runs_out.assign(n_shards, std::vector<std::vector<std::pair<uint32_t, uint32_t>>>(n_lists));
  std::vector<uint64_t> has(n_shards);
  for (size_t l = 0; l < n_lists; ++l) {
    if (added[l] == 0) continue;
    for (size_t s = 0; s < n_shards; ++s) has[s] = shards_of(ix).shards[s]->sizes.empty() ? 0 : shards_of(ix).shards[s]->sizes[l];
    const std::vector<uint64_t> g = plan_vector_adds(has, added[l]);
    uint64_t pos = old[l], given = 0;
    for (size_t s = 0; s < n_shards; ++s) {
      give[l * n_shards + s] = static_cast<uint32_t>(g[s]);
      if (g[s] > 0) runs_out[s][l].push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(g[s])});
      pos += g[s];
      given += g[s];
    }
    if (given != added[l]) fail(UDF_ERROR_INTERNAL, "shard by vectors: list " + std::to_string(l) + " has rows no shard takes");
  }
  std::vector<std::uint8_t> owner(label.size());
  std::vector<uint32_t> at(n_lists, 0);  // per list: the shard its next new row goes to
  for (size_t i = 0; i < label.size(); ++i) {
    const uint32_t l = label[i];
    while (give[size_t(l) * n_shards + at[l]] == 0) ++at[l];
    owner[i] = static_cast<std::uint8_t>(at[l]);
    --give[size_t(l) * n_shards + at[l]];
  }
  return owner;
}

}  // namespace

void set_sharded_totals(udf_index* ix, const std::vector<uint64_t>& counts, int64_t size, int64_t next_id) {
  std::vector<uint32_t> sizes(ix->n_lists);
  for (uint32_t l = 0; l < ix->n_lists; ++l) sizes[l] = static_cast<uint32_t>(counts[l]);
  ix->sizes = std::move(sizes);
  ix->max_list_size = *std::max_element(ix->sizes.begin(), ix->sizes.end());
  ix->size = size;
  ix->next_id = next_id;
  for (auto& sh : shards_of(ix).shards) sh->next_id = next_id;
}

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

namespace {

// fn(s) for every shard: on threads of their own (shard 0 on this one) when
// every shard has a runtime of its own, else one after the other.  The
// first exception, in shard order, is rethrown once all have returned.
void for_each_shard(const udf_index* ix, const std::function<void(size_t)>& fn) {
  const size_t n_shards = shards_of(ix).shards.size();
  const ShardGroup* group = shards_of(ix).group.get();
  if (n_shards == 1 || !group || !group->distinct_runtimes) {
    for (size_t s = 0; s < n_shards; ++s) fn(s);
    return;
  }
  std::vector<std::exception_ptr> errors(n_shards);
  auto run = [&](size_t s) {
    try {
      fn(s);
    } catch (...) {
      errors[s] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  try {
    for (size_t s = 1; s < n_shards; ++s) threads.emplace_back(run, s);
  } catch (...) {  // no more threads: those started finish first
    for (std::thread& t : threads) t.join();
    throw;
  }
  run(0);
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// Rows [r0, r0 + m) of `data` as a tensor of their own.
udf_tensor row_range(const udf_tensor* data, int64_t stride, int64_t r0, int64_t m) {
  udf_tensor t = *data;
  t.data = static_cast<std::uint8_t*>(data->data) + size_t(r0) * size_t(stride) * udf_dtype_size(data->dtype);
  t.rows = m;
  return t;
}

// A shard's range of the input, rows [r0, r1): on its device for both
// passes (staged, or read in place), where they fit.
struct ShardPart {
  int64_t r0 = 0, r1 = 0;
  udf_tensor rows{};
  std::unique_ptr<RowStaging> st;
};

// Whether `reader`'s kernels read memory of `owner`'s device: the same
// device, or a peer whose access this turns on.  A device that cannot (or
// has no peer slot left) says no, and the caller copies instead.
bool reads_from(udf_runtime* reader, udf_runtime* owner) {
  if (reader->ordinal == owner->ordinal) return true;
  if (testing_path(kTestingNoPeerReads)) return false;
  return peer_access(reader, owner, false);
}

// Where pass 2 of shard `sh` reads part `pt` (staged on shard `owner`):
// in place where the part is on a device sh reads (its rows kept since the
// assignment, or the input's own device rows), else staged again from the
// input into `again`.
RowSource source_for(udf_index* sh, udf_index* owner, const ShardPart& pt, int64_t stride,
                     std::vector<std::unique_ptr<RowStaging>>& again) {
  const RowStaging& st = *pt.st;
  const int64_t m = pt.r1 - pt.r0;
  const bool kept = st.keep && st.staged;
  if ((kept || st.in_place) && reads_from(sh->mod->rt, owner->mod->rt)) {
    if (kept) return RowSource{pt.r0, m, nullptr, st.all.get(), uint64_t(owner->dim) * owner->esize};
    return RowSource{pt.r0, m, nullptr, reinterpret_cast<CUdeviceptr>(pt.rows.data), uint64_t(stride) * owner->esize};
  }
  again.push_back(std::make_unique<RowStaging>(sh, &pt.rows, stride, false, 0));
  return RowSource{pt.r0, m, again.back().get(), 0, 0};
}

// Each shard's share of the rows (rows n * s / S up to n * (s + 1) / S) to
// its device once (pinned staging, as a one-GPU build's), kept there for
// both passes where it fits.
std::vector<ShardPart> stage_parts(udf_index* ix, const udf_tensor* data, int64_t stride) {
  const int64_t n = data->rows;
  const size_t n_shards = shards_of(ix).shards.size();
  std::vector<ShardPart> parts(n_shards);
  for_each_shard(ix, [&](size_t s) {
    udf_index* sh = shards_of(ix).shards[s].get();
    CtxGuard g(sh->mod->rt->ctx);
    ShardPart& pt = parts[s];
    pt.r0 = n * int64_t(s) / int64_t(n_shards), pt.r1 = n * int64_t(s + 1) / int64_t(n_shards);
    pt.rows = row_range(data, stride, pt.r0, pt.r1 - pt.r0);
    // (Its layout's bound for every new row: by lists a shard may take more than its share.)
    pt.st = std::make_unique<RowStaging>(sh, &pt.rows, stride, true, layout_bytes_after(sh, uint64_t(n)));
    if (pt.r1 > pt.r0) pt.st->upload_all();
  });
  return parts;
}

// The k-means' help from the staged shares (all of them on their devices
// as given, or none) and the other shards' devices.
KmeansHelp help_from(udf_index* ix, const std::vector<ShardPart>& parts, int64_t stride) {
  KmeansHelp help;
  const auto& shards = shards_of(ix).shards;
  std::vector<int> ordinals{shards[0]->mod->rt->ordinal};
  for (size_t s = 1; s < shards.size(); ++s) {
    const int o = shards[s]->mod->rt->ordinal;
    if (std::find(ordinals.begin(), ordinals.end(), o) != ordinals.end()) continue;
    ordinals.push_back(o);
    help.devices.push_back(shards[s].get());
  }
  for (size_t s = 0; s < parts.size(); ++s) {
    const ShardPart& pt = parts[s];
    udf_index* sh = shards[s].get();
    if (pt.r1 == pt.r0) continue;
    if (pt.st->keep && pt.st->staged)
      help.shares.push_back(StagedShare{sh, pt.r0, pt.r1 - pt.r0, pt.st->all.get(), uint64_t(sh->dim) * sh->esize});
    else if (pt.st->in_place)
      help.shares.push_back(StagedShare{sh, pt.r0, pt.r1 - pt.r0, reinterpret_cast<CUdeviceptr>(pt.rows.data),
                                        uint64_t(stride) * sh->esize});
    else
      return KmeansHelp{{}, help.devices};  // some share is not on its device yet: the sample comes from the input
  }
  return help;
}

// The staged parts' rows added to the shards: pass 1, the nearest lists of
// each share on its device, then the balanced assignment on the host
// against the whole index's lists: the labels a one-GPU index would give
// (each row's candidates do not depend on the device).  Pass 2: each shard
// places the rows of its lists, reading every share where it is (its own
// device's or a peer's memory; from the input again where it cannot).
// The parts' staging is freed.
void add_parts(udf_index* ix, std::vector<ShardPart>& parts, const udf_tensor* data, int64_t stride, const int64_t* id_list,
               const udf_index_params* p) {
  const int64_t n = data->rows;
  const size_t n_shards = shards_of(ix).shards.size();
  udf_index* first = shards_of(ix).shards[0].get();
  BuildProfile prof(first->mod->rt);
  const std::vector<uint64_t> old = current_counts(ix);
  std::vector<uint64_t> counts = old;
  const uint32_t c = candidates_for(first);
  // (Not value-initialized: nearest_candidates writes every element.)
  std::unique_ptr<uint32_t[]> cand(new uint32_t[size_t(n) * c]);
  std::unique_ptr<float[]> keys(new float[size_t(n) * c]);
  for_each_shard(ix, [&](size_t s) {
    udf_index* sh = shards_of(ix).shards[s].get();
    CtxGuard g(sh->mod->rt->ctx);
    ShardPart& pt = parts[s];
    if (pt.r1 > pt.r0) nearest_candidates(sh, *pt.st, cand.get() + size_t(pt.r0) * c, keys.get() + size_t(pt.r0) * c, nullptr);
  });
  prof.lap("shards: nearest lists");
  if (p) progress(*p, 0.7, "assign");
  std::vector<uint32_t> label;
  {
    CtxGuard g(first->mod->rt->ctx);
    label = assign_to_lists(first, cand.get(), keys.get(), size_t(n), c, counts, first->n_lists,
                            static_cast<uint64_t>(ix->size + n));
  }
  cand.reset();
  keys.reset();
  prof.lap("shards: balance (host)");
  if (p) progress(*p, 0.8, "pack");
  std::vector<std::uint8_t> owner;
  std::vector<std::vector<std::vector<std::pair<uint32_t, uint32_t>>>> runs;  // by vectors: [shard][list] new runs
  if (shards_of(ix).by_vectors()) {
    owner = vector_owners(ix, label, old, runs);
  } else {
    if (shards_of(ix).lists.empty())  // a new index: the shards' lists, by the assignment's sizes
      shards_of(ix).lists = plan_shard_lists(counts, static_cast<uint32_t>(n_shards));
    owner.resize(label.size());
    for (size_t i = 0; i < label.size(); ++i) owner[i] = list_owner(ix, label[i]);
  }
  for_each_shard(ix, [&](size_t s) {
    udf_index* sh = shards_of(ix).shards[s].get();
    CtxGuard g(sh->mod->rt->ctx);
    std::vector<RowSource> from;
    std::vector<std::unique_ptr<RowStaging>> again;
    for (size_t o = 0; o < n_shards; ++o)
      if (parts[o].r1 > parts[o].r0) from.push_back(source_for(sh, shards_of(ix).shards[o].get(), parts[o], stride, again));
    place_rows(sh, from, label, Owners{&owner, static_cast<std::uint8_t>(s)}, id_list, ix->next_id);
    if (shards_of(ix).by_vectors()) {
      sh->runs.resize(ix->n_lists);
      for (uint32_t l = 0; l < ix->n_lists; ++l)
        for (const auto& r : runs[s][l]) sh->runs[l].push_back(r);
      upload_keys(sh);
    }
  });
  prof.lap("shards: place");
  // Each share's staging freed under its own device's context (every
  // shard's placement has read it).
  for_each_shard(ix, [&](size_t s) {
    CtxGuard g(shards_of(ix).shards[s]->mod->rt->ctx);
    parts[s].st.reset();
  });
  set_sharded_totals(ix, counts, ix->size + n, next_id_after(ix->next_id, id_list, n));
  if (p) progress(*p, 1.0, "upload");
}

}  // namespace

void add_rows_sharded(udf_index* ix, const udf_tensor* data, int64_t stride, const int64_t* id_list, const udf_index_params* p) {
  check_room(ix, data->rows);
  std::vector<ShardPart> parts = stage_parts(ix, data, stride);
  add_parts(ix, parts, data, stride, id_list, p);
}

void build_rows_sharded(udf_index* ix, const udf_tensor* data, int64_t stride, const int64_t* id_list,
                        const udf_index_params& p) {
  check_room(ix, data->rows);
  udf_index* first = shards_of(ix).shards[0].get();
  std::vector<ShardPart> parts;
  // The k-means' start on a thread of its own while the shares go up.
  std::unique_ptr<KmeansStart> start = p.centroids ? nullptr : std::make_unique<KmeansStart>(first, data->rows, p);
  {
    BuildProfile prof(first->mod->rt);
    parts = stage_parts(ix, data, stride);
    prof.lap("shards: stage the rows");
  }
  {
    CtxGuard g(first->mod->rt->ctx);
    const KmeansHelp help = help_from(ix, parts, stride);
    make_centroids(first, data, stride, p, nullptr, &help, start.get());  // the one-GPU build's centroids
  }
  share_centroids(ix);
  add_parts(ix, parts, data, stride, id_list, &p);
}

void share_centroids(udf_index* ix) {
  ix->centroids = shards_of(ix).shards[0]->centroids;
  for (size_t s = 1; s < shards_of(ix).shards.size(); ++s) {
    udf_index* sh = shards_of(ix).shards[s].get();
    CtxGuard g(sh->mod->rt->ctx);
    sh->centroids = ix->centroids;
    upload(sh->mod->rt->stream, sh->d_centroids, sh->centroids.data(), sh->centroids.size() * 4, "centroids");
    sync(sh->mod->rt);
  }
}

void load_shards(udf_index* ix, const IndexFileHeader& h, IndexFileLists& lists) {
  ShardedIndex& set = shards_of(ix);
  std::vector<uint64_t> sizes(h.n_lists);
  ix->sizes.resize(h.n_lists);
  for (uint32_t l = 0; l < h.n_lists; ++l) sizes[l] = ix->sizes[l] = static_cast<uint32_t>(lists.ids[l].size());
  ix->max_list_size = *std::max_element(ix->sizes.begin(), ix->sizes.end());
  const size_t n_shards = set.shards.size();
  if (!set.by_vectors()) set.lists = plan_shard_lists(sizes, static_cast<uint32_t>(n_shards));
  for (size_t s = 0; s < n_shards; ++s) {
    udf_index* sh = set.shards[s].get();
    CtxGuard g(sh->mod->rt->ctx);
    sh->next_id = h.next_id;
    sh->balance = h.balance;
    sh->centroids = ix->centroids;
    // Its rows of list l: by vectors part s of every list, by lists its range's whole lists.
    auto part = [&](uint32_t l) -> std::pair<uint32_t, uint32_t> {
      const uint64_t n = sizes[l];
      if (set.by_vectors()) return {uint32_t(part_begin(n, s, n_shards)), uint32_t(part_begin(n, s + 1, n_shards))};
      const bool mine = l >= set.lists[s] && l < set.lists[s + 1];
      return {0u, mine ? uint32_t(n) : 0u};
    };
    upload_lists(sh, lists.ids, lists.vecs, part);
    sh->size = 0;
    for (uint32_t l = 0; l < ix->n_lists; ++l) sh->size += sh->sizes[l];
    if (set.by_vectors()) keep_equal_parts(sh, s, n_shards, sizes);
  }
}

}  // namespace udf::rt
