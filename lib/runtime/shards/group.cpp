// A sharded index's making: the top-level index and its shards, and the
// group its searches use (the transport between the devices, the buffers on
// each).
#include <algorithm>

#include "cuda/context.h"
#include "shards/sharded_index.h"

namespace udf::rt {

ShardGroup::~ShardGroup() {
  workers.reset();  // (joins: no search is running)
  try {
    quiesce();
  } catch (...) {
  }
  if (nccl_api)
    for (ncclComm_t c : comms)
      if (c) nccl_api->ncclCommDestroy(c);
  for (auto& s : per) {
    if (!s) continue;
    try {
      CtxGuard g(s->ctx);
      s.reset();
    } catch (...) {
    }
  }
  if (home) {
    try {
      CtxGuard g(home_ctx);
      home.reset();
    } catch (...) {
    }
  }
}

void ShardGroup::quiesce() {
  if (home) home->done.sync();
  for (auto& s : per)
    if (s) s->searched.sync();
}

std::unique_ptr<udf_index> new_sharded(udf_module* const* modules, size_t n, const char* metric, uint32_t dim, uint32_t n_lists,
                                       uint32_t layout) {
  auto ix = new_index(modules[0], metric, dim, n_lists);
  ix->shard_set = {new ShardedIndex, [](ShardedIndex* set) { delete set; }};
  ShardedIndex& set = *ix->shard_set;
  set.layout = layout == UDF_SHARD_DEFAULT ? uint32_t(UDF_SHARD_BY_VECTORS) : layout;
  for (size_t i = 0; i < n; ++i) {
    CtxGuard g(modules[i]->rt->ctx);
    std::unique_ptr<udf_index, void (*)(udf_index*)> sh(new_index(modules[i], metric, dim, n_lists).release(), udf_index_destroy);
    ++modules[i]->live_indexes;  // udf_index_destroy takes it back
    set.shards.push_back(std::move(sh));
  }
  return ix;
}

void make_group(udf_index* ix) {
  ShardedIndex& set = shards_of(ix);
  auto g = std::make_unique<ShardGroup>();
  udf_runtime* hrt = set.shards[0]->mod->rt;
  g->home_ctx = hrt->ctx;
  std::vector<int> ordinals;
  std::vector<const udf_runtime*> runtimes;
  for (auto& sh : set.shards) {
    udf_runtime* rt = sh->mod->rt;
    runtimes.push_back(rt);
    auto s = std::make_unique<ShardGroup::Shard>();
    s->ctx = rt->ctx;
    s->stream = rt->stream;
    s->home_device = rt->ordinal == hrt->ordinal;
    ordinals.push_back(rt->ordinal);
    g->per.push_back(std::move(s));
  }
  {
    CtxGuard hg(hrt->ctx);
    g->home = std::make_unique<ShardGroup::Home>();
  }
  std::sort(runtimes.begin(), runtimes.end());
  g->distinct_runtimes = std::adjacent_find(runtimes.begin(), runtimes.end()) == runtimes.end();
  std::vector<int> sorted = ordinals;
  std::sort(sorted.begin(), sorted.end());
  const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
  if (set.shards.size() > 1 && distinct) {
    std::string why;
    if (const NcclApi* nc = nccl(&why)) {
      std::vector<ncclComm_t> comms(ordinals.size(), nullptr);
      CtxGuard hg(hrt->ctx);  // ncclCommInitAll switches devices; the guard restores the caller's context
      const ncclResult_t r = nc->ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), ordinals.data());
      if (r == 0) {
        g->comms = std::move(comms);
        g->nccl_api = nc;
        g->transport = "nccl";
      } else {
        g->why_not_nccl = std::string("ncclCommInitAll: ") + nc->ncclGetErrorString(r);
      }
    } else {
      g->why_not_nccl = why;
    }
  }
  // Peer access (both ways) where the devices allow it: the peer copies
  // then go device to device.
  for (size_t i = 1; i < set.shards.size(); ++i) {
    udf_runtime* rt = set.shards[i]->mod->rt;
    if (rt->ordinal == hrt->ordinal) continue;
    auto enable = [](udf_runtime* from, udf_runtime* to) {
      int can = 0;
      CU(cuDeviceCanAccessPeer, &can, from->dev, to->dev);
      if (!can) return;
      CtxGuard cg(from->ctx);
      const CUresult r = cuda().cuCtxEnablePeerAccess(to->ctx, 0);
      if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) cu_check(r, "cuCtxEnablePeerAccess");
    };
    enable(hrt, rt);
    enable(rt, hrt);
  }
  set.group = std::move(g);
}

}  // namespace udf::rt
