#include "index/faiss_file.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "index/field_reader.h"
#include "index/index_file.h"
#include "udf/kernels/ivf_index_v1.h"
#include "udf/support/hash.h"

namespace udf::rt {
namespace {

constexpr std::uint32_t fourcc(const char (&s)[5]) {
  return std::uint32_t(std::uint8_t(s[0])) | std::uint32_t(std::uint8_t(s[1])) << 8 |
         std::uint32_t(std::uint8_t(s[2])) << 16 | std::uint32_t(std::uint8_t(s[3])) << 24;
}

std::string fourcc_text(std::uint32_t h) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    const std::uint8_t c = std::uint8_t(h >> (8 * i));
    s += (c >= 0x20 && c < 0x7F) ? std::string(1, char(c)) : "\\x" + to_hex(std::span(&c, 1));
  }
  return s;
}

// FAISS's fields (index/field_reader.h), and its counts.
struct Reader : FieldReader {
  // A u64 count of items of `item` bytes each, checked against the bytes left.
  std::uint64_t count(const std::string& field, std::uint64_t item) {
    const std::size_t at = pos;
    const std::uint64_t n = get<std::uint64_t>(field);
    if (error) return 0;
    if (n > (b.size() - pos) / item) {
      fail(at, field, "count " + std::to_string(n) + " of " + std::to_string(item) + "-byte items exceeds the " +
                          std::to_string(b.size() - pos) + " bytes left");
      return 0;
    }
    return n;
  }
  void skip(std::uint64_t n) { pos += n; }  // after count() checked n bytes are there
};

struct IndexHeader {
  std::int32_t d = 0, metric = 0;
  std::int64_t ntotal = 0;
  std::size_t at_d = 0, at_ntotal = 0, at_metric = 0;  // where they are
};

// faiss write_index_header: d, ntotal, two dummies, is_trained, metric_type.
IndexHeader index_header(Reader& r, const std::string& what) {
  IndexHeader h;
  const std::size_t at_d = h.at_d = r.pos;
  h.d = r.get<std::int32_t>(what + " d");
  const std::size_t at_n = h.at_ntotal = r.pos;
  h.ntotal = r.get<std::int64_t>(what + " ntotal");
  r.get<std::int64_t>(what + " dummy");
  r.get<std::int64_t>(what + " dummy");
  const std::size_t at_trained = r.pos;
  const std::uint8_t trained = r.get<std::uint8_t>(what + " is_trained");
  const std::size_t at_metric = h.at_metric = r.pos;
  h.metric = r.get<std::int32_t>(what + " metric_type");
  r.expect(at_d, h.d >= 1 && std::uint32_t(h.d) <= kMaxDim, what + " d",
           std::to_string(h.d) + " is not in 1 .. " + std::to_string(kMaxDim));
  r.expect(at_n, h.ntotal >= 0, what + " ntotal", std::to_string(h.ntotal) + " is negative");
  r.expect(at_trained, trained == 1, what + " is_trained", "the index is not trained");
  r.expect(at_metric, h.metric == kFaissMetricL2 || h.metric == kFaissMetricInnerProduct, what + " metric_type",
           std::to_string(h.metric) + " is not METRIC_L2 (1) or METRIC_INNER_PRODUCT (0)");
  return h;
}

