// For the file readers' tests: every allocation above 256 MB fails, so a
// reader that allocates what a header announces before checking that the
// file holds it shows up as std::bad_alloc.  Include it in one source file
// of a test binary (it replaces the global operator new and delete).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace udf_test {
inline constexpr std::size_t kAllocationLimit = std::size_t(256) << 20;
}  // namespace udf_test

void* operator new(std::size_t n) {
  if (n > udf_test::kAllocationLimit) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
