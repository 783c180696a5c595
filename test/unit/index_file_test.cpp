// The index file's parser (lib/runtime/index/index_file.h), without a GPU: a file
// udf_index_save would write parses back; crafted files (with a valid
// checksum) are rejected before anything larger than the file is allocated,
// and header values udf_index_build would refuse are refused.  Regression
// inputs of the index_file fuzz target (test/fuzz/regressions/index_file/).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "index/index_file.h"
#include "udf/support/hash.h"

#include "allocation_limit.h"  // a reader allocating what a header announces fails here

namespace {

using namespace udf::rt;
using Bytes = std::vector<std::uint8_t>;

struct File {
  std::uint32_t elem = 0, dim = 2, n_lists = 2, coarse = 0;
  std::int64_t size = 3, next_id = 3;
  double balance = 2.0;
  std::string symbol = "l2", key = std::string(64, 'a');
  std::vector<std::vector<std::int64_t>> lists = {{0, 2}, {1}};
  std::vector<float> weights;  // written after the key when coarse has kCoarseWeights
  bool lists_written = true;

  Bytes bytes() const {
    Bytes b(kIndexFileMagic, kIndexFileMagic + 8);
    auto put = [&](const auto& v) {
      const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
      b.insert(b.end(), p, p + sizeof v);
    };
    auto str = [&](const std::string& s) {
      put(static_cast<std::uint32_t>(s.size()));
      b.insert(b.end(), s.begin(), s.end());
    };
    put(kIndexFileMajor);
    put(kIndexFileMinor);
    put(elem);
    put(dim);
    put(n_lists);
    put(coarse);
    put(size);
    put(next_id);
    put(balance);
    str(symbol);
    str(key);
    for (float w : weights) put(w);
    if (lists_written) {
      for (std::size_t i = 0; i < std::size_t(n_lists) * dim; ++i) put(static_cast<float>(i));
      for (const auto& l : lists) put(static_cast<std::uint64_t>(l.size()));
      for (const auto& l : lists) {
        for (auto id : l) put(id);
        b.insert(b.end(), l.size() * dim * 4, 0x3f);
      }
    }
    const auto h = udf::sha256(b);
    b.insert(b.end(), h.begin(), h.end());
    return b;
  }
};

std::string parse_error(const Bytes& b) {
  auto h = parse_index_file_header(b, "x.udfi");
  if (!h) return h.error().message();
  auto l = parse_index_file_lists(b, *h, "x.udfi");
  return l ? std::string() : l.error().message();
}

TEST(IndexFile, WhatSaveWritesParses) {
  const Bytes b = File{}.bytes();
  auto h = parse_index_file_header(b, "x.udfi");
  ASSERT_TRUE(h) << h.error().message();
  EXPECT_EQ(h->dim, 2u);
  EXPECT_EQ(h->n_lists, 2u);
  EXPECT_EQ(h->symbol, "l2");
  EXPECT_EQ(h->cache_key, std::string(64, 'a'));
  auto l = parse_index_file_lists(b, *h, "x.udfi");
  ASSERT_TRUE(l) << l.error().message();
  EXPECT_EQ(l->centroids.size(), 4u);
  EXPECT_EQ(l->centroids[3], 3.0f);
  ASSERT_EQ(l->ids.size(), 2u);
  EXPECT_EQ(l->ids[0], (std::vector<std::int64_t>{0, 2}));
  EXPECT_EQ(l->vecs[1].size(), 8u);
}

TEST(IndexFile, CorruptFilesAreNamed) {
  Bytes b = File{}.bytes();
  b[b.size() / 2] ^= 1;
  EXPECT_EQ(parse_error(b), "x.udfi: checksum mismatch (the index file is corrupt or truncated)");
  EXPECT_EQ(parse_error(Bytes(10, 0)), "x.udfi: not a udf IVF index file (bad magic or too short)");
  File trailing;
  trailing.size = 2;
  EXPECT_EQ(parse_error(trailing.bytes()), "x.udfi: list sizes do not add up to the index size");
}

// A file with coarse weights (udf_index_params.coarse_weights) carries them
// after the cache key; their values are checked as udf_index_build checks
// them, and the flags as the ones the runtime writes.
TEST(IndexFile, CoarseWeightsParseAndAreChecked) {
  File f;
  f.coarse = kCoarseWeights;
  f.weights = {0.5f, 0.0f};
  const Bytes b = f.bytes();
  auto h = parse_index_file_header(b, "x.udfi");
  ASSERT_TRUE(h) << h.error().message();
  EXPECT_EQ(h->coarse_weights, (std::vector<float>{0.5f, 0.0f}));
  auto l = parse_index_file_lists(b, *h, "x.udfi");
  ASSERT_TRUE(l) << l.error().message();
  EXPECT_EQ(l->centroids[3], 3.0f);
  // What index_file_bytes writes (a converted FAISS or cuVS file, or this one) parses back the same.
  const Bytes again = index_file_bytes(*h, l->centroids, l->ids, l->vecs);
  auto h2 = parse_index_file_header(again, "y.udfi");
  ASSERT_TRUE(h2) << h2.error().message();
  EXPECT_EQ(h2->minor, kIndexFileMinorWeights);
  EXPECT_EQ(h2->coarse_weights, h->coarse_weights);
  EXPECT_EQ(parse_error(again), "");
  for (float bad : {-1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    File g = f;
    g.weights[1] = bad;
    EXPECT_NE(parse_error(g.bytes()).find("bad coarse weight"), std::string::npos) << bad;
  }
  File zero = f;
  zero.weights = {0.0f, 0.0f};
  EXPECT_EQ(parse_error(zero.bytes()), "x.udfi: the coarse weights are all 0");
  File both = f;
  both.coarse = kCoarseWeights | kCoarseNormalized | 1;
  EXPECT_NE(parse_error(both.bytes()).find("bad header field (coarse"), std::string::npos);
  File unknown;
  unknown.coarse = 0x400;
  EXPECT_NE(parse_error(unknown.bytes()).find("bad header field (coarse"), std::string::npos);
  File short_weights = f;
  short_weights.weights.clear();
  short_weights.lists_written = false;
  EXPECT_NE(parse_error(short_weights.bytes()).find("truncated"), std::string::npos) << parse_error(short_weights.bytes());
}

// fuzz: index_file/oom-centroids.  The largest header the checks allow
// (16384 lists of 65536 dimensions: 4 GiB of centroids) in a file of a few
// bytes was allocated before the bytes were found missing.
TEST(IndexFile, CentroidsAreCheckedAgainstTheFileBeforeTheyAreAllocated) {
  File f;
  f.n_lists = kMaxLists;
  f.dim = kMaxDim;
  f.lists_written = false;
  std::string error;
  EXPECT_NO_THROW(error = parse_error(f.bytes()));
  EXPECT_NE(error.find("truncated index file (needs 4294967296 more bytes"), std::string::npos) << error;
}

// fuzz: index_file/balance-inf.  udf_index_build takes balance 0 or >= 1
// (finite); a loaded index with another value reached the balanced
// assignment of udf_index_add, which casts ceil(balance * n / n_lists) to an
// integer (undefined for inf and NaN).
TEST(IndexFile, BalanceIsCheckedAsBuildChecksIt) {
  for (double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN(), 0.5, -1.0, 1e-300}) {
    File f;
    f.balance = bad;
    EXPECT_NE(parse_error(f.bytes()).find("bad header field (balance"), std::string::npos) << bad;
  }
  for (double good : {0.0, 1.0, 2.0, 1e9}) {
    File f;
    f.balance = good;
    EXPECT_EQ(parse_error(f.bytes()), "") << good;
  }
}

}  // namespace
