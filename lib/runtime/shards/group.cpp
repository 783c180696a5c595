// A sharded index's making: the top-level index and its shards, and the
// group its searches use (the transport between the devices, the buffers on
// each).
#include <algorithm>
#include <exception>
#include <thread>
#include <utility>

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
                                       uint32_t layout, const float* coarse_weights) {
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
  set_coarse_weights_sharded(ix.get(), coarse_weights);
  return ix;
}

void set_coarse_weights_sharded(udf_index* ix, const float* w) {
  {
    CtxGuard g(ix->mod->rt->ctx);
    set_coarse_weights(ix, w);
  }
  for (auto& sh : shards_of(ix).shards) {
    CtxGuard g(sh->mod->rt->ctx);
    set_coarse_weights(sh.get(), w);
  }
}

// NCCL communicators for devices `ordinals` (distinct), one a rank, or why
// there are none.
struct NcclStart {
  std::vector<ncclComm_t> comms;
  const NcclApi* api = nullptr;
  std::string why_not;
};

namespace {

NcclStart start_nccl(const std::vector<int>& ordinals, udf_runtime* hrt) {
  NcclStart r;
  const NcclApi* nc = nccl(&r.why_not);
  if (!nc) return r;
  std::vector<int> devs = ordinals;
  std::vector<ncclComm_t> comms(devs.size(), nullptr);
  CtxGuard hg(hrt->ctx);  // ncclCommInitAll switches devices; the guard restores the caller's context
  const ncclResult_t e = nc->ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), devs.data());
  if (e == 0) {
    r.comms = std::move(comms);
    r.api = nc;
  } else {
    r.why_not = std::string("ncclCommInitAll: ") + nc->ncclGetErrorString(e);
  }
  return r;
}

void apply(ShardGroup& g, NcclStart&& r) {
  if (r.api) {
    g.comms = std::move(r.comms);
    g.nccl_api = r.api;
    g.transport = "nccl";
  } else {
    g.why_not_nccl = std::move(r.why_not);
  }
}

// The devices of the shards, and whether NCCL applies (more than one shard,
// each on a device of its own).
std::vector<int> shard_ordinals(const ShardedIndex& set, bool& distinct) {
  std::vector<int> ordinals;
  for (auto& sh : set.shards) ordinals.push_back(sh->mod->rt->ordinal);
  std::vector<int> sorted = ordinals;
  std::sort(sorted.begin(), sorted.end());
  distinct = set.shards.size() > 1 && std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
  return ordinals;
}

}  // namespace

bool peer_access(udf_runtime* reader, udf_runtime* owner, bool must) {
  int can = 0;
  CU(cuDeviceCanAccessPeer, &can, reader->dev, owner->dev);
  if (!can) return false;
  CtxGuard g(reader->ctx);
  const CUresult r = cuda().cuCtxEnablePeerAccess(owner->ctx, 0);
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return true;
  if (must) cu_check(r, "cuCtxEnablePeerAccess");
  return false;
}

void make_group(udf_index* ix, bool with_nccl) {
  ShardedIndex& set = shards_of(ix);
  auto g = std::make_unique<ShardGroup>();
  udf_runtime* hrt = set.shards[0]->mod->rt;
  g->home_ctx = hrt->ctx;
  std::vector<const udf_runtime*> runtimes;
  for (auto& sh : set.shards) {
    udf_runtime* rt = sh->mod->rt;
    runtimes.push_back(rt);
    auto s = std::make_unique<ShardGroup::Shard>();
    s->ctx = rt->ctx;
    s->stream = rt->stream;
    s->home_device = rt->ordinal == hrt->ordinal;
    g->per.push_back(std::move(s));
  }
  {
    CtxGuard hg(hrt->ctx);
    g->home = std::make_unique<ShardGroup::Home>();
  }
  std::sort(runtimes.begin(), runtimes.end());
  g->distinct_runtimes = std::adjacent_find(runtimes.begin(), runtimes.end()) == runtimes.end();
  bool distinct = false;
  const std::vector<int> ordinals = shard_ordinals(set, distinct);
  if (with_nccl && distinct) apply(*g, start_nccl(ordinals, hrt));
  // Peer access (both ways) where the devices allow it: the peer copies
  // then go device to device.
  for (size_t i = 1; i < set.shards.size(); ++i) {
    udf_runtime* rt = set.shards[i]->mod->rt;
    if (rt->ordinal == hrt->ordinal) continue;
    peer_access(hrt, rt, true);
    peer_access(rt, hrt, true);
  }
  set.group = std::move(g);
}

TransportStart::TransportStart(udf_index* ix) : ix_(ix) {
  ShardedIndex& set = shards_of(ix);
  bool distinct = false;
  const std::vector<int> ordinals = shard_ordinals(set, distinct);
  if (!distinct) return;
  udf_runtime* hrt = set.shards[0]->mod->rt;
  thread_ = std::thread([this, ordinals, hrt] {
    try {
      result_ = std::make_unique<NcclStart>(start_nccl(ordinals, hrt));
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

void TransportStart::finish() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  if (result_) apply(*shards_of(ix_).group, std::move(*std::exchange(result_, nullptr)));
}

TransportStart::~TransportStart() {
  if (thread_.joinable()) thread_.join();
  if (result_ && result_->api)  // never applied (the build failed): the communicators go
    for (ncclComm_t c : result_->comms)
      if (c) result_->api->ncclCommDestroy(c);
}

}  // namespace udf::rt
