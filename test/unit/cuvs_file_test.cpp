// The cuVS IVF-Flat reader (lib/runtime/index/cuvs_file.h), without a GPU:
// hand-made files in the layout cuVS writes (every element type, both
// interleavings, every metric taken) parse to their centroids and lists in
// this runtime's layout and convert to an index file that parses back equal;
// files the real cuVS 26.10 wrote parse to the rows it was given;
// each kind of damage is refused naming its field and byte offset, before
// anything larger than the file is allocated.
//
// The writer below mirrors, byte for byte, cuVS's
// cpp/src/neighbors/ivf_flat/ivf_flat_serialize.cuh (serialize),
// cpp/src/neighbors/ivf_list.cuh (serialize_list),
// cpp/src/neighbors/ivf_flat/ivf_flat_build.cuh (build_index_kernel's
// interleaving) and include/cuvs/neighbors/ivf_flat.hpp (calculate_veclen)
// at rapidsai/cuvs ff0c8076bf2f8d354bc21039ebffa14a1c9128a3 (serialization
// version 4), with version 5's lists as cuVS 26.10 writes them (the size
// itself, that many ids: test/data/cuvs_26_10, read below), and raft's
// cpp/include/raft/core/detail/mdspan_numpy_serializer.hpp (write_header,
// serialize_scalar, serialize_host_mdspan) at rapidsai/raft
// 2141422b1a5e3121611888cb64a0bf8254bc3a67 (docs/bring-your-index.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "index/cuvs_file.h"
#include "index/index_file.h"
#include "udf/data/vector_files.h"

#include "allocation_limit.h"

namespace {

using namespace udf::rt;
using Bytes = std::vector<std::uint8_t>;

// raft's write_header: the dict, padded with spaces so that magic + version +
// length + dict + "\n" is a multiple of 64 (64 spaces when it already is).
void npy_header(Bytes& b, const std::string& descr, const std::vector<std::uint64_t>& shape,
                const char* fortran = "False") {
  std::string tuple = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) tuple += (i ? ", " : "") + std::to_string(shape[i]);
  tuple += shape.size() == 1 ? ",)" : ")";
  const std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + tuple + "}";
  const std::size_t pad = 64 - (6 + 2 + 2 + dict.size() + 1) % 64;
  const std::size_t len = dict.size() + pad + 1;
  const std::string head = std::string("\x93NUMPY\x01\x00", 8) + char(len & 0xff) + char(len >> 8) + dict +
                           std::string(pad, ' ') + "\n";
  b.insert(b.end(), head.begin(), head.end());
}

template <class T> void raw(Bytes& b, const T& v) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
  b.insert(b.end(), p, p + sizeof v);
}

// An ivf_flat::index<T, int64_t> as ivf_flat::serialize writes it.  Row i of
// list l has id 100 * l + i and components value(id, c).
struct Cuvs {
  std::string dtype = "<f4";  // the 4-byte prefix: this plus a NUL
  std::uint32_t elem = 0;     // what the elements are written as: 0 f32, 1 f16, 2 i8, 3 u8
  std::uint32_t dim = 8;
  std::int32_t version = 4, metric = 0;
  std::string metric_descr = "<i4";
  std::uint8_t adaptive = 0, cma = 1, has_norms = 1;
  std::vector<std::uint32_t> sizes = {33, 0, 2};
  std::string stop_at;                     // a list's "list L data": the file ends after its .npy header
  std::map<std::string, std::size_t> at;  // where each field starts

