// The C API of cuVS IVF-Flat files (index/cuvs_file.h): one loaded as an
// index of this runtime (udf_index_load_cuvs), or written in this runtime's
// index file format without a GPU (udf_index_file_from_cuvs).  The centroids,
// the lists and their ids are cuVS's (the lists row-major here, the int8 /
// uint8 centroids scaled back, cosine ones normalized: cuvs_file.h).
#include <cstring>
#include <string>

#include "capi/api_guard.h"
#include "cuda/context.h"
#include "cuda/tensors.h"
#include "index/cuvs_file.h"
#include "index/index_file.h"
#include "index/index.h"
#include "udf/support/fs.h"

using namespace udf;
using namespace udf::rt;

namespace {

CuvsIvfFlat read_cuvs_file(const char* path) {
  require(path != nullptr && *path, "cuvs_path is NULL or empty");
  auto bytes = read_file(path);
  if (!bytes) fail(UDF_ERROR_IO, bytes.error().message());
  auto f = parse_cuvs_ivf_flat(*bytes, path);
  if (!f) fail(UDF_ERROR_BAD_FORMAT, f.error().message());
  return std::move(*f);
}

const char* coarse_name(uint32_t coarse, bool normalize) {
  return normalize ? "cosine" : coarse == UDF_IVF_INDEX_V1_L2 ? "l2" : "inner_product";
}

// The metric scans the cuVS index's element type, and its coarse metric is
// the one cuVS probes with (l2 for L2Expanded and L2SqrtExpanded,
// inner_product for InnerProduct, cosine for CosineExpanded).
void check_cuvs_metric(const udf_index* ix, const CuvsIvfFlat& f, const std::string& path) {
  if (static_cast<uint32_t>(to_dtype(ix->elem)) != f.elem) {
    const char* names[] = {"f32", "f16", "i8", "u8"};
    fail(UDF_ERROR_MISMATCH, path + ": metric " + ix->symbol + " takes " + std::string(to_string(ix->elem)) +
                                 " elements; the cuVS index holds " + names[f.elem] + " vectors");
  }
  const uint32_t want = cuvs_coarse(f) & 0xFFu;
  const bool normalized = (cuvs_coarse(f) & kCoarseNormalized) != 0;
  if (ix->coarse != want || ix->normalize != normalized)
    fail(UDF_ERROR_MISMATCH, path + ": metric " + ix->symbol + " has coarse metric " +
                                 coarse_name(ix->coarse, ix->normalize) +
                                 "; the cuVS index's lists were clustered with " + cuvs_metric_name(f.metric) + " (" +
                                 coarse_name(want, normalized) + ")");
}

}  // namespace

extern "C" {

UDF_API udf_status udf_index_load_cuvs(udf_module* m, const char* metric, const char* cuvs_path, udf_index** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    // The file is checked before the module, so a foreign file is reported as such.
    const CuvsIvfFlat f = read_cuvs_file(cuvs_path);
    require(m != nullptr, "module is NULL");
    CtxGuard g(m->rt->ctx);
    auto ix = new_index(m, metric, f.dim, f.n_lists);
    check_cuvs_metric(ix.get(), f, cuvs_path);
    ix->size = f.size;
    ix->next_id = next_id_after(f.ids);
    ix->balance = 0;  // the lists are cuVS's; udf_index_add assigns to the nearest list
    ix->centroids = f.centroids;
    upload_lists(ix.get(), f.ids, f.vecs);
    ++m->live_indexes;
    *out = ix.release();
  });
}

UDF_API udf_status udf_index_file_from_cuvs(const char* cuvs_path, const char* metric, const char* cache_key,
                                            const char* out_path) {
  return guarded([&] {
    const CuvsIvfFlat f = read_cuvs_file(cuvs_path);
    require(metric != nullptr && *metric, "metric is NULL or empty");
    require(cache_key != nullptr, "cache_key is NULL");
    require(std::strlen(metric) <= 4096 && std::strlen(cache_key) <= 4096,
            "metric or cache_key is longer than an index file takes (4096 bytes)");
    require(out_path != nullptr && *out_path, "out_path is NULL or empty");
    const auto file = cuvs_to_index_file(f, metric, cache_key);
    auto r = write_file_atomic(out_path, file);
    if (!r) fail(UDF_ERROR_IO, r.error().message());
  });
}

}  // extern "C"
