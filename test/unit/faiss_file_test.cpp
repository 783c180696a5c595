// The FAISS IndexIVFFlat reader (lib/runtime/index/faiss_file.h), without a
// GPU: a hand-made file in the layout faiss::write_index writes (both list
// encodings) parses to its centroids and lists and converts to an index file
// that parses back equal; each kind of damage is refused naming its field
// and byte offset, before anything larger than the file is allocated.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "index/faiss_file.h"
#include "index/index_file.h"

#include "allocation_limit.h"

namespace {

using namespace udf::rt;
using Bytes = std::vector<std::uint8_t>;

// An IndexIVFFlat as faiss::write_index writes it (faiss/impl/index_write.cpp).
struct Faiss {
  std::string fourcc = "IwFl", quantizer = "IxF2", invlists = "ilar";
  std::int32_t d = 2, metric = 1, q_metric = 1;
  std::uint64_t nlist = 3, code_size = 8;
  std::uint8_t trained = 1, direct_map = 0;
  std::vector<std::vector<std::int64_t>> lists = {{10, 12}, {}, {11}};
  bool sparse = false;

  std::int64_t ntotal() const {
    std::int64_t n = 0;
    for (const auto& l : lists) n += std::int64_t(l.size());
    return n;
  }
  Bytes bytes() const {
    Bytes b;
    auto put = [&](const auto& v) {
      const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
      b.insert(b.end(), p, p + sizeof v);
    };
    auto tag = [&](const std::string& s) { b.insert(b.end(), s.begin(), s.begin() + 4); };
    auto header = [&](std::int64_t n, std::int32_t m) {
      put(d);
      put(n);
      put(std::int64_t(1) << 20);
      put(std::int64_t(1) << 20);
      put(trained);
      put(m);
    };
    tag(fourcc);
    header(ntotal(), metric);
    put(nlist);
    put(std::uint64_t(1));  // nprobe
    tag(quantizer);
    header(std::int64_t(nlist), q_metric);
    put(std::uint64_t(nlist * d));
    for (std::uint64_t i = 0; i < nlist * d; ++i) put(float(i) * 0.5f);
    put(direct_map);
    put(std::uint64_t(0));
    tag(invlists);
    put(nlist);
    put(code_size);
    std::vector<std::uint64_t> sizes;
    for (std::size_t l = 0; l < lists.size(); ++l)
      if (!sparse)
        sizes.push_back(lists[l].size());
      else if (!lists[l].empty())
        sizes.insert(sizes.end(), {l, lists[l].size()});
    tag(sparse ? "sprs" : "full");
    put(std::uint64_t(sizes.size()));
    for (auto s : sizes) put(s);
    for (const auto& l : lists) {
      for (std::int64_t id : l)
        for (std::int32_t j = 0; j < d; ++j) put(float(id) + float(j) / 4);
      for (std::int64_t id : l) put(id);
    }
    return b;
  }
};

std::string parse_error(const Bytes& b) {
  auto f = parse_faiss_ivf_flat(b, "x.faiss");
  return f ? std::string("accepted") : f.error().message();
}

void expect_lists(const FaissIvfFlat& f, const Faiss& src) {
  ASSERT_EQ(f.n_lists, src.lists.size());
  for (std::size_t l = 0; l < src.lists.size(); ++l) {
    EXPECT_EQ(f.ids[l], src.lists[l]);
    ASSERT_EQ(f.vecs[l].size(), src.lists[l].size() * src.d * 4);
    for (std::size_t i = 0; i < src.lists[l].size(); ++i) {
      float v[2];
      std::memcpy(v, f.vecs[l].data() + i * 8, 8);
      EXPECT_EQ(v[0], float(src.lists[l][i]));
      EXPECT_EQ(v[1], float(src.lists[l][i]) + 0.25f);
    }
  }
}

TEST(FaissFile, FullAndSparseListsParse) {
  for (bool sparse : {false, true}) {
    Faiss src;
    src.sparse = sparse;
    if (sparse) src.lists = {{}, {7}, {}};
    auto f = parse_faiss_ivf_flat(src.bytes(), "x.faiss");
    ASSERT_TRUE(f) << f.error().message();
    EXPECT_EQ(f->dim, 2u);
    EXPECT_EQ(f->size, src.ntotal());
    EXPECT_EQ(f->metric, kFaissMetricL2);
    EXPECT_EQ(f->centroids, (std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f}));
    expect_lists(*f, src);
  }
}

