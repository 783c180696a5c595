// The C API of FAISS IndexIVFFlat files (index/faiss_file.h): one loaded as
// an index of this runtime (udf_index_load_faiss), or written in this
// runtime's index file format without a GPU (udf_index_file_from_faiss).
// The centroids, the lists and their ids are FAISS's, unchanged.
#include <cstring>
#include <string>

#include "capi/api_guard.h"
#include "cuda/context.h"
#include "index/faiss_file.h"
#include "index/index.h"
#include "udf/support/fs.h"

using namespace udf;
using namespace udf::rt;

namespace {

FaissIvfFlat read_faiss_file(const char* path) {
  require(path != nullptr && *path, "faiss_path is NULL or empty");
  auto bytes = read_file(path);
  if (!bytes) fail(UDF_ERROR_IO, bytes.error().message());
  auto f = parse_faiss_ivf_flat(*bytes, path);
  if (!f) fail(UDF_ERROR_BAD_FORMAT, f.error().message());
  return std::move(*f);
}

const char* faiss_metric_name(const FaissIvfFlat& f) {
  return f.metric == kFaissMetricL2 ? "METRIC_L2" : "METRIC_INNER_PRODUCT";
}

// The metric scans f32 vectors, and its coarse metric is the FAISS index's
// (L2 for METRIC_L2, inner product for METRIC_INNER_PRODUCT; cosine stores
// normalized vectors, which FAISS's lists are not).
void check_faiss_metric(const udf_index* ix, const FaissIvfFlat& f, const std::string& path) {
  if (ix->elem != ElemType::F32)
    fail(UDF_ERROR_MISMATCH, path + ": metric " + ix->symbol + " takes " + std::string(to_string(ix->elem)) +
                                 " elements; a FAISS IndexIVFFlat holds f32 vectors");
  const uint32_t want = f.metric == kFaissMetricL2 ? UDF_IVF_INDEX_V1_L2 : UDF_IVF_INDEX_V1_IP;
  if (ix->coarse != want || ix->normalize) {
    const std::string coarse = ix->normalize ? "cosine" : ix->coarse == UDF_IVF_INDEX_V1_L2 ? "l2" : "inner_product";
    fail(UDF_ERROR_MISMATCH, path + ": metric " + ix->symbol + " has coarse metric " + coarse +
                                 "; the FAISS index's lists were clustered with " + faiss_metric_name(f) + " (" +
                                 (want == UDF_IVF_INDEX_V1_L2 ? "l2" : "inner_product") + ")");
  }
}

}  // namespace

extern "C" {

UDF_API udf_status udf_index_load_faiss(udf_module* m, const char* metric, const char* faiss_path, udf_index** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    // The file is checked before the module, so a foreign file is reported as such.
    const FaissIvfFlat f = read_faiss_file(faiss_path);
    require(m != nullptr, "module is NULL");
    CtxGuard g(m->rt->ctx);
    auto ix = new_index(m, metric, f.dim, f.n_lists);
    check_faiss_metric(ix.get(), f, faiss_path);
    ix->size = f.size;
    ix->next_id = faiss_next_id(f);
    ix->balance = 0;  // the lists are FAISS's; udf_index_add assigns to the nearest list
    ix->centroids = f.centroids;
    upload_lists(ix.get(), f.ids, f.vecs);
    ++m->live_indexes;
    *out = ix.release();
  });
}

UDF_API udf_status udf_index_file_from_faiss(const char* faiss_path, const char* metric, const char* cache_key,
                                             const char* out_path) {
  return guarded([&] {
    const FaissIvfFlat f = read_faiss_file(faiss_path);
    require(metric != nullptr && *metric, "metric is NULL or empty");
    require(cache_key != nullptr, "cache_key is NULL");
    require(std::strlen(metric) <= 4096 && std::strlen(cache_key) <= 4096,
            "metric or cache_key is longer than an index file takes (4096 bytes)");
    require(out_path != nullptr && *out_path, "out_path is NULL or empty");
    const auto file = faiss_to_index_file(f, metric, cache_key);
    auto r = write_file_atomic(out_path, file);
    if (!r) fail(UDF_ERROR_IO, r.error().message());
  });
}

}  // extern "C"
