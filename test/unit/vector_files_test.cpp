// .fvecs/.bvecs/.ivecs/.npy readers and the .npy writer (include/udf/data/vector_files.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "udf/data/vector_files.h"

namespace {

using udf::Bytes;
using udf::DType;

Bytes vecs(int dim, int n, int elem_size, int bad_dim_at = -1) {
  Bytes b;
  for (int i = 0; i < n; ++i) {
    int d = i == bad_dim_at ? dim + 1 : dim;
    b.insert(b.end(), reinterpret_cast<std::uint8_t*>(&d), reinterpret_cast<std::uint8_t*>(&d) + 4);
    for (int j = 0; j < d * elem_size; ++j) b.push_back(static_cast<std::uint8_t>(i + j));
  }
  return b;
}

Bytes npy(const std::string& dict, std::size_t data_bytes, int major = 1) {
  std::string h = dict;
  std::size_t pre = major == 1 ? 10 : 12;
  while ((pre + h.size() + 1) % 64) h += ' ';
  h += '\n';
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(major), 0};
  b.push_back(h.size() & 0xff);
  b.push_back((h.size() >> 8) & 0xff);
  if (major != 1) { b.push_back(0); b.push_back(0); }
  b.insert(b.end(), h.begin(), h.end());
  b.insert(b.end(), data_bytes, 0);
  return b;
}

std::string err(const udf::Error& e) { return e.message(); }

TEST(Vecs, Fvecs) {
  auto m = udf::parse_vecs(vecs(4, 3, 4), DType::F32, "a.fvecs");
  ASSERT_TRUE(m) << err(m.error());
  EXPECT_EQ(m->rows, 3u);
  EXPECT_EQ(m->cols, 4u);
  EXPECT_EQ(m->data.size(), 48u);
}

TEST(Vecs, Errors) {
  auto t = udf::parse_vecs([] { auto b = vecs(4, 3, 4); b.resize(b.size() - 3); return b; }(), DType::F32, "t.fvecs");
  ASSERT_FALSE(t);
  EXPECT_EQ(err(t.error()), "t.fvecs: truncated: vector 2 needs 16 bytes, 13 left");
  auto d = udf::parse_vecs(vecs(4, 3, 1, 1), DType::U8, "d.bvecs");
  ASSERT_FALSE(d);
  EXPECT_EQ(err(d.error()), "d.bvecs: dimension mismatch: vector 1 has dimension 5, vector 0 has 4");
  Bytes neg = {0xff, 0xff, 0xff, 0xff};
  auto n = udf::parse_vecs(neg, DType::I32, "n.ivecs");
  ASSERT_FALSE(n);
  EXPECT_EQ(err(n.error()), "n.ivecs: bad header: vector 0 has dimension -1");
  auto e = udf::parse_vecs(Bytes{}, DType::F32, "e.fvecs");
  ASSERT_FALSE(e);
  EXPECT_EQ(err(e.error()), "e.fvecs: empty file: no vectors");
  auto p = udf::parse_vecs(Bytes{4, 0}, DType::F32, "p.fvecs");
  ASSERT_FALSE(p);
  EXPECT_EQ(err(p.error()), "p.fvecs: truncated: vector 0 has a partial dimension field");
}

TEST(Npy, ReadsEveryDtype) {
  struct { const char* descr; DType t; std::size_t size; } cases[] = {
      {"<f4", DType::F32, 4}, {"<f2", DType::F16, 2}, {"|i1", DType::I8, 1}, {"|u1", DType::U8, 1},
      {"<i4", DType::I32, 4}, {"<i8", DType::I64, 8}, {"<f8", DType::F64, 8}};
  for (auto c : cases) {
    std::string dict = std::string("{'descr': '") + c.descr + "', 'fortran_order': False, 'shape': (3, 5), }";
    auto m = udf::parse_npy(npy(dict, 15 * c.size), "x.npy");
    ASSERT_TRUE(m) << c.descr << ": " << err(m.error());
    EXPECT_EQ(m->dtype, c.t);
    EXPECT_EQ(m->rows, 3u);
    EXPECT_EQ(m->cols, 5u);
  }
  auto one = udf::parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }", 28, 2), "w.npy");
  ASSERT_TRUE(one) << err(one.error());
  EXPECT_TRUE(one->one_d);
  EXPECT_EQ(one->rows, 7u);
}

