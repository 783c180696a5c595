// The IVF index file (udf_index_save / udf_index_load) as bytes: parsing
// only -- no GPU, no module, no exceptions -- so that the fuzz target
// (test/fuzz/index_file_fuzzer.cpp) and unit tests can run it alone.
// index/index_io.cpp writes the format and loads files through these functions.
//
// Layout (little-endian; docs/runtime.md):
//   magic "\x89UDFIVF\n", u32 major = 1, u32 minor = 0 (1 with coarse weights),
//   u32 elem (udf_dtype 0..3), u32 dim, u32 n_lists,
//   u32 coarse (UDF_IVF_INDEX_V1_L2 / _IP, | 0x100: normalized, | 0x200: coarse weights),
//   i64 size, i64 next_id, f64 balance, str symbol, str cache_key (u32 length + bytes),
//   with coarse weights: f32 coarse_weights[dim] (minor 1; files without them are 1.0),
//   f32 centroids[n_lists][dim], u64 list_size[n_lists],
//   per list: i64 ids[list_size], elements[list_size][dim],
//   sha256 of every byte before it.
// Not installed; private to lib/runtime (and the fuzz target).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "udf/support/error.h"

namespace udf::rt {

inline constexpr char kIndexFileMagic[8] = {'\x89', 'U', 'D', 'F', 'I', 'V', 'F', '\n'};
inline constexpr std::uint32_t kIndexFileMajor = 1, kIndexFileMinor = 0;
inline constexpr std::uint32_t kIndexFileMinorWeights = 1;  // the minor of a file with coarse weights
inline constexpr std::uint32_t kCoarseNormalized = 0x100, kCoarseWeights = 0x200;  // flags of `coarse`
inline constexpr std::uint32_t kMaxLists = 16384;
inline constexpr std::uint32_t kMaxDim = 65536;
inline constexpr std::size_t kIndexFileTrailer = 32;  // the SHA-256

/// The fixed fields, the metric's symbol and cache key.
struct IndexFileHeader {
  std::uint32_t major = 0, minor = 0;
  std::uint32_t elem = 0;   // udf_dtype: f32, f16, i8, u8
  std::uint32_t dim = 0;
  std::uint32_t n_lists = 0;
  std::uint32_t coarse = 0;  // UDF_IVF_INDEX_V1_L2 / _IP, | kCoarseNormalized, | kCoarseWeights
  std::vector<float> coarse_weights;  // [dim] with kCoarseWeights, else empty
  std::int64_t size = 0;
  std::int64_t next_id = 0;
  double balance = 0;
  std::string symbol;
  std::string cache_key;
  std::size_t lists_offset = 0;  // where the centroids start

  std::size_t elem_size() const { return elem == 0 ? 4 : elem == 1 ? 2 : 1; }
};

/// The centroids and the lists (host layout: per list, row-major elements).
struct IndexFileLists {
  std::vector<float> centroids;                  // [n_lists][dim]
  std::vector<std::vector<std::int64_t>> ids;    // per list
  std::vector<std::vector<std::uint8_t>> vecs;   // per list, [size][dim] elements
};

/// Checks the magic, the version, the checksum and the header fields.
/// Errors (the file is not a valid index file) name `path`.
Expected<IndexFileHeader> parse_index_file_header(std::span<const std::uint8_t> file, const std::string& path);

/// Reads the centroids and lists after a header parse_index_file_header accepted.
Expected<IndexFileLists> parse_index_file_lists(std::span<const std::uint8_t> file, const IndexFileHeader& h,
                                                const std::string& path);

/// An index file's bytes, for an index made elsewhere (faiss_file.h,
/// cuvs_file.h): h's fixed fields (its major, minor and lists_offset are not
/// read: this runtime's version is written), symbol, cache key and coarse
/// weights, then
/// `centroids` ([n_lists][dim] f32), the list sizes (ids[l].size()), each
/// list's ids and elements ([size][dim] of h.elem), and the checksum.
std::vector<std::uint8_t> index_file_bytes(const IndexFileHeader& h, const std::vector<float>& centroids,
                                           const std::vector<std::vector<std::int64_t>>& ids,
                                           const std::vector<std::vector<std::uint8_t>>& vecs);

/// The id after the largest of `ids` (0 for none; saturates at INT64_MAX):
/// where udf_index_add without ids continues.
std::int64_t next_id_after(const std::vector<std::vector<std::int64_t>>& ids);

}  // namespace udf::rt
