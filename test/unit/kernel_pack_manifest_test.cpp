// The kernel pack's manifest alone (parse_kernel_pack_manifest), no files
// read: a good manifest, and manifests of the wrong JSON types, which made
// the reader throw (nlohmann's value() and get()) or convert floats to
// integers out of range (undefined).  Regression inputs of the kernel_pack
// fuzz target (test/fuzz/regressions/kernel_pack/).
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "udf/link/kernel_pack.h"

namespace {

using nlohmann::json;

json good() {
  return json::parse(R"({
    "kind": "udf.kernel-pack", "version": {"major": 1, "minor": 0}, "name": "ivf_flat_v1",
    "abi": "ivf_flat.metric.v1",
    "files": [{"path": "ivf_flat_v1.ltoir", "arch": "compute_75", "size": 10, "sha256": "ab"}],
    "scan_variants": [{"symbol": "scan_f32", "file": "ivf_flat_v1.ltoir", "elem": "f32", "acc": "f32", "order": "min",
                       "k_max": 32, "block_threads": 128, "dynamic_smem": {"constant": 0, "per_query": 2576}}],
    "kernels": [{"symbol": "merge_min", "file": "ivf_flat_v1.ltoir", "order": "min", "block_threads": 128},
                {"symbol": "any", "file": "ivf_flat_v1.ltoir"}]
  })");
}

udf::Expected<udf::KernelPackManifest> parse(const std::string& text) {
  return udf::parse_kernel_pack_manifest(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()),
                                         "pack/ivf_flat_v1.json");
}

// The error message, or "" when the manifest was accepted; never an exception.
std::string error_of(const json& j) {
  std::string msg = "threw";
  EXPECT_NO_THROW({
    auto m = parse(j.dump());
    msg = m ? "" : m.error().message();
  }) << j.dump();
  return msg;
}

TEST(KernelPackManifest, GoodManifest) {
  auto m = parse(good().dump());
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->pack.name, "ivf_flat_v1");
  EXPECT_EQ(m->pack.metric_abi_version, 1);
  ASSERT_EQ(m->files.size(), 1u);
  EXPECT_EQ(m->files[0].path, "ivf_flat_v1.ltoir");
  EXPECT_EQ(m->files[0].arch, 75);
  EXPECT_EQ(m->files[0].size, 10u);
  ASSERT_EQ(m->pack.variants.size(), 1u);
  EXPECT_EQ(m->pack.variants[0].k_max, 32);
  EXPECT_EQ(m->pack.variants[0].launch.at("smem_per_query"), 2576);
  ASSERT_EQ(m->pack.kernels.size(), 2u);
  EXPECT_EQ(m->pack.kernels[0].order, udf::Order::Min);
  EXPECT_FALSE(m->pack.kernels[1].order.has_value());
  EXPECT_TRUE(m->pack.files.empty());
  EXPECT_EQ(m->pack.variants[0].file, "ivf_flat_v1.ltoir");
  EXPECT_EQ(m->pack.kernels[0].file, "ivf_flat_v1.ltoir");
}

// Pack 1.7: a file per family; each variant and kernel names a listed file.
TEST(KernelPackManifest, EachVariantAndKernelNamesAListedFile) {
  json j = good();
  j["files"].push_back({{"path", "merge_v1_min.ltoir"}, {"arch", "compute_75"}, {"size", 4}, {"sha256", "cd"}});
  j["kernels"][0]["file"] = "merge_v1_min.ltoir";
  auto m = parse(j.dump());
  ASSERT_TRUE(m) << m.error().message();
  ASSERT_EQ(m->files.size(), 2u);
  EXPECT_EQ(m->pack.kernels[0].file, "merge_v1_min.ltoir");
  EXPECT_EQ(m->pack.variants[0].file, "ivf_flat_v1.ltoir");

  json unlisted = good();
  unlisted["scan_variants"][0]["file"] = "scan_v1_f32_f32_min.ltoir";
  EXPECT_EQ(error_of(unlisted), "pack/ivf_flat_v1.json: bad kernel pack manifest: scan variant 0 ('scan_f32'): its file "
                                "'scan_v1_f32_f32_min.ltoir' is not one of the listed files");
  json no_file = good();
  no_file["kernels"][1].erase("file");
  EXPECT_EQ(error_of(no_file), "pack/ivf_flat_v1.json: bad kernel pack manifest: kernel any: its file '' is not one of "
                               "the listed files");
}

