// The FAISS IndexIVFFlat reader (lib/runtime/index/faiss_file.h: what
// udf_index_load_faiss parses before it touches the GPU).  An accepted file
// has the shape its header announces, and its conversion to this runtime's
// index file (faiss_to_index_file) parses back to the same centroids (all
// finite) and lists; no input allocates more than its own size (-rss_limit_mb catches
// one that does).
#include <cmath>
#include <cstring>

#include "fuzz_util.h"
#include "index/faiss_file.h"
#include "index/index_file.h"

using namespace udf;
using namespace udf::rt;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto f = parse_faiss_ivf_flat(std::span<const std::uint8_t>(data, size), "fuzz.faiss");
  if (!f) return 0;
  UDF_FUZZ_CHECK(f->dim >= 1 && f->dim <= kMaxDim && f->n_lists >= 1 && f->n_lists <= kMaxLists);
  UDF_FUZZ_CHECK(f->metric == kFaissMetricL2 || f->metric == kFaissMetricInnerProduct);
  UDF_FUZZ_CHECK(f->centroids.size() == std::size_t(f->n_lists) * f->dim);
  UDF_FUZZ_CHECK(f->ids.size() == f->n_lists && f->vecs.size() == f->n_lists);
  std::uint64_t total = 0;
  for (std::uint32_t l = 0; l < f->n_lists; ++l) {
    UDF_FUZZ_CHECK(f->vecs[l].size() == f->ids[l].size() * f->dim * 4);
    total += f->ids[l].size();
  }
  UDF_FUZZ_CHECK(total == static_cast<std::uint64_t>(f->size));
  const auto file = faiss_to_index_file(*f, "l2", "key");
  auto h = parse_index_file_header(file, "fuzz.udfi");
  UDF_FUZZ_CHECK(h && h->dim == f->dim && h->n_lists == f->n_lists && h->size == f->size && h->balance == 0);
  auto l = parse_index_file_lists(file, *h, "fuzz.udfi");
  UDF_FUZZ_CHECK(l && l->ids == f->ids && l->vecs == f->vecs && l->centroids.size() == f->centroids.size());
  // Compared as bytes: the vectors may hold NaNs (the centroids may not).
  UDF_FUZZ_CHECK(std::memcmp(l->centroids.data(), f->centroids.data(), f->centroids.size() * 4) == 0);
  for (float c : f->centroids) UDF_FUZZ_CHECK(std::isfinite(c));
  return 0;
}