  std::size_t es() const { return elem == 0 ? 4 : elem == 1 ? 2 : 1; }
  std::uint32_t veclen() const {
    const std::uint32_t v = std::max<std::uint32_t>(1, 16 / std::uint32_t(es()));
    return dim % v == 0 ? v : 1;
  }
  static double value(std::int64_t id, std::uint32_t c) { return double(id % 50) - 20 + 0.25 * (c % 4); }
  float center(std::uint32_t l, std::uint32_t c) const { return 0.5f * float(l) - 0.125f * float(c); }
  void element(Bytes& b, double v) const {
    if (elem == 0) raw(b, float(v));
    if (elem == 1) raw(b, udf::float_to_half(float(v)));
    if (elem == 2) raw(b, std::int8_t(std::lround(v)));
    if (elem == 3) raw(b, std::uint8_t(std::lround(v + 30)));
  }
  template <class T> void scalar(Bytes& b, const std::string& field, const std::string& descr, T v) {
    at[field] = b.size();
    npy_header(b, descr, {});
    raw(b, v);
  }
  // serialize_list: version 4 with the size rounded up to 32, version 5 with
  // the size itself; the interleaved rows in whole groups of 32 (padding rows
  // zero, as the test's choice), then the ids (version 4: padding -1).
  void list(Bytes& b, std::uint32_t l) {
    const std::string f = "list " + std::to_string(l);
    const std::uint32_t padded = (sizes[l] + 31) / 32 * 32, n = version == 4 ? padded : sizes[l];
    scalar(b, f + " size", "<u4", n);
    if (n == 0) return;
    at[f + " data"] = b.size();
    const char* descr[] = {"<f4", "<e2", "|i1", "|u1"};
    npy_header(b, descr[elem], {padded, dim});
    if (stop_at == f + " data") return;
    std::vector<double> data(std::size_t(padded) * dim, 0.0);
    const std::uint32_t v = veclen();
    for (std::uint32_t i = 0; i < sizes[l]; ++i)  // build_index_kernel
      for (std::uint32_t c = 0; c < dim; c += v)
        for (std::uint32_t j = 0; j < v; ++j)
          data[std::size_t(i / 32) * 32 * dim + std::size_t(c) * 32 + (i % 32) * v + j] = value(100 * l + i, c + j);
    for (double x : data) element(b, x);
    at[f + " indices"] = b.size();
    npy_header(b, "<i8", {n});
    for (std::uint32_t i = 0; i < n; ++i) raw(b, std::int64_t(i < sizes[l] ? 100 * l + i : -1));
  }
  Bytes bytes() {
    Bytes b(dtype.begin(), dtype.end());
    b.resize(4, 0);
    std::int64_t size = 0;
    for (std::uint32_t s : sizes) size += s;
    const auto n_lists = std::uint32_t(sizes.size());
    scalar(b, "version", "<i4", version);
    scalar(b, "size", "<i8", size);
    scalar(b, "dim", "<u4", dim);
    scalar(b, "n_lists", "<u4", n_lists);
    scalar(b, "metric", metric_descr, metric);
    scalar(b, "adaptive_centers", "|u1", adaptive);
    scalar(b, "conservative_memory_allocation", "|u1", cma);
    at["centers"] = b.size();
    npy_header(b, "<f4", {n_lists, dim});
    for (std::uint32_t l = 0; l < n_lists; ++l)
      for (std::uint32_t c = 0; c < dim; ++c) raw(b, center(l, c));
    scalar(b, "has_norms", "|u1", has_norms);
    if (has_norms) {
      npy_header(b, "<f4", {n_lists});
      for (std::uint32_t l = 0; l < n_lists; ++l) raw(b, float(l));
    }
    at["list_sizes"] = b.size();
    npy_header(b, "<u4", {n_lists});
    for (std::uint32_t s : sizes) raw(b, s);
    for (std::uint32_t l = 0; l < n_lists && (stop_at.empty() || !at.count(stop_at)); ++l) list(b, l);
    return b;
  }
};

Bytes slurp(const std::string& path) {
  Bytes b;
  FILE* fp = std::fopen(path.c_str(), "rb");
  EXPECT_NE(fp, nullptr) << path;
  if (!fp) return b;
  for (int c; (c = std::fgetc(fp)) != EOF;) b.push_back(std::uint8_t(c));
  std::fclose(fp);
  return b;
}

std::string parse_error(const Bytes& b) {
  auto f = parse_cuvs_ivf_flat(b, "x.cuvs");
  return f ? std::string("accepted") : f.error().message();
}

double element_at(const CuvsIvfFlat& f, std::uint32_t l, std::size_t i) {
  const std::uint8_t* p = f.vecs[l].data() + i * f.elem_size();
  if (f.elem == 0) return *reinterpret_cast<const float*>(p);
  if (f.elem == 1) return udf::half_to_float(*reinterpret_cast<const std::uint16_t*>(p));
  return f.elem == 2 ? double(*reinterpret_cast<const std::int8_t*>(p)) : double(*p);
}