TEST(FaissFile, InnerProductAndDirectMapParse) {
  Faiss src;
  src.metric = src.q_metric = 0;
  src.quantizer = "IxFI";
  src.direct_map = 1;  // an empty array: the map is skipped
  auto f = parse_faiss_ivf_flat(src.bytes(), "x.faiss");
  ASSERT_TRUE(f) << f.error().message();
  EXPECT_EQ(f->metric, kFaissMetricInnerProduct);
}

TEST(FaissFile, ConvertsToAnIndexFile) {
  Faiss src;
  src.lists = {{10, -3}, {}, {11}};
  auto f = parse_faiss_ivf_flat(src.bytes(), "x.faiss");
  ASSERT_TRUE(f) << f.error().message();
  EXPECT_EQ(faiss_next_id(*f), 12);
  const Bytes file = faiss_to_index_file(*f, "l2", std::string(64, 'k'));
  auto h = parse_index_file_header(file, "x.udfi");
  ASSERT_TRUE(h) << h.error().message();
  EXPECT_EQ(h->elem, 0u);
  EXPECT_EQ(h->dim, 2u);
  EXPECT_EQ(h->n_lists, 3u);
  EXPECT_EQ(h->coarse, 0u);  // UDF_IVF_INDEX_V1_L2
  EXPECT_EQ(h->size, 3);
  EXPECT_EQ(h->next_id, 12);
  EXPECT_EQ(h->balance, 0.0);
  EXPECT_EQ(h->symbol, "l2");
  EXPECT_EQ(h->cache_key, std::string(64, 'k'));
  auto l = parse_index_file_lists(file, *h, "x.udfi");
  ASSERT_TRUE(l) << l.error().message();
  EXPECT_EQ(l->centroids, f->centroids);
  EXPECT_EQ(l->ids, f->ids);
  EXPECT_EQ(l->vecs, f->vecs);
}

TEST(FaissFile, EmptyIndexHasNextIdZero) {
  Faiss src;
  src.lists = {{}, {}, {}};
  auto f = parse_faiss_ivf_flat(src.bytes(), "x.faiss");
  ASSERT_TRUE(f) << f.error().message();
  EXPECT_EQ(faiss_next_id(*f), 0);
}

struct Damage {
  const char* what;
  void (*apply)(Faiss&);
  const char* message;
};

TEST(FaissFile, DamageNamesTheField) {
  const Damage cases[] = {
      {"another index", [](Faiss& s) { s.fourcc = "IwPQ"; }, "not a FAISS IndexIVFFlat file (fourcc 'IwPQ' at byte 0"},
      {"bad d", [](Faiss& s) { s.d = 0; }, "index d at byte 4: 0 is not in 1 .. 65536"},
      {"untrained", [](Faiss& s) { s.trained = 0; }, "index is_trained at byte 32"},
      {"other metric", [](Faiss& s) { s.metric = 2; }, "index metric_type at byte 33: 2 is not METRIC_L2"},
      {"too many lists", [](Faiss& s) { s.nlist = 20000; }, "nlist at byte 37: 20000 is not in 1 .. 16384"},
      {"HNSW quantizer", [](Faiss& s) { s.quantizer = "IHNf"; }, "quantizer fourcc at byte 53: 'IHNf'"},
      {"quantizer metric", [](Faiss& s) { s.q_metric = 0; }, "quantizer metric_type at byte 86: differs"},
      {"bad direct map", [](Faiss& s) { s.direct_map = 7; }, "direct_map type at byte 122: 7"},
      {"on-disk lists", [](Faiss& s) { s.invlists = "ilod"; }, "invlists fourcc at byte 131: 'ilod'"},
      {"code size", [](Faiss& s) { s.code_size = 4; }, "invlists code_size at byte 143: 4 is not 4 x d = 8"},
  };
  for (const Damage& c : cases) {
    Faiss src;
    c.apply(src);
    const std::string e = parse_error(src.bytes());
    EXPECT_NE(e.find(c.message), std::string::npos) << c.what << ": " << e;
  }
}

