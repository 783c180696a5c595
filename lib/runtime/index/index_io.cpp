// Index files (docs/runtime.md, "Index files"; the parser in
// index/index_file.cpp): a file read and checked against a module, and an
// index written.
#include <cstring>

#include "cuda/context.h"
#include "cuda/tensors.h"
#include "index/index.h"
#include "udf/support/fs.h"
#include "udf/support/hash.h"

namespace udf::rt {

void append_bytes(Bytes& file, const void* p, size_t n) {
  if (n == 0) return;
  const size_t at = file.size();
  file.resize(at + n);
  std::memcpy(file.data() + at, p, n);
}

namespace {

template <class T> void put(Bytes& file, const T& v) { append_bytes(file, &v, sizeof(T)); }

void put_string(Bytes& file, const std::string& s) {
  put(file, static_cast<uint32_t>(s.size()));
  append_bytes(file, s.data(), s.size());
}

}  // namespace

IndexFile read_index_file(const char* path) {
  require(path != nullptr && *path, "path is NULL or empty");
  auto bytes = read_file(path);
  if (!bytes) fail(UDF_ERROR_IO, bytes.error().message());
  auto header = parse_index_file_header(*bytes, path);
  if (!header) fail(UDF_ERROR_BAD_FORMAT, header.error().message());
  return IndexFile{std::move(*bytes), std::move(*header)};
}

void check_index_file_module(udf_module* m, const IndexFileHeader& h, const std::string& path) {
  const std::string& symbol = h.symbol;
  size_t mi = 0;
  try {
    mi = find_metric(m, symbol.c_str());
  } catch (const RuntimeFailure& f) {
    fail(UDF_ERROR_MISMATCH, path + ": index was built with metric '" + symbol + "': " + f.what());
  }
  // The lists depend on the element type and the coarse metric only, not on
  // the artifact: the cache key the file records is not compared, so an index
  // outlives a metric recompiled by another udfc or toolkit, for other archs,
  // or with an edited body (as udf_index_with_metric allows).
  const ModuleArtifact& a = m->manifest.artifacts[mi];
  if (static_cast<uint32_t>(to_dtype(a.elem)) != h.elem)
    fail(UDF_ERROR_MISMATCH, path + ": element type differs from metric '" + symbol + "'");
}

void check_index_file_coarse(const udf_index* ix, const IndexFileHeader& h, const std::string& path) {
  if ((h.coarse & 0xFF) != ix->coarse || ((h.coarse & kCoarseNormalized) != 0) != ix->normalize)
    fail(UDF_ERROR_MISMATCH, path + ": coarse metric differs from metric '" + h.symbol + "'");
}

void save_index_file(const udf_index* ix, const char* path, const std::function<void(Bytes&)>& lists) {
  const ModuleArtifact& a = ix->mod->manifest.artifacts[ix->metric];
  Bytes file;
  append_bytes(file, kIndexFileMagic, 8);
  const bool weights = !ix->coarse_weights.empty();
  put(file, kIndexFileMajor);
  put(file, weights ? kIndexFileMinorWeights : kIndexFileMinor);
  put(file, static_cast<uint32_t>(to_dtype(ix->elem)));
  put(file, ix->dim);
  put(file, ix->n_lists);
  put(file, ix->coarse | (ix->normalize ? kCoarseNormalized : 0u) | (weights ? kCoarseWeights : 0u));
  put(file, ix->size);
  put(file, ix->next_id);
  put(file, ix->balance);
  put_string(file, ix->symbol);
  put_string(file, a.cache_key);
  append_bytes(file, ix->coarse_weights.data(), ix->coarse_weights.size() * 4);
  append_bytes(file, ix->centroids.data(), ix->centroids.size() * 4);
  for (uint32_t l = 0; l < ix->n_lists; ++l) put(file, static_cast<uint64_t>(ix->sizes[l]));
  lists(file);
  const Sha256 h = sha256(file);
  append_bytes(file, h.data(), h.size());
  auto r = write_file_atomic(path, file);
  if (!r) fail(UDF_ERROR_IO, r.error().message());
}

void append_lists(const udf_index* ix, Bytes& file) {
  const size_t row_bytes = size_t(ix->dim) * ix->esize;
  CtxGuard g(ix->mod->rt->ctx);
  download_lists(ix, [&](uint32_t l, const int64_t* ids, const std::uint8_t* rows) {
    append_bytes(file, ids, size_t(ix->sizes[l]) * 8);
    append_bytes(file, rows, size_t(ix->sizes[l]) * row_bytes);
  });
}

}  // namespace udf::rt