// The lists come back row-major, in cuVS's order, with cuVS's ids.
void expect_lists(const CuvsIvfFlat& f, const Cuvs& src) {
  ASSERT_EQ(f.n_lists, src.sizes.size());
  for (std::uint32_t l = 0; l < f.n_lists; ++l) {
    ASSERT_EQ(f.ids[l].size(), src.sizes[l]);
    ASSERT_EQ(f.vecs[l].size(), std::size_t(src.sizes[l]) * src.dim * src.es());
    for (std::uint32_t i = 0; i < src.sizes[l]; ++i) {
      EXPECT_EQ(f.ids[l][i], 100 * l + i);
      for (std::uint32_t c = 0; c < src.dim; ++c) {
        Bytes one;
        src.element(one, Cuvs::value(100 * l + i, c));
        EXPECT_EQ(std::memcmp(f.vecs[l].data() + (std::size_t(i) * src.dim + c) * src.es(), one.data(), src.es()),
                  0)
            << "list " << l << " row " << i << " component " << c << ": " << element_at(f, l, i * src.dim + c);
      }
    }
  }
}

TEST(CuvsFile, EveryElementTypeAndInterleavingParses) {
  struct Case {
    const char* dtype;
    std::uint32_t elem, dim, veclen;
    float scale;  // of the centroids: cuVS's int8 / uint8 divisor
  };
  const Case cases[] = {{"<f4", 0, 8, 4, 1},      {"<f4", 0, 3, 1, 1},     {"<e2", 1, 8, 8, 1},
                        {"<e2", 1, 12, 1, 1},     {"|i1", 2, 16, 16, 128}, {"|i1", 2, 20, 1, 128},
                        {"|u1", 3, 32, 16, 256},  {"|u1", 3, 5, 1, 256},  {"<f2", 1, 8, 8, 1}};  // "<f2": cuVS 26.10's half
  for (std::int32_t version : {4, 5}) for (const Case& c : cases) {
    Cuvs src;
    src.version = version;
    src.dtype = c.dtype;
    src.elem = c.elem;
    src.dim = c.dim;
    auto f = parse_cuvs_ivf_flat(src.bytes(), "x.cuvs");
    ASSERT_TRUE(f) << c.dtype << " dim " << c.dim << " version " << version << ": " << f.error().message();
    EXPECT_EQ(f->version, version);
    EXPECT_EQ(f->elem, c.elem);
    EXPECT_EQ(f->dim, c.dim);
    EXPECT_EQ(f->veclen, c.veclen) << c.dtype << " dim " << c.dim;
    EXPECT_EQ(f->size, 35);
    EXPECT_EQ(f->metric, kCuvsL2Expanded);
    EXPECT_FALSE(f->adaptive_centers);
    EXPECT_TRUE(f->conservative_memory_allocation);
    ASSERT_EQ(f->centroids.size(), 3u * c.dim);
    for (std::uint32_t l = 0; l < 3; ++l)
      for (std::uint32_t d = 0; d < c.dim; ++d) EXPECT_EQ(f->centroids[l * c.dim + d], src.center(l, d) * c.scale);
    expect_lists(*f, src);
  }
}

TEST(CuvsFile, MetricsAndTheirCoarseMetric) {
  struct Case {
    std::int32_t metric;
    const char* descr;
    std::uint32_t coarse;
  };
  // '<u4': cuVS before 25.12, where DistanceType was the C enum cuvsDistanceType.
  const Case cases[] = {{0, "<i4", 0}, {1, "<i4", 0}, {6, "<i4", 1}, {2, "<i4", 0x101}, {6, "<u4", 1}, {1, "<u4", 0}};
  for (const Case& c : cases) {
    Cuvs src;
    src.metric = c.metric;
    src.metric_descr = c.descr;
    src.has_norms = c.metric != 6;
    auto f = parse_cuvs_ivf_flat(src.bytes(), "x.cuvs");
    ASSERT_TRUE(f) << c.metric << ": " << f.error().message();
    EXPECT_EQ(f->metric, c.metric);
    EXPECT_EQ(cuvs_coarse(*f), c.coarse) << cuvs_metric_name(c.metric);
  }
  EXPECT_EQ(cuvs_metric_name(6), "InnerProduct");
  EXPECT_EQ(cuvs_metric_name(7), "DistanceType 7");
}