TEST(Npy, Errors) {
  auto bad = [](const Bytes& b) { auto m = udf::parse_npy(b, "b.npy"); return m ? std::string("ok") : err(m.error()); };
  EXPECT_EQ(bad(Bytes{1, 2, 3}), "b.npy: truncated .npy file (no header)");
  EXPECT_EQ(bad(Bytes(20, 'x')), "b.npy: not a .npy file (bad magic)");
  EXPECT_EQ(bad(npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", 16)), "b.npy: unsupported dtype '>f4'");
  EXPECT_EQ(bad(npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 2), }", 16)), "b.npy: unsupported dtype '<c8'");
  EXPECT_EQ(bad(npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16)),
            "b.npy: Fortran-order arrays are not supported; save with numpy.ascontiguousarray");
  EXPECT_EQ(bad(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2, 2), }", 32)),
            "b.npy: expected a 1-D or 2-D array, found 3 dimensions");
  EXPECT_EQ(bad(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 12)),
            "b.npy: truncated .npy file: shape 2x2 f32 needs 16 data bytes, found 12");
  EXPECT_EQ(bad(npy("{'descr': '<f4', 'shape': (2, 2), }", 16)), "b.npy: bad .npy header: missing 'descr', 'fortran_order' or 'shape'");
  EXPECT_EQ(bad(npy("['descr']", 16)), "b.npy: bad .npy header: expected '{'");
  Bytes big = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 16);
  big[8] = 0xff;
  big[9] = 0xff;
  EXPECT_EQ(bad(big), "b.npy: truncated .npy file (header runs past the end)");
}

TEST(Npy, RoundTripAndConvert) {
  udf::HostMatrix m{DType::F32, 2, 3, false, {}};
  m.data.resize(24);
  float v[6] = {1, -2, 3.5f, 0, 65504, -0.25f};
  std::memcpy(m.data.data(), v, 24);
  auto back = udf::parse_npy(udf::serialize_npy(m), "r.npy");
  ASSERT_TRUE(back) << err(back.error());
  EXPECT_EQ(back->data, m.data);
  EXPECT_EQ(udf::serialize_npy(m).size() % 64, 24u);  // header padded to 64
  auto h = udf::convert(m, DType::F16, "r.npy");
  ASSERT_TRUE(h);
  auto f = udf::convert(*h, DType::F32, "r.npy");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->data, m.data);  // all exactly representable in f16
  auto i = udf::convert(m, DType::I8, "r.npy");
  ASSERT_FALSE(i);
  EXPECT_EQ(err(i.error()), "r.npy: element 2 (3.5) does not fit i8");
  EXPECT_EQ(udf::half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(udf::float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(udf::half_to_float(udf::float_to_half(1e-6f)), udf::half_to_float(0x0011));
}

TEST(Files, UnknownExtensionAndMissingFile) {
  auto x = udf::read_vector_file("data.csv");
  ASSERT_FALSE(x);
  EXPECT_EQ(err(x.error()), "data.csv: unknown vector file format '.csv' (expected .fvecs, .bvecs, .ivecs or .npy)");
  auto y = udf::read_vector_file("/nonexistent/q.npy");
  ASSERT_FALSE(y);
  EXPECT_NE(err(y.error()).find("cannot open '/nonexistent/q.npy'"), std::string::npos);
}

// Files are read in place: a regular file's size is checked against the
// limit and against what its header claims before anything is allocated;
// the results and errors are those of parse_npy / parse_vecs on its bytes.
class InPlace : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("udf_vector_files_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const Bytes& b) {
    std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return p;
  }
  std::filesystem::path dir_;
};

Bytes fvecs_of(int dim, int n, int bad_dim_at = -1) {
  Bytes b;
  for (int i = 0; i < n; ++i) {
    int d = i == bad_dim_at ? dim + 1 : dim;
    b.insert(b.end(), reinterpret_cast<std::uint8_t*>(&d), reinterpret_cast<std::uint8_t*>(&d) + 4);
    for (int j = 0; j < d; ++j) {
      float v = static_cast<float>(i * 1000 + j);
      b.insert(b.end(), reinterpret_cast<std::uint8_t*>(&v), reinterpret_cast<std::uint8_t*>(&v) + 4);
    }
  }
  return b;
}

