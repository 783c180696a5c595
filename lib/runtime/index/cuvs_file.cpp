#include "index/cuvs_file.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <string_view>

#include "index/field_reader.h"
#include "index/index_file.h"
#include "udf/data/vector_files.h"
#include "udf/kernels/ivf_index_v1.h"
#include "udf/support/hash.h"

namespace udf::rt {
namespace {

constexpr std::uint32_t kGroup = 32;  // cuVS's kIndexGroupSize: rows interleaved together

// The bytes as text, non-printable ones escaped ("<f4\0" reads '<f4\x00').
std::string printable(std::span<const std::uint8_t> s) {
  std::string out;
  for (std::uint8_t c : s)
    out += (c >= 0x20 && c < 0x7F) ? std::string(1, char(c)) : "\\x" + to_hex(std::span(&c, 1));
  return out;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// One .npy block's header, as raft::serialize_mdspan writes it.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;
};

// The header's Python dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}
// (any order of the three keys, trailing commas allowed), then spaces and "\n".
struct DictParser {
  std::string_view s;
  std::size_t i = 0;
  std::string why;

  void space() {
    while (i < s.size() && s[i] == ' ') ++i;
  }
  bool eat(char c) {
    space();
    if (i < s.size() && s[i] == c) return ++i, true;
    why = std::string("expected '") + c + "' at header byte " + std::to_string(i);
    return false;
  }
  bool peek(char c) {
    space();
    return i < s.size() && s[i] == c;
  }
  bool str(std::string& out) {
    if (!eat('\'')) return false;
    const std::size_t end = s.find('\'', i);
    if (end == std::string_view::npos) return why = "unterminated string", false;
    out.assign(s.substr(i, end - i));
    i = end + 1;
    return true;
  }
  bool boolean(bool& out) {
    space();
    out = s.substr(i, 4) == "True";
    if (out || s.substr(i, 5) == "False") return i += out ? 4 : 5, true;
    return why = "fortran_order is not True or False", false;
  }
  bool number(std::uint64_t& out) {
    space();
    const std::size_t at = i;
    out = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      if (out > (UINT64_MAX - std::uint64_t(s[i] - '0')) / 10) return why = "a shape extent overflows", false;
      out = out * 10 + std::uint64_t(s[i] - '0');
    }
    return i > at || (why = "a shape extent is not a number", false);
  }
  bool tuple(std::vector<std::uint64_t>& out) {
    if (!eat('(')) return false;
    while (!peek(')')) {
      if (out.size() == 8) return why = "more than 8 extents", false;
      std::uint64_t n = 0;
      if (!number(n)) return false;
      out.push_back(n);
      if (!peek(',')) break;
      ++i;
    }
    return eat(')');
  }
  // The three keys, each once; then only padding to the final "\n".
  bool header(NpyHeader& h) {
    if (!eat('{')) return false;
    bool seen[3] = {false, false, false};
    while (!peek('}')) {
      std::string key;
      if (!str(key) || !eat(':')) return false;
      const int k = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
      if (k < 0 || seen[k]) return why = "key '" + key + "' is unknown or repeated", false;
      seen[k] = true;
      if (!(k == 0 ? str(h.descr) : k == 1 ? boolean(h.fortran_order) : tuple(h.shape))) return false;
      if (!peek(',')) break;
      ++i;
    }
    if (!eat('}')) return false;
    if (!seen[0] || !seen[1] || !seen[2]) return why = "a key of descr, fortran_order, shape is missing", false;
    space();
    if (i + 1 != s.size() || s[i] != '\n') return why = "the header does not end with spaces and \"\\n\"", false;
    return true;
  }
};

// raft's .npy blocks on index/field_reader.h.
struct Reader : FieldReader {

