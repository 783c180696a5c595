// A FAISS IndexIVFFlat file (faiss::write_index, faiss/impl/index_write.cpp)
// as bytes: parsing only -- no GPU, no module, no exceptions -- so that the
// fuzz target (test/fuzz/faiss_file_fuzzer.cpp) and unit tests can run it
// alone.  capi/faiss_api.cpp loads such a file as an index of this runtime;
// faiss_to_index_file writes it in this runtime's index file format.
//
// What is read (little-endian; FAISS's idx_t is int64, its size_t uint64):
//   u32 fourcc "IwFl" (IndexIVFFlat),
//   index header: i32 d, i64 ntotal, i64 dummy, i64 dummy, u8 is_trained,
//     i32 metric_type (0 METRIC_INNER_PRODUCT, 1 METRIC_L2; others refused),
//   u64 nlist, u64 nprobe,
//   the quantizer: u32 fourcc "IxF2" (IndexFlatL2) or "IxFI" (IndexFlatIP),
//     its index header (d, ntotal = nlist, the same metric), u64 n (floats / 1),
//     f32 centroids[n] (n = nlist * d),
//   the direct map: u8 type (0 none, 1 array, 2 hash table), u64 n, i64[n],
//     and for a hash table u64 n, (i64, i64)[n],
//   the inverted lists: u32 fourcc "ilar" (ArrayInvertedLists; "il00" and the
//     other kinds, e.g. OnDiskInvertedLists, are refused), u64 nlist,
//     u64 code_size (= 4 * d), u32 "full" + u64 n + u64 sizes[nlist], or
//     u32 "sprs" + u64 n + (u64 list, u64 size)[n / 2] (the non-empty lists),
//     then per non-empty list in order: f32 vectors[size][d], i64 ids[size].
// Every count is checked against the bytes left before anything is allocated.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "udf/support/error.h"

namespace udf::rt {

/// FAISS's MetricType values this reader takes.
inline constexpr std::int32_t kFaissMetricInnerProduct = 0, kFaissMetricL2 = 1;

/// An IndexIVFFlat: its quantizer's centroids and its lists, as FAISS has them.
struct FaissIvfFlat {
  std::uint32_t dim = 0;
  std::uint32_t n_lists = 0;
  std::int64_t size = 0;                        // ntotal
  std::int32_t metric = kFaissMetricL2;         // kFaissMetric*
  std::vector<float> centroids;                 // [n_lists][dim]
  std::vector<std::vector<std::int64_t>> ids;   // per list
  std::vector<std::vector<std::uint8_t>> vecs;  // per list, [size][dim] f32
};

/// Reads a file faiss::write_index wrote for an IndexIVFFlat.  Errors name
/// `path`, the field and its byte offset.
Expected<FaissIvfFlat> parse_faiss_ivf_flat(std::span<const std::uint8_t> file, const std::string& path);

/// The id after the largest (0 for an empty index; saturates at INT64_MAX).
std::int64_t faiss_next_id(const FaissIvfFlat& f);

/// The same index in this runtime's index file format (index/index_file.h):
/// elem f32, coarse L2 or IP from the FAISS metric, balance 0, next_id
/// faiss_next_id, the lists as FAISS has them, bound to metric `symbol` with
/// artifact `cache_key`.
std::vector<std::uint8_t> faiss_to_index_file(const FaissIvfFlat& f, const std::string& symbol,
                                              const std::string& cache_key);

}  // namespace udf::rt
