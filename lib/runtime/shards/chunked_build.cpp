// The chunked build (udf_index_build_chunked): a one-GPU or sharded index
// filled from a callback's chunks of rows, each device's lists allocated once
// at their final sizes.
#include <algorithm>
#include <string>

#include "cuda/context.h"
#include "index/list_build.h"
#include "shards/shard_plan.h"
#include "shards/sharded_index.h"

namespace udf::rt {

void build_in_chunks(udf_index* ix, size_t n_chunks, const ChunkSource& source, const udf_index_params& p) {
  require(n_chunks >= 1, "n_chunks = 0: there must be at least one chunk");
  const bool sharded = ix->sharded();
  const size_t n_shards = sharded ? shards_of(ix).shards.size() : 1;
  auto shard = [&](size_t s) { return sharded ? shards_of(ix).shards[s].get() : ix; };
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
  const bool by_vectors = sharded && shards_of(ix).by_vectors();
  if (sharded && !by_vectors) shards_of(ix).lists = plan_shard_lists(counts, static_cast<uint32_t>(n_shards));
  auto part = [&](size_t s, uint32_t l) -> uint64_t {
    if (!sharded) return s == 0 ? 0 : counts[l];
    if (by_vectors) return part_begin(counts[l], s, n_shards);
    return s <= list_owner(ix, l) ? 0 : counts[l];
  };
  struct Layout {
    std::vector<uint32_t> sizes;
    std::vector<uint64_t> offsets, next;
    DeviceLists lists;
    int64_t size = 0;
  };
  std::vector<Layout> lay(n_shards);
  for (size_t s = 0; s < n_shards; ++s) {
    udf_index* sh = shard(s);
    CtxGuard g(sh->mod->rt->ctx);
    Layout& layout = lay[s];
    layout.sizes.assign(ix->n_lists, 0);
    for (uint32_t l = 0; l < ix->n_lists; ++l) {
      if (counts[l] > 0xFFFFFFFFull) fail(UDF_ERROR_UNSUPPORTED, "list " + std::to_string(l) + " would hold more than 2^32 - 1 vectors");
      layout.sizes[l] = static_cast<uint32_t>(part(s + 1, l) - part(s, l));
      layout.size += int64_t(layout.sizes[l]);
    }
    layout.lists.alloc(sh->mod->rt, sh, plan_offsets(layout.sizes, layout.offsets));
    layout.next = layout.offsets;
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
    for (size_t s = 0; s < n_shards; ++s) {
      udf_index* sh = shard(s);
      Layout& layout = lay[s];
      std::vector<uint32_t> slot(label.size(), UDF_IVF_INDEX_V1_NO_SLOT);
      for (size_t i = 0; i < label.size(); ++i)
        if (owner[i] == s) slot[i] = static_cast<uint32_t>(layout.next[label[i]]++);
      CtxGuard g(sh->mod->rt->ctx);
      RowStaging st(sh, &ch.data, ch.stride, false, 0);
      scatter_rows(sh, st, slot, ch.id_ptr(), first_ids[c], layout.lists);
    }
    std::vector<uint32_t>().swap(labels[c]);
    progress(p, 0.8 + 0.2 * double(c + 1) / double(n_chunks), "pack");
  }
  for (size_t s = 0; s < n_shards; ++s) {
    udf_index* sh = shard(s);
    CtxGuard g(sh->mod->rt->ctx);
    install(sh, lay[s].lists, std::move(lay[s].sizes), std::move(lay[s].offsets));
    sh->size = lay[s].size;
    sh->next_id = next_id;
    if (by_vectors) keep_equal_parts(sh, s, n_shards, counts);
  }
  if (sharded) set_sharded_totals(ix, counts, static_cast<int64_t>(total), next_id);
  progress(p, 1.0, "upload");
}

}  // namespace udf::rt
