// The cuVS IVF-Flat reader (lib/runtime/index/cuvs_file.h: what
// udf_index_load_cuvs parses before it touches the GPU).  An accepted file
// has the shape its scalars announce, and its conversion to this runtime's
// index file (cuvs_to_index_file) parses back to the same centroids (all
// finite) and lists; no input allocates more than its own size (-rss_limit_mb
// catches one that does).
#include <cmath>
#include <cstring>

#include "fuzz_util.h"
#include "index/cuvs_file.h"
#include "index/index_file.h"

using namespace udf;
using namespace udf::rt;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto f = parse_cuvs_ivf_flat(std::span<const std::uint8_t>(data, size), "fuzz.cuvs");
  if (!f) return 0;
  UDF_FUZZ_CHECK(f->elem <= 3 && f->dim >= 1 && f->dim <= kMaxDim && f->n_lists >= 1 && f->n_lists <= kMaxLists);
  UDF_FUZZ_CHECK(f->metric == kCuvsL2Expanded || f->metric == kCuvsL2SqrtExpanded ||
                 f->metric == kCuvsInnerProduct || f->metric == kCuvsCosineExpanded);
  UDF_FUZZ_CHECK(f->metric != kCuvsCosineExpanded || f->elem <= 1);
  UDF_FUZZ_CHECK(f->veclen >= 1 && f->dim % f->veclen == 0);
  UDF_FUZZ_CHECK(f->centroids.size() == std::size_t(f->n_lists) * f->dim);
  UDF_FUZZ_CHECK(f->ids.size() == f->n_lists && f->vecs.size() == f->n_lists);
  std::uint64_t total = 0;
  for (std::uint32_t l = 0; l < f->n_lists; ++l) {
    UDF_FUZZ_CHECK(f->vecs[l].size() == f->ids[l].size() * f->dim * f->elem_size());
    total += f->ids[l].size();
  }
  UDF_FUZZ_CHECK(total == static_cast<std::uint64_t>(f->size));
  const auto file = cuvs_to_index_file(*f, "l2", "key");
  auto h = parse_index_file_header(file, "fuzz.udfi");
  UDF_FUZZ_CHECK(h && h->elem == f->elem && h->dim == f->dim && h->n_lists == f->n_lists && h->size == f->size &&
                 h->coarse == cuvs_coarse(*f) && h->balance == 0);
  auto l = parse_index_file_lists(file, *h, "fuzz.udfi");
  UDF_FUZZ_CHECK(l && l->ids == f->ids && l->vecs == f->vecs && l->centroids.size() == f->centroids.size());
  // Compared as bytes: the vectors may hold NaNs (the centroids may not).
  UDF_FUZZ_CHECK(std::memcmp(l->centroids.data(), f->centroids.data(), f->centroids.size() * 4) == 0);
  for (float c : f->centroids) UDF_FUZZ_CHECK(std::isfinite(c));
  return 0;
}
