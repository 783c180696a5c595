// The reading of a file made elsewhere (a FAISS or cuVS index,
// index/faiss_file.cpp, index/cuvs_file.cpp): fields in order, each checked
// against the bytes left before it is read, the first bad one the error --
// "PATH: FORMAT: FIELD at byte N: WHY".  Parse-only (no GPU, no exceptions).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>

#include "udf/support/error.h"

namespace udf::rt {

struct FieldReader {
  std::span<const std::uint8_t> b;
  const std::string& path;
  const char* format;  // "FAISS IndexIVFFlat", "cuVS IVF-Flat"
  std::size_t pos = 0;
  std::optional<Error> error;

  bool fail(std::size_t at, const std::string& field, const std::string& why) {
    if (!error)
      error = diagnosed(DiagCode::BadDataFile,
                        path + ": " + format + ": " + field + " at byte " + std::to_string(at) + ": " + why);
    return false;
  }
  bool need(std::uint64_t n, const std::string& field) {
    if (error) return false;
    if (n <= b.size() - pos) return true;
    return fail(pos, field, "truncated (needs " + std::to_string(n) + " bytes, " + std::to_string(b.size() - pos) +
                                " left)");
  }
  bool expect(std::size_t at, bool ok, const std::string& field, const std::string& why) {
    return ok || fail(at, field, why);
  }
  // A plain little-endian value.
  template <class T> T get(const std::string& field) {
    T v{};
    if (!need(sizeof(T), field)) return v;
    std::memcpy(&v, b.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
};

}  // namespace udf::rt