TEST_F(InPlace, NpyHeaderIsCheckedAgainstTheFileSize) {
  // A header that claims 10^12 x 10^6 floats in a file of a few bytes: an
  // error, no allocation.
  auto p = write("huge.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 1000000), }", 16));
  auto m = udf::read_vector_file(p);
  ASSERT_FALSE(m);
  EXPECT_NE(err(m.error()).find("truncated .npy file: shape 1000000000000x1000000 f32 needs"), std::string::npos);
  Bytes good = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (5, 3), }", 60);
  for (std::size_t i = 0; i < 60; ++i) good[good.size() - 60 + i] = static_cast<std::uint8_t>(i * 7);
  auto q = udf::read_vector_file(write("good.npy", good));
  auto want = udf::parse_npy(good, "good.npy");
  ASSERT_TRUE(q) << err(q.error());
  ASSERT_TRUE(want);
  EXPECT_EQ(q->rows, 5u);
  EXPECT_EQ(q->cols, 3u);
  EXPECT_EQ(q->data, want->data);
  Bytes v2 = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8, 2);
  auto r2 = udf::read_vector_file(write("v2.npy", v2));
  ASSERT_TRUE(r2) << err(r2.error());
  EXPECT_TRUE(r2->one_d);
  // Truncated, trailing data, a header past the end, no header: the parser's messages.
  std::vector<std::pair<std::string, Bytes>> cases = {
      {"short.npy", Bytes(good.begin(), good.end() - 4)},
      {"long.npy", [&] { Bytes b = good; b.push_back(0); return b; }()},
      {"head.npy", Bytes(good.begin(), good.begin() + 20)},
      {"tiny.npy", Bytes(good.begin(), good.begin() + 5)},
      {"v2head.npy", Bytes(v2.begin(), v2.begin() + 11)},
      {"magic.npy", Bytes(16, 'x')},
  };
  for (const auto& [name, bytes] : cases) {
    auto path = write(name, bytes);
    auto r = udf::read_vector_file(path);
    auto w = udf::parse_npy(bytes, path);
    ASSERT_FALSE(r) << name;
    ASSERT_FALSE(w) << name;
    EXPECT_EQ(err(r.error()), err(w.error())) << name;
  }
}

TEST_F(InPlace, VecsReadInPiecesAsParsedWhole) {
  // 1000-dimensional records, 10 MB: more than one 8 MiB piece.
  Bytes b = fvecs_of(1000, 2500);
  auto r = udf::read_vector_file(write("a.fvecs", b));
  auto w = udf::parse_vecs(b, DType::F32, "a.fvecs");
  ASSERT_TRUE(r) << err(r.error());
  ASSERT_TRUE(w);
  EXPECT_EQ(r->rows, 2500u);
  EXPECT_EQ(r->cols, 1000u);
  EXPECT_EQ(r->data, w->data);
  // Errors in a later piece, at the end, and in the first record: as parsed whole.
  std::vector<std::pair<std::string, Bytes>> cases = {
      {"mismatch.fvecs", fvecs_of(1000, 2500, 2400)},
      {"truncated.fvecs", Bytes(b.begin(), b.end() - 10)},
      {"partial.fvecs", [&] { Bytes x = b; x.push_back(1); x.push_back(0); return x; }()},
      {"zero.fvecs", Bytes{0, 0, 0, 0, 1, 2, 3}},
      {"huge-dim.fvecs", Bytes{0, 0, 0, 0x7f, 1, 2, 3}},
      {"two.fvecs", Bytes{4, 0}},
      {"empty.fvecs", Bytes{}},
  };
  for (const auto& [name, bytes] : cases) {
    auto path = write(name, bytes);
    auto rr = udf::read_vector_file(path);
    auto ww = udf::parse_vecs(bytes, DType::F32, path);
    ASSERT_FALSE(rr) << name;
    ASSERT_FALSE(ww) << name;
    EXPECT_EQ(err(rr.error()), err(ww.error())) << name;
  }
}

TEST_F(InPlace, OverTheLimitIsRefusedFromTheSize) {
  std::string p = (dir_ / "big.fvecs").string();
  std::ofstream(p).close();
  std::filesystem::resize_file(p, udf::limits::kVectorFile.max_bytes + 1);  // sparse
  auto r = udf::read_vector_file(p);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().diagnostics().front().code, udf::DiagCode::FileTooLarge);
  EXPECT_NE(err(r.error()).find("more than the 256 GiB limit for vector files"), std::string::npos);
}

}  // namespace
