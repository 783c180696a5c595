// Dense vector files: .fvecs / .bvecs / .ivecs (the TEXMEX formats) and NumPy
// .npy (format 1.0-3.0, C order).  Reading validates everything before
// handing anything out; errors name the file and what is wrong (truncated,
// bad header, dimension mismatch, unsupported dtype).  Writing is atomic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "udf/support/error.h"
#include "udf/support/fs.h"

namespace udf {

enum class DType { F32, F16, I8, U8, I32, I64, F64 };

std::string_view to_string(DType t);     // "f32", ...
std::size_t dtype_size(DType t);
std::string_view npy_descr(DType t);     // "<f4", "|i1", ...

/// A row-major matrix: rows x cols elements of dtype, packed.  A 1-D .npy
/// array reads as rows = n, cols = 1 with one_d = true.
struct HostMatrix {
  DType dtype = DType::F32;
  std::uint64_t rows = 0;
  std::uint64_t cols = 0;
  bool one_d = false;
  Bytes data;

  std::size_t bytes() const { return static_cast<std::size_t>(rows * cols) * dtype_size(dtype); }
  template <typename T> const T* as() const { return reinterpret_cast<const T*>(data.data()); }
  template <typename T> T* as() { return reinterpret_cast<T*>(data.data()); }
};

/// Parses a whole .npy file held in memory.  `name` is used in diagnostics.
Expected<HostMatrix> parse_npy(std::span<const std::uint8_t> bytes, const std::string& name);
/// Parses .fvecs (f32), .bvecs (u8) or .ivecs (i32) bytes; every record must have the same dimension.
Expected<HostMatrix> parse_vecs(std::span<const std::uint8_t> bytes, DType elem, const std::string& name);

/// Reads a vector file, choosing the format by extension: .fvecs .bvecs .ivecs .npy.
Expected<HostMatrix> read_vector_file(const std::string& path);

/// The .npy bytes of a matrix (format 1.0; 2-D, or 1-D when m.one_d).
Bytes serialize_npy(const HostMatrix& m);
Expected<void> write_npy(const std::string& path, const HostMatrix& m);

/// Converts to a new dtype (f16 <-> f32 included).  Integer targets must hold
/// the values; otherwise an error names the first one that does not fit.
Expected<HostMatrix> convert(const HostMatrix& m, DType to, const std::string& name);

float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);

}  // namespace udf