TEST(FaissFile, InconsistentCountsAreRefused) {
  Faiss src;
  Bytes b = src.bytes();
  // The "full" sizes start at byte 163 (after the list type and the count); list 0 announces 2^40 vectors.
  const std::size_t sizes_at = 163;
  std::uint64_t huge = std::uint64_t(1) << 40;
  std::memcpy(b.data() + sizes_at, &huge, 8);
  EXPECT_NE(parse_error(b).find("invlists sizes at byte 163: list size 1099511627776 exceeds"), std::string::npos)
      << parse_error(b);
  b = src.bytes();
  std::uint64_t one = 1;
  std::memcpy(b.data() + sizes_at, &one, 8);  // 1 + 0 + 1 vectors, ntotal 3
  EXPECT_NE(parse_error(b).find("invlists sizes at byte 151: they add up to 2, ntotal is 3"), std::string::npos)
      << parse_error(b);
  // A quantizer codes count beyond the file.
  b = src.bytes();
  std::uint64_t many = std::uint64_t(1) << 60;
  std::memcpy(b.data() + 90, &many, 8);
  EXPECT_NE(parse_error(b).find("quantizer codes at byte 90: count 1152921504606846976"), std::string::npos)
      << parse_error(b);
}

// Found by the faiss_file fuzz target (test/fuzz/regressions/faiss_file/nan-centroid).
TEST(FaissFile, CentroidsMustBeFinite) {
  Bytes b = Faiss{}.bytes();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(b.data() + 98 + 3 * 4, &nan, 4);  // centroid 1, value 1
  EXPECT_NE(parse_error(b).find("quantizer codes at byte 110: centroid 1 value 1 is not finite"), std::string::npos)
      << parse_error(b);
}

TEST(FaissFile, SparseEntriesMustNameDistinctLists) {
  Faiss src;
  src.sparse = true;
  src.lists = {{}, {7}, {}};
  Bytes b = src.bytes();
  const std::size_t pair_at = 163;
  std::uint64_t bad_list = 3;
  std::memcpy(b.data() + pair_at, &bad_list, 8);
  EXPECT_NE(parse_error(b).find("invlists sizes at byte 163: sparse entry (list 3, size 1)"), std::string::npos)
      << parse_error(b);
}

TEST(FaissFile, TruncationAndTrailingBytes) {
  const Bytes good = Faiss{}.bytes();
  for (std::size_t n = 0; n < good.size(); ++n) {
    const Bytes cut(good.begin(), good.begin() + n);
    EXPECT_FALSE(parse_faiss_ivf_flat(cut, "x.faiss")) << "accepted " << n << " of " << good.size() << " bytes";
  }
  EXPECT_NE(parse_error(Bytes(good.begin(), good.end() - 1)).find("list 2 at byte"), std::string::npos);
  Bytes longer = good;
  longer.push_back(0);
  EXPECT_NE(parse_error(longer).find("end at byte " + std::to_string(good.size()) + ": trailing bytes"),
            std::string::npos);
}

}  // namespace

namespace {

// The fuzz target's seeds (test/fuzz/make_seeds.py), which faiss-cpu reads
// back and writes again byte for byte, are valid files.
TEST(FaissFile, FuzzSeedsParse) {
  const std::string dir = std::string(UDF_SOURCE_DIR) + "/test/fuzz/corpus/faiss_file/";
  for (const char* name : {"seed-l2-full.faiss", "seed-ip-full.faiss", "seed-l2-sparse.faiss",
                           "seed-l2-direct-map.faiss"}) {
    FILE* fp = std::fopen((dir + name).c_str(), "rb");
    ASSERT_NE(fp, nullptr) << name;
    Bytes b;
    for (int c; (c = std::fgetc(fp)) != EOF;) b.push_back(std::uint8_t(c));
    std::fclose(fp);
    auto f = parse_faiss_ivf_flat(b, name);
    EXPECT_TRUE(f) << f.error().message();
  }
}

}  // namespace
