// The metadata every front end shares (include/udf/compile/metadata.h): its
// checks, what it copies into a manifest, and its part of the cache key.
// udfc's flags themselves (--monotone and the rest) are tested by the lit
// suite (test/lit/udfc/).
#include <gtest/gtest.h>

#include <string>

#include "udf/compile/cuda.h"
#include "udf/compile/metadata.h"

namespace udf {
namespace {

std::string all_messages(const Error& e) {
  std::string s;
  for (const auto& d : e.diagnostics()) s += d.message + "\n";
  return s;
}

UdfMetadata metric() {
  UdfMetadata m;
  m.archs = {90};
  return m;
}

TEST(Monotone, AnAbiV1MetricMayDeclareIt) {
  UdfMetadata m = metric();
  m.monotone = true;
  EXPECT_TRUE(validate(m));
  m.order = Order::Max;  // a max-order metric too (its accumulator never increases)
  EXPECT_TRUE(validate(m));
}

TEST(Monotone, NotAFilterNorAnAbiV2Metric) {
  UdfMetadata f = metric();
  f.kind = UdfKind::Filter;
  f.monotone = true;
  auto r = validate(f);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind(), ErrorKind::Usage);
  EXPECT_NE(all_messages(r.error()).find("--monotone does not apply to a filter (--kind filter)"), std::string::npos)
      << all_messages(r.error());

  for (std::optional<MetricShape> shape : {std::optional<MetricShape>(), std::optional(MetricShape::State),
                                           std::optional(MetricShape::Vector)}) {
    UdfMetadata v2 = metric();
    v2.metric_abi = 2;
    v2.shape = shape;
    if (shape == MetricShape::State) v2.finalize = "fin";
    v2.monotone = true;
    r = validate(v2);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind(), ErrorKind::Usage);
    EXPECT_NE(all_messages(r.error()).find("--monotone applies to ABI v1 metrics only"), std::string::npos)
        << all_messages(r.error());
    v2.monotone = false;
    EXPECT_TRUE(validate(v2)) << all_messages(validate(v2).error());
  }
}

TEST(Monotone, CopiedIntoTheManifest) {
  UdfMetadata m = metric();
  ArtifactManifest a;
  fill_manifest_metadata(a, m, "l2");
  EXPECT_FALSE(a.monotone);
  m.monotone = true;
  fill_manifest_metadata(a, m, "l2");
  EXPECT_TRUE(a.monotone);
}

TEST(Monotone, PartOfTheCacheKeyOnlyWhenDeclared) {
  const CudaSource src{"extern \"C\" __device__ float l2(float x, float y, float acc, const udf_ctx_v1 *c) { return acc; }\n",
                       "<string>", ""};
  UdfMetadata m = metric();
  const std::string plain = cuda_cache_key(src, m, {});
  EXPECT_EQ(cuda_cache_key(src, m, {}), plain);
  m.monotone = true;
  const std::string monotone = cuda_cache_key(src, m, {});
  EXPECT_NE(monotone, plain);
  EXPECT_EQ(monotone.size(), 64u);
}

}  // namespace
}  // namespace udf
