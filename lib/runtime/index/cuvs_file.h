// A cuVS IVF-Flat index file (cuvs::neighbors::ivf_flat::serialize,
// cpp/src/neighbors/ivf_flat/ivf_flat_serialize.cuh; Python's
// cuvs.neighbors.ivf_flat.save) as bytes: parsing only -- no GPU, no module,
// no exceptions -- so that the fuzz target (test/fuzz/cuvs_file_fuzzer.cpp)
// and unit tests can run it alone.  capi/cuvs_api.cpp loads such a file as an
// index of this runtime; cuvs_to_index_file writes it in this runtime's index
// file format.  Two serialization versions are read: 4 (cuVS 25.02 to 26.08,
// read in the source at rapidsai/cuvs ff0c8076bf2f8d354bc21039ebffa14a1c9128a3)
// and 5 (cuVS 26.10: that source is not in the snapshot read, so version 5 is
// what the files cuvs-cu13 26.10.0 wrote, test/data/cuvs_26_10/, hold;
// docs/bring-your-index.md).
//
// What is read, in order (little-endian):
//   char[4] dtype: "<f4\0" (float), "<e2\0" (half; cuVS 26.10 writes "<f2\0",
//     its list blocks below staying '<e2'), "|i1\0" (int8_t), "|u1\0" (uint8_t);
//   NumPy .npy blocks (raft::serialize_scalar / serialize_mdspan): "\x93NUMPY",
//   version 1.0, u16 header length, the header "{'descr': ..., 'fortran_order':
//   False, 'shape': (...)}" padded with spaces and "\n", then the data:
//     scalar '<i4' serialization version (4 or 5),
//     scalar '<i8' size (the index's rows; IdxT is int64_t),
//     scalar '<u4' dim, scalar '<u4' n_lists,
//     scalar metric (cuvs::distance::DistanceType: '<i4' from cuVS 25.12, where
//       it is an enum class of int; '<u4' before, the C enum cuvsDistanceType),
//     scalar '|u1' adaptive_centers, scalar '|u1' conservative_memory_allocation,
//     '<f4' (n_lists, dim) centers,
//     scalar '|u1' has_norms, and when 1 '<f4' (n_lists,) center norms (skipped),
//     '<u4' (n_lists,) list sizes,
//     per list, with s its list size and p = s rounded up to 32:
//       version 4: scalar '<u4' p, and when p > 0 the list's data (p, dim) of
//         the dtype and its indices '<i8' (p,);
//       version 5: scalar '<u4' s, and when s > 0 the list's data (p, dim) of
//         the dtype and its indices '<i8' (s,) -- with the half prefix "<f2",
//         all that differs from the files of cuVS 26.08.
// A list's data is interleaved in groups of 32 rows: row r's component c is
// element (r / 32) * 32 * dim + (c / veclen) * 32 * veclen + (r % 32) * veclen
// + c % veclen, veclen = 16 / sizeof(T) when it divides dim, else 1.  Rows past
// the list size are padding (in version 4 with indices kInvalidRecord) and are
// not read.
// Every shape is checked against the bytes left before anything is allocated.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "udf/support/error.h"

namespace udf::rt {

/// cuVS's DistanceType values this reader takes (cuvs/distance/distance.hpp).
inline constexpr std::int32_t kCuvsL2Expanded = 0, kCuvsL2SqrtExpanded = 1, kCuvsCosineExpanded = 2,
                              kCuvsInnerProduct = 6;
/// The IVF-Flat serialization versions this reader follows (cuVS 25.02 to
/// 26.08 write 4, cuVS 26.10 writes 5).
inline constexpr std::int32_t kCuvsIvfFlatVersion4 = 4, kCuvsIvfFlatVersion5 = 5;

/// A cuVS IVF-Flat index as this runtime holds it: the lists row-major, the
/// centroids in the space this runtime's coarse probe compares raw elements
/// with (cuVS scales int8 elements by 1/128 and uint8 by 1/256 before it
/// compares them with its centers: those centers are scaled back, by 128 and
/// 256, both powers of two, so exactly), and for CosineExpanded the vectors
/// and centroids L2-normalized (this runtime's cosine index stores them so).
struct CuvsIvfFlat {
  std::uint32_t elem = 0;  // udf_dtype: 0 f32, 1 f16, 2 i8, 3 u8
  std::uint32_t dim = 0;
  std::uint32_t n_lists = 0;
  std::int64_t size = 0;
  std::int32_t version = kCuvsIvfFlatVersion5;  // the file's serialization version
  std::int32_t metric = kCuvsL2Expanded;  // kCuvs*
  bool adaptive_centers = false;
  bool conservative_memory_allocation = false;
  std::uint32_t veclen = 1;                     // cuVS's interleaving of the lists
  std::vector<float> centroids;                 // [n_lists][dim]
  std::vector<std::vector<std::int64_t>> ids;   // per list, cuVS's order
  std::vector<std::vector<std::uint8_t>> vecs;  // per list, [size][dim] elements

  std::size_t elem_size() const { return elem == 0 ? 4 : elem == 1 ? 2 : 1; }
};

/// Reads a file cuvs::neighbors::ivf_flat::serialize wrote.  Errors name
/// `path`, the field and its byte offset.
Expected<CuvsIvfFlat> parse_cuvs_ivf_flat(std::span<const std::uint8_t> file, const std::string& path);

/// cuVS's name of a DistanceType value ("InnerProduct"; "DistanceType 7" for
/// one this reader does not take).
std::string cuvs_metric_name(std::int32_t metric);

/// This runtime's coarse metric for the index's: UDF_IVF_INDEX_V1_L2 for
/// L2Expanded and L2SqrtExpanded, UDF_IVF_INDEX_V1_IP for InnerProduct and,
/// with the normalized bit 0x100, for CosineExpanded (the index file's field).
std::uint32_t cuvs_coarse(const CuvsIvfFlat& f);

/// The same index in this runtime's index file format (index/index_file.h):
/// elem and coarse as above, balance 0, next_id after the largest id, the
/// lists as cuVS has them, bound to metric `symbol` with artifact `cache_key`.
std::vector<std::uint8_t> cuvs_to_index_file(const CuvsIvfFlat& f, const std::string& symbol,
                                             const std::string& cache_key);

}  // namespace udf::rt