void quantizer(Reader& r, FaissIvfFlat& f) {
  const std::size_t at = r.pos;
  const std::uint32_t h = r.get<std::uint32_t>("quantizer fourcc");
  if (r.error) return;
  if (h != fourcc("IxF2") && h != fourcc("IxFI")) {
    r.fail(at, "quantizer fourcc", "'" + fourcc_text(h) + "' is not IndexFlatL2 ('IxF2') or IndexFlatIP ('IxFI')");
    return;
  }
  const IndexHeader q = index_header(r, "quantizer");
  if (r.error) return;
  r.expect(q.at_d, q.d == std::int32_t(f.dim), "quantizer d", std::to_string(q.d) + " differs from the index's " +
                                                                 std::to_string(f.dim));
  r.expect(q.at_metric, q.metric == f.metric, "quantizer metric_type", "differs from the index's");
  r.expect(q.at_ntotal, q.ntotal == f.n_lists, "quantizer ntotal",
           std::to_string(q.ntotal) + " centroids for nlist " + std::to_string(f.n_lists));
  const std::size_t at_xb = r.pos;
  const std::uint64_t n = r.count("quantizer codes", 4);
  if (!r.expect(at_xb, n == std::uint64_t(f.n_lists) * f.dim, "quantizer codes",
                std::to_string(n) + " floats for nlist x d = " + std::to_string(std::uint64_t(f.n_lists) * f.dim)))
    return;
  f.centroids.resize(n);
  if (n) std::memcpy(f.centroids.data(), r.b.data() + r.pos, n * 4);
  // A NaN or infinite centroid makes the coarse ranking meaningless.
  for (std::uint64_t i = 0; i < n; ++i)
    if (!std::isfinite(f.centroids[i])) {
      r.fail(r.pos + 4 * i, "quantizer codes", "centroid " + std::to_string(i / f.dim) + " value " +
                                                   std::to_string(i % f.dim) + " is not finite");
      return;
    }
  r.skip(n * 4);
}

void direct_map(Reader& r) {
  const std::size_t at = r.pos;
  const std::uint8_t type = r.get<std::uint8_t>("direct_map type");
  if (!r.expect(at, type <= 2, "direct_map type",
                std::to_string(type) + " is not 0 (none), 1 (array) or 2 (hash table)"))
    return;
  r.skip(8 * r.count("direct_map array", 8));
  if (type == 2) r.skip(16 * r.count("direct_map hashtable", 16));
}

// The list sizes of "full" (one per list) or "sprs" ((list, size) pairs);
// each list's vectors and ids must fit in the bytes left.
std::vector<std::uint64_t> list_sizes(Reader& r, std::uint32_t n_lists, std::uint64_t row_bytes) {
  std::vector<std::uint64_t> sizes;
  const std::size_t at = r.pos;
  const std::uint32_t kind = r.get<std::uint32_t>("invlists list_type");
  if (r.error) return sizes;
  const bool full = kind == fourcc("full");
  if (!full && kind != fourcc("sprs")) {
    r.fail(at, "invlists list_type", "'" + fourcc_text(kind) + "' is not 'full' or 'sprs'");
    return sizes;
  }
  const std::size_t at_n = r.pos;
  const std::uint64_t n = r.count("invlists sizes", 8);
  if (r.error) return sizes;
  if (full ? n != n_lists : (n % 2 != 0 || n / 2 > n_lists)) {
    r.fail(at_n, "invlists sizes", std::to_string(n) + " values for nlist " + std::to_string(n_lists));
    return sizes;
  }
  sizes.assign(n_lists, 0);
  for (std::uint64_t i = 0; i < (full ? n : n / 2); ++i) {
    const std::size_t at_i = r.pos;
    const std::uint64_t list = full ? i : r.get<std::uint64_t>("invlists sizes");
    const std::uint64_t size = r.get<std::uint64_t>("invlists sizes");
    if (r.error) return {};
    if (size > (r.b.size() - r.pos) / row_bytes || size > std::numeric_limits<std::uint32_t>::max()) {
      r.fail(at_i, "invlists sizes", "list size " + std::to_string(size) + " exceeds the bytes left (or 2^32 - 1)");
      return {};
    }
    if (!full && (list >= n_lists || sizes[list] != 0 || size == 0)) {
      r.fail(at_i, "invlists sizes", "sparse entry (list " + std::to_string(list) + ", size " + std::to_string(size) +
                                         ") names no list, a list twice or an empty one");
      return {};
    }
    sizes[list] = size;
  }
  return sizes;
}

