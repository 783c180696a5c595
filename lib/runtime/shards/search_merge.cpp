// A sharded search's results brought together on the first device: the
// host merge of small batches, or the gather (NCCL or peer copies) and the
// merge kernel (kernels/shard_merge.cuh's placement either way).
#include <algorithm>

#include "cuda/context.h"
#include "cuda/launch.h"
#include "cuda/tensors.h"
#include "shards/search_state.h"
#include "udf/kernels/ivf_index_v1.h"
#include "shard_merge.cuh"

namespace udf::rt {

namespace {

// Copies the merged rows (k apart in `src`) to a chunk's output rows: device
// outputs on the stream; host outputs into `pinned` (host_rows copies them
// on once the stream has reached the copy).
void put_rows(const udf_tensor& t, int64_t stride, CUdeviceptr src, size_t es, uint32_t m, uint32_t k, CUstream stream,
              std::uint8_t* pinned) {
  auto* base = static_cast<std::uint8_t*>(t.data);
  if (t.device == UDF_HOST_DEVICE) {
    CU(cuMemcpyDtoHAsync, pinned, src, size_t(m) * k * es, stream);
    return;
  }
  if (stride == static_cast<int64_t>(k)) {
    CU(cuMemcpyDtoDAsync, reinterpret_cast<CUdeviceptr>(base), src, size_t(m) * k * es, stream);
    return;
  }
  for (uint32_t q = 0; q < m; ++q)
    CU(cuMemcpyDtoDAsync, reinterpret_cast<CUdeviceptr>(base + size_t(q) * stride * es), src + size_t(q) * k * es, k * es,
       stream);
}

// The merged rows from pinned staging on to a host output (contiguous rows
// on the home runtime's copy workers).
void host_rows(udf_runtime* rt, const udf_tensor& t, int64_t stride, const std::uint8_t* pinned, size_t es, uint32_t m,
               uint32_t k) {
  if (t.device == UDF_HOST_DEVICE) host_rows_to(rt, static_cast<std::uint8_t*>(t.data), size_t(stride) * es, pinned, m, k * es);
}

void gather_nccl(const ShardedSearch& ss, const ShardChunk& c) {
  const ShardGroup& g = *ss.group;
  ShardGroup::Home& home = *ss.home;
  const size_t per_shard = c.per_shard;
  const NcclApi& nc = *g.nccl_api;
  nccl_check(nc.ncclGroupStart(), "ncclGroupStart");
  for (uint32_t s = 1; s < ss.n_shards; ++s) {
    const ShardGroup::Shard& sh = *g.per[s];
    nccl_check(nc.ncclSend(sh.dists.as<void>(), per_shard * 4, kNcclUint8, 0, g.comms[s], sh.stream), "ncclSend");
    nccl_check(nc.ncclSend(sh.ids.as<void>(), per_shard * 8, kNcclUint8, 0, g.comms[s], sh.stream), "ncclSend");
    if (ss.by_vectors)
      nccl_check(nc.ncclSend(sh.keys.as<void>(), per_shard * 8, kNcclUint8, 0, g.comms[s], sh.stream), "ncclSend");
    nccl_check(nc.ncclRecv(home.gather_dists.as<std::uint8_t>() + s * per_shard * 4, per_shard * 4, kNcclUint8,
                           static_cast<int>(s), g.comms[0], ss.home_stream),
               "ncclRecv");
    nccl_check(nc.ncclRecv(home.gather_ids.as<std::uint8_t>() + s * per_shard * 8, per_shard * 8, kNcclUint8,
                           static_cast<int>(s), g.comms[0], ss.home_stream),
               "ncclRecv");
    if (ss.by_vectors)
      nccl_check(nc.ncclRecv(home.gather_keys.as<std::uint8_t>() + s * per_shard * 8, per_shard * 8, kNcclUint8,
                             static_cast<int>(s), g.comms[0], ss.home_stream),
                 "ncclRecv");
  }
  nccl_check(nc.ncclGroupEnd(), "ncclGroupEnd");
  // NCCL may have made another device's context current: the first one's again.
  CUcontext top = nullptr;
  CU(cuCtxPopCurrent, &top);
  CU(cuCtxPushCurrent, g.home_ctx);
}

void gather_peer(const ShardedSearch& ss, const ShardChunk& c) {
  ShardGroup& g = *ss.group;
  ShardGroup::Home& home = *ss.home;
  const size_t per_shard = c.per_shard;
  const CUstream s0 = ss.home_stream;
  for (uint32_t s = 1; s < ss.n_shards; ++s) {
    ShardGroup::Shard& sh = *g.per[s];
    CU(cuStreamWaitEvent, s0, sh.searched.get(), 0);
    if (sh.home_device) continue;
    CU(cuMemcpyPeerAsync, home.gather_dists.get() + s * per_shard * 4, g.home_ctx, sh.dists.get(), sh.ctx, per_shard * 4, s0);
    CU(cuMemcpyPeerAsync, home.gather_ids.get() + s * per_shard * 8, g.home_ctx, sh.ids.get(), sh.ctx, per_shard * 8, s0);
    if (ss.by_vectors)
      CU(cuMemcpyPeerAsync, home.gather_keys.get() + s * per_shard * 8, g.home_ctx, sh.keys.get(), sh.ctx, per_shard * 8, s0);
  }
}

}  // namespace

void merge_on_host(const ShardedSearch& ss, const ShardChunk& c) {
  const ShardGroup& g = *ss.group;
  const uint32_t n_shards = static_cast<uint32_t>(g.per.size()), k = ss.k;
  const size_t ids_at = c.ids_at, keys_at = c.keys_at;  // keys_at: by vectors, the tie keys' offset (0: none)
  const bool max_order = ss.max_order;
  const int64_t dstride = ss.call.dist_stride, istride = ss.call.id_stride;
  auto* od = static_cast<float*>(ss.call.out_dists->data) + size_t(c.q0) * size_t(dstride);
  auto* oi = static_cast<long long*>(ss.call.out_ids->data) + size_t(c.q0) * size_t(istride);
  for (uint32_t q = 0; q < c.m; ++q) {
    auto rows = [&](uint32_t t) { return g.per[t]->rows.as<const float>() + size_t(q) * k; };
    auto ties = [&](uint32_t t) {
      return reinterpret_cast<const long long*>(g.per[t]->rows.as<const std::uint8_t>() + keys_at) + size_t(q) * k;
    };
    for (uint32_t s = 0; s < n_shards; ++s) {
      const float* d = rows(s);
      const long long* ids = reinterpret_cast<const long long*>(g.per[s]->rows.as<const std::uint8_t>() + ids_at) + size_t(q) * k;
      for (uint32_t pos = 0; pos < k; ++pos) {
        const uint32_t at = keys_at ? udf_shard_merge::place(rows, ties, n_shards, k, max_order, s, pos)
                                    : udf_shard_merge::place(rows, n_shards, k, max_order, s, pos);
        if (at < k) {
          od[size_t(q) * dstride + at] = d[pos];
          oi[size_t(q) * istride + at] = ids[pos];
        }
      }
    }
  }
}

void gather_results(const ShardedSearch& ss, const ShardChunk& c) {
  if (ss.group->transport == "nccl")
    gather_nccl(ss, c);
  else
    gather_peer(ss, c);
}

bool merge_on_device(const ShardedSearch& ss, const ShardChunk& c) {
  ShardGroup& g = *ss.group;
  ShardGroup::Home& home = *ss.home;
  const uint32_t k = ss.k, m = c.m;
  const size_t per_shard = c.per_shard;
  const int64_t dstride = ss.call.dist_stride, istride = ss.call.id_stride;
  const CUstream s0 = ss.home_stream;
  // The merge, into the outputs when they are contiguous device memory,
  // or into the pinned staging (mapped: no copy after the merge) when both
  // are host memory and a small batch; otherwise into scratch, copied on.
  udf_tensor od = rows_of(*ss.call.out_dists, dstride, c.q0, m), oi = rows_of(*ss.call.out_ids, istride, c.q0, m);
  const bool direct = od.device != UDF_HOST_DEVICE && oi.device != UDF_HOST_DEVICE && dstride == k && istride == k;
  const bool mapped = od.device == UDF_HOST_DEVICE && oi.device == UDF_HOST_DEVICE && m <= 1024;
  CUdeviceptr md, mi;
  if (direct) {
    md = reinterpret_cast<CUdeviceptr>(od.data);
    mi = reinterpret_cast<CUdeviceptr>(oi.data);
  } else if (mapped) {
    home.h_out.ensure(per_shard * 12, "staged results");
    md = home.h_out.device();
    mi = home.h_out.device() + per_shard * 4;
  } else {
    ensure(g, home.merged, per_shard * 12, "merged results");
    md = home.merged.get();
    mi = home.merged.get() + per_shard * 4;
  }
  udf_ivf_shard_merge_args_v1 a{home.gather_dists.as<const float>(), home.gather_ids.as<const long long>(),
                                reinterpret_cast<float*>(md), reinterpret_cast<long long*>(mi), per_shard, ss.n_shards, m, k,
                                ss.max_order ? 1u : 0u, ss.by_vectors ? home.gather_keys.as<const long long>() : nullptr};
  const uint64_t threads = ss.n_shards * per_shard;
  const auto grid = static_cast<unsigned>(std::min<uint64_t>((threads + UDF_IVF_INDEX_V1_THREADS - 1) / UDF_IVF_INDEX_V1_THREADS,
                                                             uint64_t(1) << 16));
  launch_on(s0, ss.home_rt->kernels[IndexKernel::shard_merge], grid, 1, UDF_IVF_INDEX_V1_THREADS, 0, &a);
  if (mapped) {
    CU(cuStreamSynchronize, s0);
    host_rows(ss.home_rt, od, dstride, home.h_out.as<std::uint8_t>(), 4, m, k);
    host_rows(ss.home_rt, oi, istride, home.h_out.as<std::uint8_t>() + per_shard * 4, 8, m, k);
  } else if (!direct) {
    const bool host = od.device == UDF_HOST_DEVICE || oi.device == UDF_HOST_DEVICE;
    if (host) home.h_out.ensure(per_shard * 12, "staged results");
    put_rows(od, dstride, md, 4, m, k, s0, home.h_out.as<std::uint8_t>());
    put_rows(oi, istride, mi, 8, m, k, s0, home.h_out.as<std::uint8_t>() + per_shard * 4);
    if (host) {
      CU(cuStreamSynchronize, s0);
      host_rows(ss.home_rt, od, dstride, home.h_out.as<std::uint8_t>(), 4, m, k);
      host_rows(ss.home_rt, oi, istride, home.h_out.as<std::uint8_t>() + per_shard * 4, 8, m, k);
    }
  }
  return mapped;
}

}  // namespace udf::rt