// CosineExpanded: this runtime's cosine index stores unit vectors and probes
// unit centroids (cuVS divides by the norms instead); a zero row stays zero.
TEST(CuvsFile, CosineVectorsAndCentroidsAreNormalized) {
  for (std::uint32_t elem : {0u, 1u}) {
    Cuvs src;
    src.metric = kCuvsCosineExpanded;
    src.elem = elem;
    src.dtype = elem == 0 ? "<f4" : "<e2";
    src.dim = 4;
    auto f = parse_cuvs_ivf_flat(src.bytes(), "x.cuvs");
    ASSERT_TRUE(f) << f.error().message();
    for (std::uint32_t l = 0; l < 3; ++l) {
      double n = 0;
      for (std::uint32_t c = 0; c < 4; ++c) n += double(f->centroids[l * 4 + c]) * f->centroids[l * 4 + c];
      EXPECT_NEAR(n, 1.0, 1e-6) << "centroid " << l;
      for (std::size_t i = 0; i < f->ids[l].size(); ++i) {
        double s = 0;
        for (std::uint32_t c = 0; c < 4; ++c) s += element_at(*f, l, i * 4 + c) * element_at(*f, l, i * 4 + c);
        EXPECT_NEAR(s, 1.0, elem == 0 ? 1e-6 : 2e-3) << "list " << l << " row " << i;
      }
    }
    double s = 0;
    for (std::uint32_t c = 0; c < 4; ++c) s += Cuvs::value(0, c) * Cuvs::value(0, c);
    EXPECT_NEAR(element_at(*f, 0, 0), Cuvs::value(0, 0) / std::sqrt(s), elem == 0 ? 1e-7 : 1e-3);
  }
  // A zero centroid stays zero.
  Cuvs src;
  src.metric = kCuvsCosineExpanded;
  src.dim = 1;
  src.sizes = {1};
  Bytes b = src.bytes();
  const float zero = 0;
  std::memcpy(b.data() + src.at["centers"] + 128, &zero, 4);
  auto f = parse_cuvs_ivf_flat(b, "x.cuvs");
  ASSERT_TRUE(f) << f.error().message();
  EXPECT_EQ(f->centroids[0], 0.0f);
  EXPECT_EQ(element_at(*f, 0, 0), -1.0);  // value(0, 0) = -20, normalized
}

TEST(CuvsFile, ConvertsToAnIndexFile) {
  for (std::int32_t metric : {kCuvsL2Expanded, kCuvsInnerProduct, kCuvsCosineExpanded}) {
    Cuvs src;
    src.metric = metric;
    src.elem = 1;
    src.dtype = "<e2";
    auto f = parse_cuvs_ivf_flat(src.bytes(), "x.cuvs");
    ASSERT_TRUE(f) << f.error().message();
    const Bytes file = cuvs_to_index_file(*f, "l2", std::string(64, 'k'));
    auto h = parse_index_file_header(file, "x.udfi");
    ASSERT_TRUE(h) << h.error().message();
    EXPECT_EQ(h->elem, 1u);
    EXPECT_EQ(h->dim, 8u);
    EXPECT_EQ(h->n_lists, 3u);
    EXPECT_EQ(h->coarse, cuvs_coarse(*f));
    EXPECT_EQ(h->size, 35);
    EXPECT_EQ(h->next_id, 202);  // list 2's ids are 200 and 201
    EXPECT_EQ(h->balance, 0.0);
    EXPECT_EQ(h->symbol, "l2");
    EXPECT_EQ(h->cache_key, std::string(64, 'k'));
    auto l = parse_index_file_lists(file, *h, "x.udfi");
    ASSERT_TRUE(l) << l.error().message();
    EXPECT_EQ(l->centroids, f->centroids);
    EXPECT_EQ(l->ids, f->ids);
    EXPECT_EQ(l->vecs, f->vecs);
  }
}