void inverted_lists(Reader& r, FaissIvfFlat& f) {
  const std::size_t at = r.pos;
  const std::uint32_t h = r.get<std::uint32_t>("invlists fourcc");
  if (r.error) return;
  if (h != fourcc("ilar")) {
    r.fail(at, "invlists fourcc",
           "'" + fourcc_text(h) + "' is not ArrayInvertedLists ('ilar'; other inverted lists, e.g. "
           "OnDiskInvertedLists, are not read: faiss can copy them into an ArrayInvertedLists)");
    return;
  }
  const std::size_t at_n = r.pos;
  const std::uint64_t nlist = r.get<std::uint64_t>("invlists nlist");
  r.expect(at_n, nlist == f.n_lists, "invlists nlist", std::to_string(nlist) + " differs from the index's " +
                                                          std::to_string(f.n_lists));
  const std::size_t at_c = r.pos;
  const std::uint64_t code_size = r.get<std::uint64_t>("invlists code_size");
  r.expect(at_c, code_size == 4ull * f.dim, "invlists code_size",
           std::to_string(code_size) + " is not 4 x d = " + std::to_string(4ull * f.dim) + " (float32 vectors)");
  const std::size_t at_sizes = r.pos;
  const std::vector<std::uint64_t> sizes = list_sizes(r, f.n_lists, code_size + 8);
  if (r.error) return;
  std::uint64_t total = 0;  // each size is below the file's size: no overflow
  for (std::uint64_t s : sizes) total += s;
  if (!r.expect(at_sizes, total == std::uint64_t(f.size), "invlists sizes",
                "they add up to " + std::to_string(total) + ", ntotal is " + std::to_string(f.size)))
    return;
  f.ids.resize(f.n_lists);
  f.vecs.resize(f.n_lists);
  for (std::uint32_t l = 0; l < f.n_lists; ++l) {
    if (sizes[l] == 0) continue;
    const std::string field = "list " + std::to_string(l);
    if (!r.need(sizes[l] * (code_size + 8), field)) return;
    f.vecs[l].assign(r.b.data() + r.pos, r.b.data() + r.pos + sizes[l] * code_size);
    r.skip(sizes[l] * code_size);
    f.ids[l].resize(sizes[l]);
    std::memcpy(f.ids[l].data(), r.b.data() + r.pos, sizes[l] * 8);
    r.skip(sizes[l] * 8);
  }
}

}  // namespace

Expected<FaissIvfFlat> parse_faiss_ivf_flat(std::span<const std::uint8_t> file, const std::string& path) {
  Reader r{{file, path, "FAISS IndexIVFFlat", 0, {}}};
  FaissIvfFlat f;
  const std::uint32_t h = r.get<std::uint32_t>("fourcc");
  if (r.error) return std::move(*r.error);
  if (h != fourcc("IwFl"))
    return diagnosed(DiagCode::BadDataFile, path + ": not a FAISS IndexIVFFlat file (fourcc '" + fourcc_text(h) +
                                                "' at byte 0; IndexIVFFlat is 'IwFl')");
  const IndexHeader ih = index_header(r, "index");
  const std::size_t at_nlist = r.pos;
  const std::uint64_t nlist = r.get<std::uint64_t>("nlist");
  r.get<std::uint64_t>("nprobe");
  if (r.error) return std::move(*r.error);
  if (nlist == 0 || nlist > kMaxLists)
    r.fail(at_nlist, "nlist", std::to_string(nlist) + " is not in 1 .. " + std::to_string(kMaxLists) +
                                  " (the most lists this runtime's index takes)");
  f.dim = std::uint32_t(ih.d);
  f.n_lists = std::uint32_t(nlist);
  f.size = ih.ntotal;
  f.metric = ih.metric;
  quantizer(r, f);
  direct_map(r);
  inverted_lists(r, f);
  if (!r.error && r.pos != file.size()) r.fail(r.pos, "end", "trailing bytes after the inverted lists");
  if (r.error) return std::move(*r.error);
  return f;
}

std::int64_t faiss_next_id(const FaissIvfFlat& f) { return next_id_after(f.ids); }

std::vector<std::uint8_t> faiss_to_index_file(const FaissIvfFlat& f, const std::string& symbol,
                                              const std::string& cache_key) {
  IndexFileHeader h;
  h.elem = 0;  // UDF_DTYPE_F32
  h.dim = f.dim;
  h.n_lists = f.n_lists;
  h.coarse = f.metric == kFaissMetricL2 ? UDF_IVF_INDEX_V1_L2 : UDF_IVF_INDEX_V1_IP;
  h.size = f.size;
  h.next_id = faiss_next_id(f);
  h.balance = 0;  // the lists are FAISS's, no cap
  h.symbol = symbol;
  h.cache_key = cache_key;
  return index_file_bytes(h, f.centroids, f.ids, f.vecs);
}

}  // namespace udf::rt