// fuzz: kernel_pack/kind-number and friends: value() threw type_error on a
// field of another type; each is now a "bad kernel pack manifest" error.
TEST(KernelPackManifest, FieldsOfTheWrongTypeAreErrorsNotExceptions) {
  auto with = [](auto edit) {
    json j = good();
    edit(j);
    return j;
  };
  const json cases[] = {
      with([](json& j) { j["kind"] = 5; }),
      with([](json& j) { j["version"] = json::array({1}); }),
      with([](json& j) { j["version"]["major"] = "1"; }),
      with([](json& j) { j["name"] = json::object(); }),
      with([](json& j) { j["abi"] = 1; }),
      with([](json& j) { j["files"] = json::array({5}); }),
      with([](json& j) { j["files"][0]["path"] = 7; }),
      with([](json& j) { j["files"][0]["arch"] = 75; }),
      with([](json& j) { j["files"][0]["size"] = "10"; }),
      with([](json& j) { j["files"][0]["size"] = -1.5; }),      // a float to uint64: undefined
      with([](json& j) { j["files"][0]["size"] = -3; }),
      with([](json& j) { j["files"][0]["path"] = std::string("a\0b", 3); }),
      with([](json& j) { j["scan_variants"] = "scan"; }),
      with([](json& j) { j["scan_variants"] = json::array({"scan"}); }),
      with([](json& j) { j["scan_variants"][0]["k_max"] = 1e300; }),  // a float to int: undefined
      with([](json& j) { j["scan_variants"][0]["k_max"] = 4294967296; }),
      with([](json& j) { j["scan_variants"][0]["elem"] = json::array(); }),
      with([](json& j) { j["kernels"] = json::object({{"symbol", "k"}}); }),
      with([](json& j) { j["kernels"][0]["order"] = 1; }),
      with([](json& j) { j["kernels"][0] = 3; }),
  };
  for (const auto& j : cases) {
    std::string e = error_of(j);
    EXPECT_NE(e.find("pack/ivf_flat_v1.json: bad kernel pack manifest: "), std::string::npos) << j.dump() << "\n" << e;
  }
}

// fuzz: kernel_pack/deep-variant.  A bad scan variant was quoted whole
// (json::dump, recursive) in the message: a deeply nested one overflowed the stack.
TEST(KernelPackManifest, DeeplyNestedBadVariantIsReportedWithoutRecursion) {
  std::string deep(200000, '[');
  deep += std::string(200000, ']');
  json j = good();
  std::string text = j.dump();
  const std::string needle = "\"symbol\":\"scan_f32\"";
  auto at = text.find(needle);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, needle.size(), "\"symbol\":\"scan_f32\",\"deep\":" + deep);
  text.replace(text.find("\"elem\":\"f32\","), 13, "");
  std::string msg = "threw";
  EXPECT_NO_THROW({
    auto m = parse(text);
    msg = m ? "" : m.error().message();
  });
  EXPECT_NE(msg.find("bad scan variant 0 ('scan_f32')"), std::string::npos) << msg.substr(0, 200);
}

TEST(KernelPackManifest, FileNamesArePlain) {
  for (const char* p : {"", ".", "..", "a/b", "/abs"}) {
    json j = good();
    j["files"][0]["path"] = p;
    EXPECT_NE(error_of(j).find("file path must be a plain file name"), std::string::npos) << p;
  }
}

}  // namespace
