// Stage lists: the list layout on the GPU: rows to slots and back, and the
// move of whole lists into a larger layout (udf_index_add).
#pragma once
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_list_rows(udf_ivf_list_rows_args_v1 a) {
  const uint64_t total = uint64_t(a.n_rows) * a.chunks;
  for (uint64_t t = grid_thread(); t < total; t += grid_threads()) {
    const uint32_t r = static_cast<uint32_t>(t / a.chunks), j = static_cast<uint32_t>(t % a.chunks);
    const uint32_t s = a.slots[r];
    if (s == UDF_IVF_INDEX_V1_NO_SLOT) continue;  // a row another shard keeps
    auto* row = static_cast<unsigned char*>(a.rows) + uint64_t(r) * a.row_stride + uint64_t(j) * 16;
    auto* chunk = reinterpret_cast<uint4*>(static_cast<unsigned char*>(a.data) + uint64_t(s / 32) * a.group_bytes +
                                           uint64_t(j) * 512 + uint64_t(s % 32) * 16);
    auto* list_id = static_cast<long long*>(a.list_ids) + s;
    if (a.direction == 0) {
      const uint32_t n = min(16u, a.row_bytes - j * 16);
      uint4 v;
      if (n == 16 && (reinterpret_cast<unsigned long long>(row) & 15) == 0) {
        v = *reinterpret_cast<const uint4*>(row);
      } else {  // the row's last chunk, or rows not 16-byte aligned
        unsigned char b[16];
#pragma unroll
        for (uint32_t i = 0; i < 16; ++i) b[i] = i < n ? row[i] : 0;
        memcpy(&v, b, 16);
      }
      *chunk = v;
      if (j == 0) *list_id = a.ids ? static_cast<const long long*>(a.ids)[r] : static_cast<long long>(a.next_id + r);
    } else {
      *reinterpret_cast<uint4*>(row) = *chunk;
      if (j == 0) static_cast<long long*>(a.ids)[r] = *list_id;
    }
  }
}

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_move_lists(udf_ivf_move_lists_args_v1 a) {
  const uint32_t l = blockIdx.x;
  if (l >= a.n_lists) return;
  const uint32_t n = a.old_sizes[l];
  const uint64_t from = a.old_offsets[l], to = a.new_offsets[l];
  const uint64_t words = (uint64_t(n) + 31) / 32 * a.group_bytes / 16;
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const unsigned char*>(a.old_data) + from / 32 * a.group_bytes);
  uint4* dst = reinterpret_cast<uint4*>(static_cast<unsigned char*>(a.new_data) + to / 32 * a.group_bytes);
  for (uint64_t i = threadIdx.x; i < words; i += kThreads) dst[i] = src[i];
  const long long* si = static_cast<const long long*>(a.old_ids) + from;
  long long* di = static_cast<long long*>(a.new_ids) + to;
  for (uint32_t i = threadIdx.x; i < n; i += kThreads) di[i] = si[i];
}
