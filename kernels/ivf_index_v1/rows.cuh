// Stage rows: the lists of an exact search or a refine, whose scans read a
// dataset's rows (ivf_flat_v1.h, ROWS LAYOUT): slot -> row tables, every
// query's probes (exact search), and each query's candidates checked and
// compacted and its direct schedule (refine).
#pragma once
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_rows_iota(udf_ivf_rows_args_v1 a) {
  for (uint64_t s = grid_thread(); s < a.n_slots; s += grid_threads())
    a.ids[s] = s < a.n_rows ? static_cast<long long>(s) : 0ll;
}

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_rows_probes(udf_ivf_rows_args_v1 a) {
  const uint64_t total = uint64_t(a.n_queries) * a.n_probes;
  for (uint64_t t = grid_thread(); t < total; t += grid_threads()) a.probes[t] = static_cast<uint32_t>(t % a.n_probes);
}

// Refine's candidates, one block a query.  A candidate is kept when it is
// a row (0 .. n_rows-1) that no earlier candidate of the query names; the
// kept ones are written in order.  Up to kHashed candidates a query, each
// is entered into a hash table in shared memory that keeps, for each id,
// the first position naming it (a 64-bit CAS claims a slot, atomicMin the
// position): a candidate is kept when it is its id's first.  Above, each
// candidate is compared with every earlier one (m^2 / 2 reads from L1).
constexpr uint32_t kHashed = 1024;               // candidates a query the hash table takes
constexpr uint32_t kHashSlots = 2 * kHashed;     // a power of two, at most half full
constexpr unsigned long long kEmpty = ~0ull;     // no id (ids are below 2^63)

__device__ __forceinline__ uint32_t id_hash(long long id) {
  uint64_t x = static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull;
  return static_cast<uint32_t>(x >> 40);
}

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_rows_candidates(udf_ivf_rows_args_v1 a) {
  const uint32_t q = blockIdx.x;
  if (q >= a.n_queries) return;
  const long long* c = a.candidates + uint64_t(q) * a.cand_stride;
  long long* out = a.ids + uint64_t(q) * a.m_pad;
  __shared__ uint32_t warp_kept[kThreads / 32];
  __shared__ unsigned long long slot_id[kHashSlots];
  __shared__ uint32_t slot_first[kHashSlots];
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const bool hashed = a.m <= kHashed;  // block-uniform
  // A row id, or -1 (padding, or out of range: *bad lowered to its position).
  auto row_of = [&](uint32_t j) -> long long {
    const long long id = c[j];
    if (id < -1 || (id >= 0 && static_cast<uint64_t>(id) >= a.n_rows)) {
      atomicMin(a.bad, static_cast<unsigned long long>(q) * a.m + j);
      return -1;
    }
    return id;
  };
  if (hashed) {
    for (uint32_t i = threadIdx.x; i < kHashSlots; i += kThreads) {
      slot_id[i] = kEmpty;
      slot_first[i] = 0xFFFFFFFFu;
    }
    __syncthreads();
    for (uint32_t j = threadIdx.x; j < a.m; j += kThreads) {
      const long long id = row_of(j);
      if (id < 0) continue;
      for (uint32_t h = id_hash(id) & (kHashSlots - 1);; h = (h + 1) & (kHashSlots - 1)) {
        const unsigned long long was = atomicCAS(&slot_id[h], kEmpty, static_cast<unsigned long long>(id));
        if (was == kEmpty || was == static_cast<unsigned long long>(id)) {
          atomicMin(&slot_first[h], j);
          break;
        }
      }
    }
    __syncthreads();
  }
  uint32_t written = 0;  // block-uniform
  for (uint32_t j0 = 0; j0 < a.m; j0 += kThreads) {
    const uint32_t j = j0 + threadIdx.x;
    bool keep = false;
    long long id = -1;
    if (j < a.m) {
      if (hashed) {
        id = c[j];  // checked above
        if (id >= 0 && static_cast<uint64_t>(id) < a.n_rows) {
          uint32_t h = id_hash(id) & (kHashSlots - 1);
          while (slot_id[h] != static_cast<unsigned long long>(id)) h = (h + 1) & (kHashSlots - 1);
          keep = slot_first[h] == j;
        }
      } else {
        id = row_of(j);
        keep = id >= 0;
        for (uint32_t i = 0; i < j && keep; ++i) keep = c[i] != id;
      }
    }
    const uint32_t ballot = __ballot_sync(kFull, keep);
    if (lane == 0) warp_kept[warp] = __popc(ballot);
    __syncthreads();
    uint32_t before = written, total = 0;
    for (uint32_t w = 0; w < kThreads / 32; ++w) {
      if (w < warp) before += warp_kept[w];
      total += warp_kept[w];
    }
    if (keep) out[before + __popc(ballot & ((1u << lane) - 1u))] = id;
    written += total;
    __syncthreads();  // warp_kept is read before the next round writes it
  }
  for (uint32_t i = written + threadIdx.x; i < a.m_pad; i += kThreads) out[i] = 0;
  if (threadIdx.x == 0) {
    a.sizes[q] = written;
    a.offsets[q] = uint64_t(q) * a.m_pad;
  }
}

// Refine's direct schedule: rows row0 .. row0 + n_queries - 1 of the chunk,
// each query's own list in one item (ivf_index_v1.h, ROWS).
extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_rows_direct(udf_ivf_rows_args_v1 a) {
  auto* items = static_cast<udf_ivf_work_item_v1*>(a.sched_items);
  auto* pairs = static_cast<udf_ivf_pair_v1*>(a.sched_pairs);
  for (uint64_t t = grid_thread(); t < a.n_queries; t += grid_threads()) {
    const uint32_t r = a.row0 + static_cast<uint32_t>(t);
    const uint32_t list = a.list_base + r;
    const uint32_t size = a.sizes[list];
    items[r] = udf_ivf_work_item_v1{list, 0u, 0xFFFFFFFFu, r, 1u, 0u};
    pairs[r] = udf_ivf_pair_v1{r, r};
    if (a.row_ranges != nullptr) {
      a.row_ranges[2 * uint64_t(r)] = r;
      a.row_ranges[2 * uint64_t(r) + 1] = r + 1;
    } else {
      a.query_rows[r] = r;
      if (r + 1 == a.chunk_rows) a.query_rows[a.chunk_rows] = a.chunk_rows;
    }
    // One 16-byte store a query where it can be (the statistics are often
    // mapped host memory, where every store is a bus transaction).
    const uint4 st = make_uint4(size, 0u, (size + 31) / 32, 0u);
    uint32_t* at = a.query_stats + 4 * uint64_t(r);
    if (reinterpret_cast<uintptr_t>(a.query_stats) % 16 == 0) {
      *reinterpret_cast<uint4*>(at) = st;
    } else {
      at[0] = st.x;
      at[1] = st.y;
      at[2] = st.z;
      at[3] = st.w;
    }
  }
}