TEST(CuvsFile, EmptyIndexParses) {
  Cuvs src;
  src.sizes = {0, 0};
  auto f = parse_cuvs_ivf_flat(src.bytes(), "x.cuvs");
  ASSERT_TRUE(f) << f.error().message();
  EXPECT_EQ(f->size, 0);
  EXPECT_EQ(next_id_after(f->ids), 0);
}

// The scalars are 128-byte .npy headers (raft pads a 64-byte preamble with 64
// more spaces) and their value: version at byte 4, size at 136, dim at 272,
// n_lists at 404, metric at 536, adaptive_centers at 668, conservative_memory_allocation at 797.
TEST(CuvsFile, DamageNamesTheField) {
  struct Damage {
    const char* what;
    void (*apply)(Cuvs&);
    const char* message;
  };
  const Damage cases[] = {
      {"float64", [](Cuvs& s) { s.dtype = "<f8"; }, "not a cuVS IVF-Flat file (dtype prefix '<f8\\x00' at byte 0"},
      {"FAISS file", [](Cuvs& s) { s.dtype = "IwFl"; }, "dtype prefix 'IwFl' at byte 0"},
      {"version 3", [](Cuvs& s) { s.version = 3; },
       "serialization_version at byte 4: 3 is not 4 or 5 (this reader follows cuVS 25.02 to 26.10)"},
      {"version 6", [](Cuvs& s) { s.version = 6; }, "serialization_version at byte 4: 6 is not 4 or 5"},
      {"dim", [](Cuvs& s) { s.dim = 0; }, "dim at byte 272: 0 is not in 1 .. 65536"},
      {"L1", [](Cuvs& s) { s.metric = 3; }, "metric at byte 536: DistanceType 3 is not L2Expanded (0)"},
      {"metric dtype", [](Cuvs& s) { s.metric_descr = "<i8"; },
       "metric at byte 536: dtype '<i8' is not '<i4' or '<u4'"},
      {"int8 cosine",
       [](Cuvs& s) {
         s.metric = 2;
         s.dtype = "|i1";
         s.elem = 2;
       },
       "metric at byte 536: CosineExpanded over int8_t vectors"},
      {"bool", [](Cuvs& s) { s.adaptive = 2; }, "adaptive_centers at byte 668: 2 is not a bool"},
      {"norms flag", [](Cuvs& s) { s.has_norms = 5; }, "has_norms at byte"},
  };
  for (const Damage& c : cases) {
    Cuvs src;
    c.apply(src);
    const std::string e = parse_error(src.bytes());
    EXPECT_NE(e.find(c.message), std::string::npos) << c.what << ": " << e;
  }
  Cuvs src;
  src.dtype = "<e2";  // the lists stay f32
  const Bytes b = src.bytes();
  EXPECT_NE(parse_error(b).find("list 0 data at byte " + std::to_string(src.at["list 0 data"]) +
                                ": dtype '<f4' is not '<e2'"),
            std::string::npos)
      << parse_error(b);
  src = Cuvs{};
  src.sizes.assign(16385, 0);
  EXPECT_NE(parse_error(src.bytes()).find("n_lists at byte 404: 16385 is not in 1 .. 16384"), std::string::npos);
}

// A good file (of serialization `version`) with `text` written over the
// first `old` in the .npy header of `field`: the error it gives.
std::string damaged(const std::string& field, const std::string& old, const std::string& text, int version = 4) {
  Cuvs src;
  src.version = version;
  Bytes b = src.bytes();
  const std::string head(b.begin() + std::ptrdiff_t(src.at[field]), b.begin() + std::ptrdiff_t(src.at[field] + 128));
  const std::size_t at = head.find(old);
  EXPECT_NE(at, std::string::npos) << old;
  std::memcpy(b.data() + src.at[field] + at, text.data(), text.size());
  return parse_error(b);
}

