// A sharded index's file: the one-GPU index's file, each list's parts read
// back from the shards that hold them.
#include <cstring>

#include "cuda/context.h"
#include "shards/sharded_index.h"

namespace udf::rt {

namespace {

// By vectors: each list's parts from every shard, at their positions in the
// one index's list (the shards' runs).
void append_vector_parts(const udf_index* ix, Bytes& file) {
  const ShardedIndex& set = shards_of(ix);
  const size_t row_bytes = size_t(ix->dim) * ix->esize;
  std::vector<size_t> at(ix->n_lists);  // where list l's ids start in the file
  size_t end = file.size();
  for (uint32_t l = 0; l < ix->n_lists; ++l) {
    at[l] = end;
    end += size_t(ix->sizes[l]) * (8 + row_bytes);
  }
  file.resize(end);
  for (size_t s = 0; s < set.shards.size(); ++s) {
    const udf_index* sh = set.shards[s].get();
    CtxGuard g(sh->mod->rt->ctx);
    download_lists(sh, [&](uint32_t l, const int64_t* ids, const std::uint8_t* rows) {
      const size_t n = ix->sizes[l];
      size_t i = 0;
      for (const auto& [first, count] : sh->runs[l]) {
        if (uint64_t(first) + count > n || i + count > sh->sizes[l])
          fail(UDF_ERROR_INTERNAL, "shard " + std::to_string(s) + ": its runs of list " + std::to_string(l) +
                                       " do not fit the list");
        std::memcpy(file.data() + at[l] + size_t(first) * 8, ids + i, size_t(count) * 8);
        std::memcpy(file.data() + at[l] + n * 8 + size_t(first) * row_bytes, rows + i * row_bytes, size_t(count) * row_bytes);
        i += count;
      }
    });
  }
}

}  // namespace

void append_shard_lists(const udf_index* ix, Bytes& file) {
  const ShardedIndex& set = shards_of(ix);
  if (set.by_vectors()) return append_vector_parts(ix, file);
  // By lists: the shards' lists in list order.
  const size_t row_bytes = size_t(ix->dim) * ix->esize;
  for (size_t s = 0; s < set.shards.size(); ++s) {
    const udf_index* sh = set.shards[s].get();
    CtxGuard g(sh->mod->rt->ctx);
    download_lists(sh, [&](uint32_t l, const int64_t* ids, const std::uint8_t* rows) {
      if (l >= set.lists[s] && l < set.lists[s + 1]) {
        append_bytes(file, ids, size_t(ix->sizes[l]) * 8);
        append_bytes(file, rows, size_t(ix->sizes[l]) * row_bytes);
      }
    });
  }
}

}  // namespace udf::rt
