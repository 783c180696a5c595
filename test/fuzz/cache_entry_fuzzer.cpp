// The on-disk cache's entry reader (Cache::parse_entry: the checks get()
// applies to an entry file), for a fixed key and for the key the entry
// names, as it is and with the value's SHA-256 recomputed.  An accepted entry
// holds exactly the bytes after the header.
#include <algorithm>

#include "fuzz_util.h"
#include "udf/support/cache.h"

using namespace udf;

namespace {

void read(std::span<const std::uint8_t> entry, const std::string& key) {
  auto v = Cache::parse_entry(entry, key);
  if (!v) {
    UDF_FUZZ_CHECK(!v.error().message().empty());
    return;
  }
  UDF_FUZZ_CHECK(entry.size() == Cache::kHeaderSize + v->size());
  UDF_FUZZ_CHECK(std::equal(v->begin(), v->end(), entry.begin() + Cache::kHeaderSize));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> entry(data, size);
  const std::string fixed_key(64, 'a');
  read(entry, fixed_key);
  if (size < Cache::kHeaderSize) return 0;
  const std::string own_key = to_hex(entry.subspan(24, 32));
  read(entry, own_key);
  std::vector<std::uint8_t> fixed(entry.begin(), entry.end());
  fuzz::put_sha256(fixed, Cache::kHeaderSize, size - Cache::kHeaderSize, 56);
  read(fixed, own_key);
  return 0;
}