TEST(CuvsFile, BadNpyBlocksNameTheField) {
  Cuvs src;
  src.bytes();
  const std::string centers = "centers at byte " + std::to_string(src.at["centers"]) + ": ";
  auto has = [](const std::string& e, const std::string& text) {
    EXPECT_NE(e.find(text), std::string::npos) << e;
  };
  has(damaged("centers", "\x93NUMPY", "\x93NUMPX"), centers + "not a NumPy block (magic '\\x93NUMPX'");
  has(damaged("centers", std::string("\x01\x00", 2), std::string("\x02\x00", 2)), centers + "NumPy format 2.0");
  has(damaged("centers", "{", "["), centers + "bad NumPy header: expected '{'");
  has(damaged("centers", "descr", "DESCR"), centers + "bad NumPy header: key 'DESCR' is unknown or repeated");
  has(damaged("centers", "'fortran_order'", "'descr'        "), "key 'descr' is unknown or repeated");
  has(damaged("centers", "False", "True "), centers + "fortran_order is True");
  has(damaged("centers", "False", "Fals "), "fortran_order is not True or False");
  has(damaged("centers", "(3, 8)", "(4, 8)"), centers + "shape (4, 8) is not (3, 8)");
  has(damaged("centers", "(3, 8)", "(3, 8, 1)}"), centers + "shape (3, 8, 1) is not (3, 8)");
  has(damaged("centers", "(3, 8)}", "(99999999999999999999, 8)}"), "a shape extent overflows");
  has(damaged("centers", "(3, 8)", "(x, 8)"), "a shape extent is not a number");
  has(damaged("centers", "'<f4'", "'<f8'"), centers + "dtype '<f8' is not '<f4'");
  has(damaged("centers", "\n", " "), "the header does not end with spaces and \"\\n\"");
  has(damaged("version", "()}", "(1,)}"), "serialization_version at byte 4: shape (1,) is not () (a scalar)");
}

TEST(CuvsFile, InconsistentCountsAreRefused) {
  Cuvs src;
  Bytes b = src.bytes();
  // list_sizes claims 34 rows in list 0: they add up to 36, size is 35.
  const std::uint32_t s34 = 34;
  std::memcpy(b.data() + src.at["list_sizes"] + 128, &s34, 4);
  EXPECT_NE(parse_error(b).find("list_sizes at byte " + std::to_string(src.at["list_sizes"]) +
                                ": they add up to 36, size is 35"),
            std::string::npos)
      << parse_error(b);
  // list 2 (2 rows) written with 64 padded rows.
  b = src.bytes();
  const std::uint32_t n64 = 64;
  std::memcpy(b.data() + src.at["list 2 size"] + 128, &n64, 4);
  EXPECT_NE(parse_error(b).find("list 2 size at byte " + std::to_string(src.at["list 2 size"]) +
                                ": 64 is not list_sizes[2] = 2 rounded up to 32 (serialization version 4)"),
            std::string::npos)
      << parse_error(b);
  // Version 5 writes the size itself: a rounded-up one is refused, and so is
  // a version 4 file labelled 5.
  src.version = 5;
  b = src.bytes();
  const std::uint32_t n32 = 32;
  std::memcpy(b.data() + src.at["list 2 size"] + 128, &n32, 4);
  EXPECT_NE(parse_error(b).find("list 2 size at byte " + std::to_string(src.at["list 2 size"]) +
                                ": 32 is not list_sizes[2] = 2 (serialization version 5)"),
            std::string::npos)
      << parse_error(b);
  src.version = 4;
  b = src.bytes();
  const std::int32_t v5 = 5;
  std::memcpy(b.data() + src.at["version"] + 128, &v5, 4);
  EXPECT_NE(parse_error(b).find("list 0 size at byte " + std::to_string(src.at["list 0 size"]) +
                                ": 64 is not list_sizes[0] = 33 (serialization version 5)"),
            std::string::npos)
      << parse_error(b);
  // Version 5's ids are the list's size, its data whole groups of 32.
  src.version = 5;
  src.bytes();
  EXPECT_NE(damaged("list 0 indices", "(33,)", "(64,)", 5).find("list 0 indices at byte " +
                                                                 std::to_string(src.at["list 0 indices"]) +
                                                                 ": shape (64,) is not (33,)"),
            std::string::npos);
  EXPECT_NE(damaged("list 0 data", "(64, 8)", "(33, 8)", 5).find("shape (33, 8) is not (64, 8)"), std::string::npos);
}