  // A .npy block's magic, version 1.0 and header; pos is left at its data.
  bool npy(const std::string& field, NpyHeader& h) {
    const std::size_t at = pos;
    if (!need(10, field)) return false;
    const std::uint8_t* p = b.data() + pos;
    if (std::memcmp(p, "\x93NUMPY", 6) != 0)
      return fail(at, field, "not a NumPy block (magic '" + printable(std::span(p, 6)) + "', not '\\x93NUMPY')");
    if (p[6] != 1 || p[7] != 0)
      return fail(at, field, "NumPy format " + std::to_string(p[6]) + "." + std::to_string(p[7]) +
                                 " (raft writes 1.0)");
    const std::size_t len = std::size_t(p[8]) | std::size_t(p[9]) << 8;
    pos += 10;
    if (!need(len, field + " header")) return false;
    DictParser d{std::string_view(reinterpret_cast<const char*>(b.data() + pos), len), 0, {}};
    if (!d.header(h)) return fail(at, field, "bad NumPy header: " + d.why);
    pos += len;
    return true;
  }
  // A block of dtype `descr`, C order, of exactly `shape`; its data's offset.
  std::optional<std::size_t> array(const std::string& field, const std::string& descr,
                                   const std::vector<std::uint64_t>& shape, std::size_t item) {
    const std::size_t at = pos;
    NpyHeader h;
    if (!npy(field, h)) return std::nullopt;
    if (!expect(at, h.descr == descr, field, "dtype '" + h.descr + "' is not '" + descr + "'") ||
        !expect(at, !h.fortran_order, field, "fortran_order is True (raft writes C order)") ||
        !expect(at, h.shape == shape, field, "shape " + shape_text(h.shape) + " is not " + shape_text(shape)))
      return std::nullopt;
    std::uint64_t n = item;  // each extent is below 2^32 and there are at most two
    for (std::uint64_t e : shape) n *= e;
    if (!need(n, field)) return std::nullopt;
    const std::size_t data = pos;
    pos += n;
    return data;
  }
  // A scalar (shape ()) of one of the dtypes `descrs` (T's size).
  template <class T> T scalar(const std::string& field, std::initializer_list<const char*> descrs) {
    T v{};
    const std::size_t at = pos;
    NpyHeader h;
    if (!npy(field, h)) return v;
    bool known = false;
    std::string names;
    for (const char* d : descrs) {
      known = known || h.descr == d;
      names += std::string(names.empty() ? "'" : " or '") + d + "'";
    }
    if (!expect(at, known, field, "dtype '" + h.descr + "' is not " + names) ||
        !expect(at, h.shape.empty(), field, "shape " + shape_text(h.shape) + " is not () (a scalar)") ||
        !need(sizeof(T), field))
      return v;
    std::memcpy(&v, b.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  bool flag(const std::string& field) {
    const std::size_t at = pos;
    const std::uint8_t v = scalar<std::uint8_t>(field, {"|u1"});
    expect(at, v <= 1, field, std::to_string(v) + " is not a bool (0 or 1)");
    return v == 1;
  }
};

// The dtype prefix: udf_dtype, or -1 for none of cuVS's.  Half is "<e2" up
// to cuVS 26.08 and "<f2" in cuVS 26.10 (its lists' blocks stay '<e2').
int dtype_of(std::span<const std::uint8_t> prefix) {
  const char* names[] = {"<f4", "<e2", "|i1", "|u1", "<f2"};
  for (int t = 0; t < 5; ++t)
    if (std::memcmp(prefix.data(), names[t], 4) == 0) return t == 4 ? 1 : t;  // the terminating NUL included
  return -1;
}

const char* elem_name(std::uint32_t elem) {
  return elem == 0 ? "float" : elem == 1 ? "half" : elem == 2 ? "int8_t" : "uint8_t";
}

// The scalars after the dtype prefix, checked.
void scalars(Reader& r, CuvsIvfFlat& f) {
  std::size_t at = r.pos;
  const std::int32_t version = r.scalar<std::int32_t>("serialization_version", {"<i4"});
  if (r.error) return;
  if (version != kCuvsIvfFlatVersion4 && version != kCuvsIvfFlatVersion5) {
    r.fail(at, "serialization_version", std::to_string(version) + " is not 4 or 5" +
                                            " (this reader follows cuVS 25.02 to 26.10)");
    return;
  }
  f.version = version;
  at = r.pos;
  f.size = r.scalar<std::int64_t>("size", {"<i8"});
  r.expect(at, f.size >= 0, "size", std::to_string(f.size) + " is negative");
  at = r.pos;
  f.dim = r.scalar<std::uint32_t>("dim", {"<u4"});
  r.expect(at, f.dim >= 1 && f.dim <= kMaxDim, "dim", std::to_string(f.dim) + " is not in 1 .. " +
                                                          std::to_string(kMaxDim));
  at = r.pos;
  f.n_lists = r.scalar<std::uint32_t>("n_lists", {"<u4"});
  r.expect(at, f.n_lists >= 1 && f.n_lists <= kMaxLists, "n_lists",
           std::to_string(f.n_lists) + " is not in 1 .. " + std::to_string(kMaxLists) +
               " (the most lists this runtime's index takes)");
  at = r.pos;
  f.metric = r.scalar<std::int32_t>("metric", {"<i4", "<u4"});
  if (r.error) return;
  if (f.metric != kCuvsL2Expanded && f.metric != kCuvsL2SqrtExpanded && f.metric != kCuvsInnerProduct &&
      f.metric != kCuvsCosineExpanded) {
    r.fail(at, "metric", cuvs_metric_name(f.metric) + " is not L2Expanded (0), L2SqrtExpanded (1), "
                         "CosineExpanded (2) or InnerProduct (6)");
    return;
  }
  if (f.metric == kCuvsCosineExpanded && f.elem >= 2) {
    r.fail(at, "metric", std::string("CosineExpanded over ") + elem_name(f.elem) +
                             " vectors: this runtime's cosine index stores normalized vectors, f32 or f16 only");
    return;
  }
  f.adaptive_centers = r.flag("adaptive_centers");
  f.conservative_memory_allocation = r.flag("conservative_memory_allocation");
}

// The centers, scaled into the space of raw elements for int8 / uint8 (cuVS's
// utils::mapping<float> divides them by 128 / 256).
void centers(Reader& r, CuvsIvfFlat& f) {
  const auto data = r.array("centers", "<f4", {f.n_lists, f.dim}, 4);
  if (!data) return;
  const std::size_t n = std::size_t(f.n_lists) * f.dim;
  f.centroids.resize(n);
  std::memcpy(f.centroids.data(), r.b.data() + *data, n * 4);
  const float scale = f.elem == 2 ? 128.0f : f.elem == 3 ? 256.0f : 1.0f;
  // A NaN or infinite centroid makes the coarse ranking meaningless.
  for (std::size_t i = 0; i < n; ++i) {
    f.centroids[i] *= scale;
    if (!std::isfinite(f.centroids[i])) {
      r.fail(*data + 4 * i, "centers", "centroid " + std::to_string(i / f.dim) + " value " +
                                           std::to_string(i % f.dim) + " is not finite" +
                                           (scale != 1.0f ? " (times " + std::to_string(int(scale)) + ")" : ""));
      return;
    }
  }
  if (r.flag("has_norms")) r.array("center_norms", "<f4", {f.n_lists}, 4);
}

std::vector<std::uint32_t> list_sizes(Reader& r, const CuvsIvfFlat& f) {
  const std::size_t at = r.pos;
  const auto data = r.array("list_sizes", "<u4", {f.n_lists}, 4);
  if (!data) return {};
  std::vector<std::uint32_t> sizes(f.n_lists);
  std::memcpy(sizes.data(), r.b.data() + *data, sizes.size() * 4);
  std::uint64_t total = 0;
  for (std::uint32_t s : sizes) total += s;
  r.expect(at, total == std::uint64_t(f.size), "list_sizes",
           "they add up to " + std::to_string(total) + ", size is " + std::to_string(f.size));
  return sizes;
}

// Rows [0, rows) of an interleaved list into row-major [rows][dim].
void deinterleave(const std::uint8_t* src, std::uint32_t rows, const CuvsIvfFlat& f, std::uint8_t* dst) {
  const std::size_t es = f.elem_size(), row = std::size_t(f.dim) * es;
  for (std::uint32_t i = 0; i < rows; ++i) {
    const std::uint8_t* group = src + std::size_t(i / kGroup) * kGroup * row;
    const std::size_t lane = std::size_t(i % kGroup) * f.veclen;
    for (std::uint32_t c = 0; c < f.dim; c += f.veclen)
      std::memcpy(dst + i * row + c * es, group + (std::size_t(c) * kGroup + lane) * es, f.veclen * es);
  }
}

void lists(Reader& r, CuvsIvfFlat& f, const std::vector<std::uint32_t>& sizes) {
  const std::size_t es = f.elem_size();
  const char* descr[] = {"<f4", "<e2", "|i1", "|u1"};
  f.ids.resize(f.n_lists);
  f.vecs.resize(f.n_lists);
  for (std::uint32_t l = 0; l < f.n_lists && !r.error; ++l) {
    const std::string field = "list " + std::to_string(l);
    const std::size_t at = r.pos;
    const std::uint32_t n = r.scalar<std::uint32_t>(field + " size", {"<u4"});
    const std::uint64_t padded = (std::uint64_t(sizes[l]) + kGroup - 1) / kGroup * kGroup;
    // Version 4 writes the list's size rounded up to 32 and as many ids;
    // version 5 the size itself and that many ids, the data still in whole groups.
    const bool v4 = f.version == kCuvsIvfFlatVersion4;
    if (!r.expect(at, n == (v4 ? padded : sizes[l]), field + " size",
                  std::to_string(n) + " is not list_sizes[" + std::to_string(l) + "] = " + std::to_string(sizes[l]) +
                      (v4 ? " rounded up to 32" : "") + " (serialization version " + std::to_string(f.version) + ")"))
      return;
    if (n == 0) continue;
    const auto data = r.array(field + " data", descr[f.elem], {padded, f.dim}, es);
    const auto ids = r.array(field + " indices", "<i8", {n}, 8);
    if (!data || !ids) return;
    f.vecs[l].resize(std::size_t(sizes[l]) * f.dim * es);
    deinterleave(r.b.data() + *data, sizes[l], f, f.vecs[l].data());
    f.ids[l].resize(sizes[l]);
    std::memcpy(f.ids[l].data(), r.b.data() + *ids, std::size_t(sizes[l]) * 8);
  }
}

// Row by row to unit length (a zero row stays zero), as this runtime's cosine
// index stores them; the sum of squares in double.
void normalize(std::uint8_t* p, std::size_t rows, std::uint32_t dim, std::uint32_t elem) {
  for (std::size_t i = 0; i < rows; ++i) {
    auto at = [&](std::uint32_t c) { return p + (i * dim + c) * (elem == 0 ? 4 : 2); };
    auto get = [&](std::uint32_t c) -> double {
      if (elem == 0) {
        float v;
        std::memcpy(&v, at(c), 4);
        return v;
      }
      std::uint16_t h;
      std::memcpy(&h, at(c), 2);
      return half_to_float(h);
    };
    double s = 0;
    for (std::uint32_t c = 0; c < dim; ++c) s += get(c) * get(c);
    const double scale = s > 0 ? 1.0 / std::sqrt(s) : 0.0;
    for (std::uint32_t c = 0; c < dim; ++c) {
      const float v = float(get(c) * scale);
      if (elem == 0) {
        std::memcpy(at(c), &v, 4);
      } else {
        const std::uint16_t h = float_to_half(v);
        std::memcpy(at(c), &h, 2);
      }
    }
  }
}

}  // namespace

Expected<CuvsIvfFlat> parse_cuvs_ivf_flat(std::span<const std::uint8_t> file, const std::string& path) {
  Reader r{{file, path, "cuVS IVF-Flat", 0, {}}};
  CuvsIvfFlat f;
  if (!r.need(4, "dtype")) return std::move(*r.error);
  const int elem = dtype_of(file.first(4));
  if (elem < 0)
    return diagnosed(DiagCode::BadDataFile, path + ": not a cuVS IVF-Flat file (dtype prefix '" +
                                                printable(file.first(4)) + "' at byte 0; cuVS writes '<f4\\x00', "
                                                "'<e2\\x00', '<f2\\x00', '|i1\\x00' or '|u1\\x00')");
  f.elem = std::uint32_t(elem);
  r.pos = 4;
  scalars(r, f);
  if (r.error) return std::move(*r.error);
  const std::uint32_t v = 16 / std::uint32_t(f.elem_size());
  f.veclen = f.dim % v == 0 ? v : 1;  // cuVS's index::calculate_veclen
  centers(r, f);
  const std::vector<std::uint32_t> sizes = list_sizes(r, f);
  lists(r, f, sizes);
  if (!r.error && r.pos != file.size()) r.fail(r.pos, "end", "trailing bytes after the lists");
  if (r.error) return std::move(*r.error);
  if (f.metric == kCuvsCosineExpanded) {
    normalize(reinterpret_cast<std::uint8_t*>(f.centroids.data()), f.n_lists, f.dim, 0);
    for (auto& l : f.vecs) normalize(l.data(), l.size() / (std::size_t(f.dim) * f.elem_size()), f.dim, f.elem);
  }
  return f;
}

std::string cuvs_metric_name(std::int32_t metric) {
  switch (metric) {
    case kCuvsL2Expanded: return "L2Expanded";
    case kCuvsL2SqrtExpanded: return "L2SqrtExpanded";
    case kCuvsCosineExpanded: return "CosineExpanded";
    case kCuvsInnerProduct: return "InnerProduct";
    default: return "DistanceType " + std::to_string(metric);
  }
}

std::uint32_t cuvs_coarse(const CuvsIvfFlat& f) {
  if (f.metric == kCuvsCosineExpanded) return UDF_IVF_INDEX_V1_IP | kCoarseNormalized;
  return f.metric == kCuvsInnerProduct ? UDF_IVF_INDEX_V1_IP : UDF_IVF_INDEX_V1_L2;
}

std::vector<std::uint8_t> cuvs_to_index_file(const CuvsIvfFlat& f, const std::string& symbol,
                                             const std::string& cache_key) {
  IndexFileHeader h;
  h.elem = f.elem;
  h.dim = f.dim;
  h.n_lists = f.n_lists;
  h.coarse = cuvs_coarse(f);
  h.size = f.size;
  h.next_id = next_id_after(f.ids);
  h.balance = 0;  // the lists are cuVS's, no cap
  h.symbol = symbol;
  h.cache_key = cache_key;
  return index_file_bytes(h, f.centroids, f.ids, f.vecs);
}

}  // namespace udf::rt
