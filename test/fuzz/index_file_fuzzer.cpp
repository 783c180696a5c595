// The IVF index file reader (lib/runtime/index/index_file.h: what udf_index_load
// parses before it touches the GPU), as it is and with its trailing SHA-256
// recomputed.  An accepted file has the shape its header announces and a
// header udf_index_build could have written; no input allocates more than
// its own size (-rss_limit_mb catches one that does).
#include <cmath>

#include "fuzz_util.h"
#include "index/index_file.h"

using namespace udf;
using namespace udf::rt;

namespace {

void read(std::span<const std::uint8_t> bytes) {
  auto h = parse_index_file_header(bytes, "fuzz.udfi");
  if (!h) return;
  UDF_FUZZ_CHECK(h->elem <= 3 && h->dim >= 1 && h->dim <= kMaxDim && h->n_lists >= 1 && h->n_lists <= kMaxLists);
  UDF_FUZZ_CHECK(h->size >= 0 && h->lists_offset <= bytes.size() - kIndexFileTrailer);
  // What udf_index_build accepts, and udf_index_add relies on.
  UDF_FUZZ_CHECK(std::isfinite(h->balance) && (h->balance == 0 || h->balance >= 1));
  auto l = parse_index_file_lists(bytes, *h, "fuzz.udfi");
  if (!l) return;
  UDF_FUZZ_CHECK(l->centroids.size() == std::size_t(h->n_lists) * h->dim);
  UDF_FUZZ_CHECK(l->ids.size() == h->n_lists && l->vecs.size() == h->n_lists);
  std::uint64_t total = 0;
  for (std::uint32_t i = 0; i < h->n_lists; ++i) {
    UDF_FUZZ_CHECK(l->vecs[i].size() == l->ids[i].size() * h->dim * h->elem_size());
    total += l->ids[i].size();
  }
  UDF_FUZZ_CHECK(total == static_cast<std::uint64_t>(h->size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> bytes(data, size);
  read(bytes);
  if (size >= 8 + kIndexFileTrailer) {
    std::vector<std::uint8_t> fixed(bytes.begin(), bytes.end());
    fuzz::put_sha256(fixed, 0, size - kIndexFileTrailer, size - kIndexFileTrailer);
    read(fixed);
  }
  return 0;
}