// A shape that announces more than the file holds is refused before it is
// allocated (allocation_limit.h fails every allocation above 256 MB).
TEST(CuvsFile, ShapesAreCheckedAgainstTheFileBeforeTheyAreAllocated) {
  Cuvs src;
  src.sizes = {40000000, 0};  // 40e6 rows x 8 f32 announced; the file ends after the data's header
  src.stop_at = "list 0 data";
  const Bytes b = src.bytes();
  EXPECT_NE(parse_error(b).find("list 0 data at byte " + std::to_string(src.at["list 0 data"] + 128) +
                                ": truncated (needs 1280000000 bytes, 0 left)"),
            std::string::npos)
      << parse_error(b);
}

// A NaN or infinite centroid makes the coarse ranking meaningless (as for FAISS files).
TEST(CuvsFile, CentroidsMustBeFinite) {
  Cuvs src;
  Bytes b = src.bytes();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::size_t at = src.at["centers"] + 128 + (8 + 3) * 4;  // centroid 1, value 3
  std::memcpy(b.data() + at, &nan, 4);
  EXPECT_NE(parse_error(b).find("centers at byte " + std::to_string(at) + ": centroid 1 value 3 is not finite"),
            std::string::npos)
      << parse_error(b);
  // A finite int8 centroid that is not finite times 128.
  src.dtype = "|i1";
  src.elem = 2;
  src.dim = 16;
  b = src.bytes();
  const float big = std::numeric_limits<float>::max() / 64;
  std::memcpy(b.data() + src.at["centers"] + 128, &big, 4);
  EXPECT_NE(parse_error(b).find("centroid 0 value 0 is not finite (times 128)"), std::string::npos) << parse_error(b);
}

TEST(CuvsFile, TruncationAndTrailingBytes) {
  for (std::int32_t version : {4, 5}) {
    Cuvs src;
    src.version = version;
    src.sizes = {33, 0, 1};
    const Bytes good = src.bytes();
    ASSERT_TRUE(parse_cuvs_ivf_flat(good, "x.cuvs"));
    for (std::size_t n = good.size() / 2; n < good.size(); ++n)
      EXPECT_FALSE(parse_cuvs_ivf_flat(Bytes(good.begin(), good.begin() + std::ptrdiff_t(n)), "x.cuvs"))
          << "version " << version << ": accepted " << n << " of " << good.size() << " bytes";
  }
  Cuvs src;
  src.sizes = {3, 0, 1};
  const Bytes good = src.bytes();
  ASSERT_TRUE(parse_cuvs_ivf_flat(good, "x.cuvs"));
  for (std::size_t n = 0; n < good.size(); ++n) {
    const Bytes cut(good.begin(), good.begin() + n);
    EXPECT_FALSE(parse_cuvs_ivf_flat(cut, "x.cuvs")) << "accepted " << n << " of " << good.size() << " bytes";
  }
  EXPECT_NE(parse_error(Bytes(good.begin(), good.end() - 1)).find("list 2 indices at byte"), std::string::npos);
  EXPECT_NE(parse_error(Bytes(good.begin(), good.begin() + 2)).find("dtype at byte 0: truncated"), std::string::npos);
  Bytes longer = good;
  longer.push_back(0);
  EXPECT_NE(parse_error(longer).find("end at byte " + std::to_string(good.size()) + ": trailing bytes"),
            std::string::npos);
}

