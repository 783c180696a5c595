// Shared by the fuzz targets: invariant checks that abort (libFuzzer then
// saves the input as a crash) and a fix-up that recomputes checksums, so
// that mutations get past them and reach the checks behind them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "udf/support/hash.h"

namespace udf::fuzz {

/// Stops the run: an invariant of an accepted input does not hold.
[[noreturn]] inline void invariant_failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", file, line, what);
  std::abort();
}

#define UDF_FUZZ_CHECK(cond) \
  do {                        \
    if (!(cond)) ::udf::fuzz::invariant_failed(#cond, __FILE__, __LINE__); \
  } while (0)

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// A little-endian unsigned integer of `n` bytes at `at` (0 past the end).
inline std::uint64_t le(std::span<const std::uint8_t> b, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    if (at + i < b.size()) v |= static_cast<std::uint64_t>(b[at + i]) << (8 * i);
  return v;
}

/// Writes the SHA-256 of bytes [from, from + n) at `at`, when both ranges lie in `b`.
inline void put_sha256(std::vector<std::uint8_t>& b, std::uint64_t from, std::uint64_t n, std::uint64_t at) {
  if (from > b.size() || n > b.size() - from || at > b.size() || 32 > b.size() - at) return;
  Sha256 h = sha256(std::span<const std::uint8_t>(b.data() + from, n));
  std::memcpy(b.data() + at, h.data(), 32);
}

/// The artifact/module container with every section's SHA-256 and the
/// trailing one recomputed (lib/artifact/container.h gives the layout).
inline std::vector<std::uint8_t> fix_container_checksums(std::span<const std::uint8_t> in) {
  std::vector<std::uint8_t> b(in.begin(), in.end());
  if (b.size() < 64 + 32) return b;
  const std::uint64_t n = le(b, 24, 4), table = le(b, 32, 8);
  for (std::uint64_t i = 0; i < n && i < 4096; ++i) {
    const std::uint64_t e = table + 64 * i;
    if (e > b.size() || 64 > b.size() - e) break;
    put_sha256(b, le(b, e + 8, 8), le(b, e + 16, 8), e + 24);
  }
  put_sha256(b, 0, b.size() - 32, b.size() - 32);
  return b;
}

}  // namespace udf::fuzz