// Files the real cuVS 26.10 wrote (cuvs-cu13 26.10.0 on an H200; serialization
// version 5): test/data/cuvs_26_10/make_files.py, 300 rows of dim 12 in 4
// lists, ids 0..299.  <file>.rows.npy (make_rows.py, NumPy on the CPU) holds
// the rows cuVS was given, row i the vector of id i, in the index's element type.
TEST(CuvsFile, ReadsWhatCuvs2610Wrote) {
  struct Case {
    const char* name;
    std::uint32_t elem;
    std::int32_t metric;
  };
  const Case cases[] = {{"float32-sqeuclidean", 0, kCuvsL2Expanded}, {"float32-inner_product", 0, kCuvsInnerProduct},
                        {"float16-sqeuclidean", 1, kCuvsL2Expanded}, {"int8-sqeuclidean", 2, kCuvsL2Expanded},
                        {"uint8-sqeuclidean", 3, kCuvsL2Expanded},   {"float32-cosine", 0, kCuvsCosineExpanded}};
  const std::string dir = std::string(UDF_SOURCE_DIR) + "/test/data/cuvs_26_10/";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto f = parse_cuvs_ivf_flat(slurp(dir + c.name + ".cuvs"), c.name);
    ASSERT_TRUE(f) << f.error().message();
    auto rows = udf::read_vector_file(dir + c.name + ".rows.npy");
    ASSERT_TRUE(rows) << rows.error().message();
    ASSERT_EQ(rows->rows, 300u);
    ASSERT_EQ(rows->cols, 12u);
    EXPECT_EQ(f->version, 5);
    EXPECT_EQ(f->elem, c.elem);
    EXPECT_EQ(f->metric, c.metric);
    EXPECT_EQ(f->dim, 12u);
    EXPECT_EQ(f->n_lists, 4u);
    EXPECT_EQ(f->size, 300);
    EXPECT_EQ(f->veclen, c.elem == 0 ? 4u : 1u);  // 16 / sizeof(T) when it divides 12
    for (float x : f->centroids) EXPECT_TRUE(std::isfinite(x));
    const std::size_t es = f->elem_size(), row = 12 * es;
    std::vector<int> seen(300, 0);
    std::size_t total = 0;
    for (std::uint32_t l = 0; l < 4; ++l) {
      total += f->ids[l].size();
      ASSERT_EQ(f->vecs[l].size(), f->ids[l].size() * row);
      for (std::size_t i = 0; i < f->ids[l].size(); ++i) {
        const std::int64_t id = f->ids[l][i];
        ASSERT_TRUE(id >= 0 && id < 300) << id;
        ++seen[std::size_t(id)];
        const std::uint8_t* want = rows->data.data() + std::size_t(id) * row;
        const std::uint8_t* got = f->vecs[l].data() + i * row;
        if (c.metric != kCuvsCosineExpanded) {
          EXPECT_EQ(std::memcmp(got, want, row), 0) << "list " << l << " row " << i << " id " << id;
          continue;
        }
        // The reader's normalization: the sum of squares in double, each value times its inverse root.
        const float* w = reinterpret_cast<const float*>(want);
        double s = 0;
        for (int k = 0; k < 12; ++k) s += double(w[k]) * w[k];
        for (int k = 0; k < 12; ++k) EXPECT_EQ(element_at(*f, l, i * 12 + k), float(w[k] / std::sqrt(s))) << id;
      }
    }
    EXPECT_EQ(total, 300u);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 300) << "the ids are not a permutation of 0..299";
    // Every row is in the list of its nearest centroid under the coarse metric
    // (int8 / uint8 centroids scaled, cosine ones normalized): the ranking of
    // lists this runtime's probe sees is cuVS's.
    for (std::uint32_t l = 0; l < 4; ++l)
      for (std::size_t i = 0; i < f->ids[l].size(); ++i) {
        std::uint32_t best = 0;
        double best_score = 0;
        for (std::uint32_t m = 0; m < 4; ++m) {
          double score = 0;
          for (std::uint32_t k = 0; k < 12; ++k) {
            const double x = element_at(*f, l, i * 12 + k), y = f->centroids[m * 12 + k];
            score += cuvs_coarse(*f) == 0 ? (x - y) * (x - y) : -x * y;
          }
          if (m == 0 || score < best_score) best = m, best_score = score;
        }
        EXPECT_EQ(best, l) << "id " << f->ids[l][i];
      }
  }
}

// The fuzz target's seeds (test/fuzz/make_seeds.py, a Python writer of the
// same format) are valid files.
TEST(CuvsFile, FuzzSeedsParse) {
  const std::string dir = std::string(UDF_SOURCE_DIR) + "/test/fuzz/corpus/cuvs_file/";
  for (const char* name : {"seed-f32-l2.cuvs", "seed-f32-ip-u4-metric.cuvs", "seed-f16-cosine.cuvs",
                           "seed-i8-l2-veclen1.cuvs", "seed-u8-ip.cuvs", "seed-f32-l2-v5.cuvs"}) {
    auto f = parse_cuvs_ivf_flat(slurp(dir + name), name);
    ASSERT_TRUE(f) << f.error().message();
    EXPECT_EQ(f->version, std::string(name) == "seed-f32-l2-v5.cuvs" ? 5 : 4) << name;
  }
}

}  // namespace
