// The artifact manifest (to_json / parse_artifact_manifest) and the vocabulary
// parsers it relies on (parse_capture, parse_arch, parse_initial).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "udf/artifact/container.h"
#include "udf/artifact/manifest.h"
#include "udf/artifact/module.h"
#include "udf/kernels/ivf_flat_v1.h"

namespace udf {
namespace {

using nlohmann::json;

ArtifactManifest sample() {
  ArtifactManifest m;
  m.source_name = "weighted.cu";
  m.source_sha256 = std::string(64, 'c');
  m.symbol = "weighted_l2";
  m.finalize = "to_distance";
  m.elem = ElemType::F16;
  m.acc = AccType::F32;
  m.order = Order::Max;
  m.initial = InitialValue{-std::numeric_limits<double>::infinity()};
  m.coarse_metric = CoarseMetric::Cosine;
  m.captures = {Capture{"w", CaptureType::F16, true}, Capture{"bias", CaptureType::I32, false}};
  m.targets = {ArtifactTarget{80, 10, std::string(64, '1')}, ArtifactTarget{90, 20, std::string(64, '2')}};
  m.udfc_version = "0.1.0";
  m.compiler = "nvrtc 13.0";
  m.compiler_options = {"-rdc=true", "-DX=1"};
  m.cache_key = std::string(64, 'd');
  return m;
}

std::string all_messages(const Error& e) {
  std::string s;
  for (const auto& d : e.diagnostics()) s += d.message + "\n";
  return s;
}

TEST(Manifest, RoundTrip) {
  ArtifactManifest m = sample();
  std::string text = to_json(m);
  auto back = parse_artifact_manifest(text, "m.json");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_EQ(*back, m);
  EXPECT_EQ(to_json(*back), text);
}

TEST(Manifest, CanonicalJson) {
  std::string text = to_json(sample());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(text.rfind("{\n  \"abi\": {", 0), 0u) << text;
  json j = json::parse(text);
  EXPECT_EQ(j["kind"], "udf.artifact");
  EXPECT_EQ(j["version"]["major"], 1);
  EXPECT_EQ(j["version"]["minor"], 5);  // 1.4: monotone of v1 metrics; 1.5: coarse_weights
  EXPECT_EQ(j["udf_kind"], "metric");
  EXPECT_EQ(j["payload_kind"], "lto-ir");
  EXPECT_EQ(j["initial"], "-inf");
  EXPECT_EQ(j["captures"][1]["kind"], "scalar");
  EXPECT_EQ(j["captures"][1]["index"], 1);
  EXPECT_EQ(j["targets"][0]["arch"], "sm_80");
  EXPECT_EQ(j.dump(2) + "\n", text);  // keys sorted, 2-space indent
}

TEST(Manifest, InitialValues) {
  ArtifactManifest m = sample();
  m.initial = InitialValue{std::numeric_limits<double>::infinity()};
  EXPECT_EQ(json::parse(to_json(m))["initial"], "inf");
  auto back = parse_artifact_manifest(to_json(m), "m");
  ASSERT_TRUE(back);
  EXPECT_TRUE(std::isinf(back->initial.value) && back->initial.value > 0);

  m.initial = InitialValue{0.5};
  EXPECT_EQ(json::parse(to_json(m))["initial"], 0.5);

  m.elem = ElemType::I8;
  m.acc = AccType::I32;
  m.initial = InitialValue{-7};
  json j = json::parse(to_json(m));
  EXPECT_TRUE(j["initial"].is_number_integer());
  EXPECT_EQ(j["initial"], -7);
  back = parse_artifact_manifest(to_json(m), "m");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_EQ(back->initial.value, -7);
  EXPECT_EQ(to_string(back->initial, AccType::I32), "-7");
  EXPECT_EQ(to_string(InitialValue{-std::numeric_limits<double>::infinity()}, AccType::F32), "-inf");
  EXPECT_EQ(to_string(InitialValue{0.5}, AccType::F32), "0.5");
}

TEST(Manifest, FinalizeNull) {
  ArtifactManifest m = sample();
  m.finalize.reset();
  EXPECT_TRUE(json::parse(to_json(m))["finalize"].is_null());
  auto back = parse_artifact_manifest(to_json(m), "m");
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->finalize.has_value());
}

TEST(Manifest, EveryBadFieldIsReported) {
  json j = json::parse(to_json(sample()));
  j["kind"] = "udf.module";
  j["version"]["major"] = 2;
  j["element_type"] = "f64";
  j["order"] = "sideways";
  j["targets"][0]["arch"] = "sm_91";
  j["targets"][1]["sha256"] = "ABC";
  j["cache_key"] = 5;
  j["captures"][0]["index"] = 3;
  j["extra"] = true;
  j.erase("symbol");
  auto r = parse_artifact_manifest(j.dump(), "bad.json");
  ASSERT_FALSE(r);
  std::string all = all_messages(r.error());
  for (const char* path : {"'kind'", "'version.major'", "'element_type'", "'order'", "'targets[0].arch'",
                           "'targets[1].sha256'", "'cache_key'", "'captures[0].index'", "'extra'", "'symbol'"})
    EXPECT_NE(all.find(std::string("manifest field ") + path), std::string::npos) << path << " not in:\n" << all;
  EXPECT_GE(r.error().diagnostics().size(), 10u);
  for (const auto& d : r.error().diagnostics()) EXPECT_EQ(d.message.rfind("bad.json: ", 0), 0u) << d.message;
}

TEST(Manifest, StructuralErrors) {
  EXPECT_FALSE(parse_artifact_manifest("", "m"));
  EXPECT_FALSE(parse_artifact_manifest("{", "m"));
  EXPECT_FALSE(parse_artifact_manifest("\"udf.artifact\"", "m"));
  auto r = parse_artifact_manifest("{}", "m");
  ASSERT_FALSE(r);
  EXPECT_GE(r.error().diagnostics().size(), 15u) << all_messages(r.error());  // every field missing

  json j = json::parse(to_json(sample()));
  j["targets"] = json::array();
  r = parse_artifact_manifest(j.dump(), "m");
  ASSERT_FALSE(r);
  EXPECT_NE(all_messages(r.error()).find("'targets': no target arch"), std::string::npos);

  j = json::parse(to_json(sample()));
  std::swap(j["targets"][0], j["targets"][1]);
  r = parse_artifact_manifest(j.dump(), "m");
  ASSERT_FALSE(r);
  EXPECT_NE(all_messages(r.error()).find("sorted by arch"), std::string::npos);

  j = json::parse(to_json(sample()));
  j["captures"][1]["name"] = "w";
  r = parse_artifact_manifest(j.dump(), "m");
  ASSERT_FALSE(r);
  EXPECT_NE(all_messages(r.error()).find("duplicate capture 'w'"), std::string::npos);

  j = json::parse(to_json(sample()));
  j["captures"] = json::array();
  for (int i = 0; i < 9; ++i)
    j["captures"].push_back({{"index", i}, {"name", "c" + std::to_string(i)}, {"type", "f32"}, {"kind", "scalar"}});
  r = parse_artifact_manifest(j.dump(), "m");
  ASSERT_FALSE(r);
  EXPECT_NE(all_messages(r.error()).find("9 captures; the ABI allows at most 8"), std::string::npos);

  j = json::parse(to_json(sample()));
  j["finalize"] = 3;
  j["initial"] = "infinity";
  j["toolchain"]["options"] = {1, 2};
  r = parse_artifact_manifest(j.dump(), "m");
  ASSERT_FALSE(r);
  std::string all = all_messages(r.error());
  EXPECT_NE(all.find("'finalize': expected a string or null"), std::string::npos) << all;
  EXPECT_NE(all.find("'initial': expected a number"), std::string::npos) << all;
  EXPECT_NE(all.find("'toolchain.options': expected strings"), std::string::npos) << all;
}

TEST(Manifest, AccumulatorMustSuitElements) {
  for (auto [elem, acc, ok] : {std::tuple{"f32", "f32", true}, {"f32", "i32", false}, {"f16", "f32", true},
                               {"f16", "i32", false}, {"i8", "i32", true}, {"i8", "f32", true},
                               {"u8", "i32", true}, {"u8", "f32", true}}) {
    json j = json::parse(to_json(sample()));
    j["element_type"] = elem;
    j["accumulator_type"] = acc;
    j["initial"] = 0;
    auto r = parse_artifact_manifest(j.dump(), "m");
    EXPECT_EQ(static_cast<bool>(r), ok) << elem << "/" << acc;
    if (!ok) {
      EXPECT_NE(all_messages(r.error()).find("is not allowed for element type"), std::string::npos);
    }
  }
  EXPECT_EQ(allowed_acc_types(ElemType::I8).front(), AccType::I32);
  EXPECT_EQ(allowed_acc_types(ElemType::F16), std::vector<AccType>{AccType::F32});
}

TEST(ParseCapture, Forms) {
  auto a = parse_capture("weights:f32[]");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->name, "weights");
  EXPECT_EQ(a->type, CaptureType::F32);
  EXPECT_TRUE(a->array);
  EXPECT_EQ(to_string(*a), "weights:f32[]");
  EXPECT_EQ(c_type(*a), "const float *");
  auto s = parse_capture("_k9:i32");
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->array);
  EXPECT_EQ(c_type(*s), "int32_t");
  for (const char* ok : {"h:f16[]", "u:u8[]", "i:i32[]", "f:f32"}) EXPECT_TRUE(parse_capture(ok)) << ok;
  for (const char* bad : {"", "w", ":f32", "9w:f32", "w-x:f32", "w:", "w:f64", "w:f16", "w:u8", "w:f32[",
                          "w:f32[][]", "w:F32", "w :f32", "w:f32 "}) {
    auto r = parse_capture(bad);
    EXPECT_FALSE(r) << "'" << bad << "' was accepted";
    if (!r) {
      EXPECT_EQ(r.error().kind(), ErrorKind::Usage);
      EXPECT_NE(r.error().message().find("bad capture"), std::string::npos);
    }
  }
}

TEST(ParseArch, Spellings) {
  for (const char* s : {"sm_90", "compute_90", "90"}) {
    auto a = parse_arch(s);
    ASSERT_TRUE(a) << s;
    EXPECT_EQ(*a, 90);
  }
  EXPECT_EQ(arch_name(120), "sm_120");
  for (Arch a : supported_archs()) EXPECT_EQ(*parse_arch(arch_name(a)), a);
  for (const char* bad : {"", "sm_", "sm_91", "SM_90", " sm_90", "sm_90 ", "sm_90a", "sm90", "gfx90a", "-90",
                          "sm_0090x", "sm_99999999999999999999"}) {
    auto r = parse_arch(bad);
    EXPECT_FALSE(r) << "'" << bad << "' was accepted";
    if (!r) {
      EXPECT_NE(r.error().message().find("(supported: sm_75 "), std::string::npos) << r.error().message();
    }
  }
}

TEST(ParseInitial, F32) {
  auto v = parse_initial("0.1", AccType::F32);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->value, static_cast<double>(0.1f));  // rounded to what the device sees
  EXPECT_EQ(parse_initial("inf", AccType::F32)->value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_initial("+inf", AccType::F32)->value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_initial("-inf", AccType::F32)->value, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_initial("-3.5e2", AccType::F32)->value, -350.0);
  EXPECT_TRUE(parse_initial("3.4e38", AccType::F32));
  // Found by cli_values_fuzzer: 3.4028234e38 rounds to FLT_MAX, whose shortest
  // text (what to_string and manifests write) 3.4028235e38 lies above FLT_MAX;
  // it must read back as the same value.
  for (const char* edge : {"3.4028234e38", "-3.4028234e38", "3.4028235e38", "3.40282356e38"}) {
    auto e = parse_initial(edge, AccType::F32);
    ASSERT_TRUE(e) << edge;
    EXPECT_EQ(std::fabs(e->value), static_cast<double>(std::numeric_limits<float>::max())) << edge;
    auto back = parse_initial(to_string(*e, AccType::F32), AccType::F32);
    ASSERT_TRUE(back) << edge << " -> " << to_string(*e, AccType::F32);
    EXPECT_EQ(back->value, e->value) << edge;
  }
  EXPECT_FALSE(parse_initial("3.4028236e38", AccType::F32));  // rounds to infinity
  EXPECT_EQ(parse_initial("infinity", AccType::F32)->value, std::numeric_limits<double>::infinity());
  for (const char* bad : {"", "abc", "nan", "NaN", "1e39", "-1e39", "1.0f", " 1", "1 ", "0x10", "--1"}) {
    auto r = parse_initial(bad, AccType::F32);
    EXPECT_FALSE(r) << "'" << bad << "' was accepted";
    if (!r) {
      EXPECT_EQ(r.error().kind(), ErrorKind::Usage);
    }
  }
}

TEST(ParseInitial, I32) {
  EXPECT_EQ(parse_initial("-2147483648", AccType::I32)->value, -2147483648.0);
  EXPECT_EQ(parse_initial("2147483647", AccType::I32)->value, 2147483647.0);
  EXPECT_EQ(parse_initial("0", AccType::I32)->value, 0.0);
  for (const char* bad : {"", "1.5", "inf", "-inf", "1e3", "2147483648", "-2147483649", "99999999999999999999", "x"}) {
    auto r = parse_initial(bad, AccType::I32);
    EXPECT_FALSE(r) << "'" << bad << "' was accepted";
  }
  EXPECT_NE(parse_initial("2147483648", AccType::I32).error().message().find("out of range for i32"), std::string::npos);
  EXPECT_NE(parse_initial("1.5", AccType::I32).error().message().find("needs an integer"), std::string::npos);
}

// The schema's fixtures (schemas/tests) seen by the C++ reader: the good ones
// parse, and the bad ones are rejected too -- except the few rules only the
// schema states today (listed, so that a change in either shows up here).
std::filesystem::path fixtures_dir() {
  // Not __FILE__: ccache's base_dir (CMakeLists.txt) makes it relative to the build folder.
  return std::filesystem::path(UDF_SOURCE_DIR) / "schemas" / "tests";
}
std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Manifest, SchemaFixturesAgreeWithTheReader) {
  const std::set<std::string> schema_only = {
      "bad-arch-pattern.json",           // the reader also takes compute_90 and 90
      "bad-v1-abi-version-2.json",       // the reader takes any v1 ABI version; udf-link refuses a mismatch
  };
  int good = 0, bad = 0;
  ASSERT_TRUE(std::filesystem::is_directory(fixtures_dir())) << fixtures_dir();
  for (const auto& e : std::filesystem::directory_iterator(fixtures_dir())) {
    std::string name = e.path().filename().string();
    auto r = parse_artifact_manifest(slurp(e.path()), name);
    if (name.rfind("good-", 0) == 0) {
      EXPECT_TRUE(r) << name << ": " << all_messages(r.error());
      ++good;
    } else if (name.rfind("bad-", 0) == 0) {
      EXPECT_EQ(static_cast<bool>(r), schema_only.count(name) == 1) << name;
      ++bad;
    }
  }
  EXPECT_GE(good, 2);
  EXPECT_GE(bad, 6);
}

// fuzz: artifact_manifest/i32-initial-1e300 and module_manifest/i32-initial-1e300.
// The readers took any number as the initial value of an i32 accumulator:
// to_json then cast 1e300 to int64 (undefined behaviour; UBSan:
// float-cast-overflow) and 1.5 came back as 1.  Like udfc's --initial and the
// schemas, an i32 initial is an integer in the i32 range; an f32 one an f32
// value, inf or -inf.
TEST(Manifest, InitialMustSuitTheAccumulator) {
  json j = json::parse(to_json(sample()));
  j["element_type"] = "i8";
  j["accumulator_type"] = "i32";
  for (json bad : {json(1e300), json(1.5), json(2147483648.0), json(-2147483649), json("inf"), json("-inf")}) {
    j["initial"] = bad;
    auto r = parse_artifact_manifest(j.dump(), "m.json");
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(all_messages(r.error()).find("manifest field 'initial'"), std::string::npos) << all_messages(r.error());
  }
  for (json good : {json(-2147483648), json(2147483647), json(7.0), json(0)}) {
    j["initial"] = good;
    auto r = parse_artifact_manifest(j.dump(), "m.json");
    ASSERT_TRUE(r) << good << ": " << all_messages(r.error());
    EXPECT_EQ(parse_artifact_manifest(to_json(*r), "again.json")->initial, r->initial);
  }
  j = json::parse(to_json(sample()));  // f32 accumulator
  j["initial"] = 1e300;
  EXPECT_FALSE(parse_artifact_manifest(j.dump(), "m.json"));
  j["initial"] = -3.4e38;
  EXPECT_TRUE(parse_artifact_manifest(j.dump(), "m.json"));
}

// A 1.x module of sample()'s metric for sm_90, one image, no entries yet.
ModuleManifest one_metric_module() {
  ModuleManifest m;
  m.kernel_pack_name = "ivf_flat_v1";
  m.archs = {90};
  m.images = {ModuleImage{1, std::string(64, 'a')}};
  m.artifacts.push_back(module_artifact_from(sample()));
  return m;
}

TEST(ModuleManifest, InitialMustSuitTheAccumulator) {
  ModuleManifest m = one_metric_module();
  m.artifacts[0].elem = ElemType::U8;
  m.artifacts[0].acc = AccType::I32;
  m.artifacts[0].initial = InitialValue{3};
  json j = json::parse(to_json(m));
  ASSERT_TRUE(parse_module_manifest(j.dump(), "m.json"));
  for (json bad : {json(1e300), json(0.25), json("inf")}) {
    j["artifacts"][0]["initial"] = bad;
    auto r = parse_module_manifest(j.dump(), "m.json");
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(all_messages(r.error()).find("'artifacts[0].initial'"), std::string::npos) << all_messages(r.error());
  }
}

// fuzz: artifact_manifest/finalize-not-identifier.  The reader checked that
// the symbol is a C identifier but took any finalize string, which udf-link
// then wrote into the entry kernels' CUDA source (declaration and call).
TEST(Manifest, FinalizeMustBeAnIdentifier) {
  json j = json::parse(to_json(sample()));
  for (const char* bad : {"", "1f", "f(float a, const udf_ctx_v1 *); __global__ void g() {} float h", "a b", "f;"}) {
    j["finalize"] = bad;
    auto r = parse_artifact_manifest(j.dump(), "m.json");
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(all_messages(r.error()).find("manifest field 'finalize': '"), std::string::npos) << all_messages(r.error());
  }
  j["finalize"] = "to_distance_2";
  EXPECT_TRUE(parse_artifact_manifest(j.dump(), "m.json"));
}

// Found while writing the module_manifest fuzz target: entries[].artifact
// was read with get<int>, so 4294967296 wrapped to 0 and passed the range check.
TEST(ModuleManifest, EntryArtifactIndexIsCheckedAsWritten) {
  ModuleManifest m = one_metric_module();
  m.entries.push_back(ModuleEntry{"scan", 0, std::nullopt, "variant", {}});
  json j = json::parse(to_json(m));
  ASSERT_TRUE(parse_module_manifest(j.dump(), "m.json"));
  for (json bad : {json(4294967296), json(std::numeric_limits<std::uint64_t>::max()), json(-1), json(1)}) {
    j["entries"][0]["artifact"] = bad;
    auto r = parse_module_manifest(j.dump(), "m.json");
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(all_messages(r.error()).find("'entries[0].artifact': out of range"), std::string::npos) << all_messages(r.error());
  }
}

// CAPTURE ALIGNMENT (module 1.8): launch.capture_align is 16 or absent; an
// entry that assumes another alignment than the runtime gives is refused,
// naming the field.
TEST(ModuleManifest, CaptureAlignIsSixteenOrAbsent) {
  ModuleManifest m = one_metric_module();
  m.entries.push_back(ModuleEntry{"scan", 0, std::nullopt, "variant", {{"k_max", 32}, {"capture_align", 16}}});
  json j = json::parse(to_json(m));
  EXPECT_EQ(j["version"]["minor"], kModuleManifestMinor);  // the current version (1.8 and later)
  auto ok = parse_module_manifest(j.dump(), "m.json");
  ASSERT_TRUE(ok) << all_messages(ok.error());
  EXPECT_EQ(ok->entries[0].launch.at("capture_align"), 16);
  j["entries"][0]["launch"].erase("capture_align");
  EXPECT_TRUE(parse_module_manifest(j.dump(), "m.json"));
  for (int bad : {0, 4, 8, 32}) {
    j["entries"][0]["launch"]["capture_align"] = bad;
    auto r = parse_module_manifest(j.dump(), "m.json");
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(all_messages(r.error()).find("entries[0].launch.capture_align"), std::string::npos) << all_messages(r.error());
  }
}

// A direct twin (launch.direct_only; ivf_flat_v1.h, DIRECT TWIN) lives in a
// runtime's on-demand module only: a module file that holds one is refused,
// naming the field (a runtime would take it for any schedule).
TEST(ModuleManifest, DirectTwinsAreNotReadFromAFile) {
  ModuleManifest m = one_metric_module();
  m.entries.push_back(ModuleEntry{"scan__direct", 0, std::nullopt, "variant", {{"k_max", 32}, {"direct_only", 1}}});
  json j = json::parse(to_json(m));
  auto r = parse_module_manifest(j.dump(), "m.json");
  ASSERT_FALSE(r);
  EXPECT_NE(all_messages(r.error()).find("entries[0].launch.direct_only"), std::string::npos) << all_messages(r.error());
  j["entries"][0]["launch"].erase("direct_only");
  EXPECT_TRUE(parse_module_manifest(j.dump(), "m.json"));
}

// launch.sort_capacity sizes a scan's shared memory in the runtime: a module
// is read only with a value a kernel pack's rule gives its k_max -- 1.8's
// UDF_IVF_V1_SORT_CAPACITY or the older 2 * max(k_max, 128), which modules of
// older packs keep -- on scans and merges alike; anything else, or a
// sort_capacity without k_max, is refused, naming the field.
TEST(ModuleManifest, SortCapacityIsAPacksRuleForItsKMax) {
  EXPECT_EQ(sort_capacities_for(32), (std::vector<std::int64_t>{128, 256}));
  EXPECT_EQ(sort_capacities_for(1), (std::vector<std::int64_t>{128, 256}));
  EXPECT_EQ(sort_capacities_for(64), (std::vector<std::int64_t>{256}));
  EXPECT_EQ(sort_capacities_for(256), (std::vector<std::int64_t>{512}));
  EXPECT_EQ(sort_capacities_for(1024), (std::vector<std::int64_t>{2048}));
  EXPECT_EQ(sort_capacities_for(1024).front(), std::int64_t{UDF_IVF_V1_SORT_CAPACITY(1024u)});
  EXPECT_EQ(sort_capacities_for(32).front(), std::int64_t{UDF_IVF_V1_SORT_CAPACITY(32u)});
  for (std::int64_t k : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{1} << 31, std::numeric_limits<std::int64_t>::max()})
    EXPECT_TRUE(sort_capacities_for(k).empty()) << k;

  ModuleManifest m = one_metric_module();
  m.entries.push_back(ModuleEntry{"scan", 0, std::nullopt, "scan_variant", {{"k_max", 32}, {"sort_capacity", 128}}});
  m.entries.push_back(ModuleEntry{"merge", std::nullopt, std::nullopt, "udf_ivf_merge_v1_min_k32", {{"k_max", 32}, {"sort_capacity", 128}}});
  json j = json::parse(to_json(m));
  auto ok = parse_module_manifest(j.dump(), "m.json");
  ASSERT_TRUE(ok) << all_messages(ok.error());
  EXPECT_EQ(ok->entries[0].launch.at("sort_capacity"), 128);
  // Modules of packs before 1.8: 256 for k_max 32; and without the field.
  for (int e : {0, 1}) j["entries"][e]["launch"]["sort_capacity"] = 256;
  EXPECT_TRUE(parse_module_manifest(j.dump(), "m.json"));
  for (int e : {0, 1}) j["entries"][e]["launch"].erase("sort_capacity");
  EXPECT_TRUE(parse_module_manifest(j.dump(), "m.json"));
  for (int e : {0, 1}) j["entries"][e]["launch"] = {{"k_max", 64}, {"sort_capacity", 256}};
  EXPECT_TRUE(parse_module_manifest(j.dump(), "m.json"));

  const std::pair<json, std::string> bad[] = {
      {{{"k_max", 32}, {"sort_capacity", 300}}, "300 is not 128 or 256 (k_max 32)"},
      {{{"k_max", 32}, {"sort_capacity", 0}}, "0 is not 128 or 256 (k_max 32)"},
      {{{"k_max", 32}, {"sort_capacity", -256}}, "-256 is not 128 or 256 (k_max 32)"},
      {{{"k_max", 64}, {"sort_capacity", 128}}, "128 is not 256 (k_max 64)"},
      {{{"k_max", 1024}, {"sort_capacity", 1 << 20}}, "1048576 is not 2048 (k_max 1024)"},
      {{{"sort_capacity", 256}}, "256 without a k_max to check it against"},
      {{{"k_max", 0}, {"sort_capacity", 256}}, "256 with k_max 0, which is not a k bucket"},
  };
  for (const auto& [launch, what] : bad)
    for (int e : {0, 1}) {
      json b = j;
      b["entries"][e]["launch"] = launch;
      auto r = parse_module_manifest(b.dump(), "m.json");
      ASSERT_FALSE(r) << launch.dump();
      const std::string field = "entries[" + std::to_string(e) + "].launch.sort_capacity";
      ASSERT_EQ(r.error().diagnostics().size(), 1u) << all_messages(r.error());
      EXPECT_EQ(r.error().diagnostics().front().message, "m.json: manifest field '" + field + "': " + what);
      EXPECT_EQ(r.error().diagnostics().front().code, DiagCode::BadManifest);
    }
}

ArtifactManifest filter_sample() {
  ArtifactManifest m = sample();
  m.kind = UdfKind::Filter;
  m.abi_id = "ivf_flat.filter.v1";
  m.symbol = "tenant_is";
  m.finalize.reset();
  m.elem = ElemType::F32;
  m.acc = AccType::F32;
  m.order = Order::Min;
  m.initial = InitialValue{0.0};
  m.coarse_metric = CoarseMetric::L2;
  m.captures = {Capture{"tenants", CaptureType::I32, true}, Capture{"tenant", CaptureType::I32, false}};
  return m;
}

TEST(Manifest, FilterRoundTripAndHasNoMetricFields) {
  const ArtifactManifest f = filter_sample();
  const std::string text = to_json(f);
  json j = json::parse(text);
  EXPECT_EQ(j["udf_kind"], "filter");
  EXPECT_EQ(j["abi"]["id"], "ivf_flat.filter.v1");
  for (const char* k : {"finalize", "element_type", "accumulator_type", "order", "initial", "coarse_metric"})
    EXPECT_FALSE(j.contains(k)) << k;
  auto back = parse_artifact_manifest(text, "f.json");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_EQ(*back, f);
  // A metric's manifest says so too.
  EXPECT_EQ(json::parse(to_json(sample()))["udf_kind"], "metric");
}

TEST(Manifest, FilterRefusesMetricFieldsAndAMismatchedAbi) {
  json j = json::parse(to_json(filter_sample()));
  j["order"] = "min";
  j["element_type"] = "f32";
  auto r = parse_artifact_manifest(j.dump(), "f.json");
  ASSERT_FALSE(r);
  const std::string msg = all_messages(r.error());
  EXPECT_NE(msg.find("'order': a filter has no such field"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'element_type': a filter has no such field"), std::string::npos) << msg;

  json k = json::parse(to_json(filter_sample()));
  k["abi"]["id"] = "ivf_flat.metric.v1";
  r = parse_artifact_manifest(k.dump(), "f.json");
  ASSERT_FALSE(r);
  EXPECT_NE(all_messages(r.error()).find("does not fit udf_kind 'filter'"), std::string::npos) << all_messages(r.error());

  json u = json::parse(to_json(filter_sample()));
  u["udf_kind"] = "predicate";
  r = parse_artifact_manifest(u.dump(), "f.json");
  ASSERT_FALSE(r);
  EXPECT_NE(all_messages(r.error()).find("'predicate' is not one of metric, filter"), std::string::npos);

  // A 1.0 manifest (no udf_kind) is a metric's.
  json old = json::parse(to_json(sample()));
  old.erase("udf_kind");
  old["version"]["minor"] = 0;
  auto o = parse_artifact_manifest(old.dump(), "old.json");
  ASSERT_TRUE(o) << all_messages(o.error());
  EXPECT_EQ(o->kind, UdfKind::Metric);
}

// The minor version is kept as read: the runtime refuses a module newer than
// the manifest it reads (its kernels may take a longer argument struct).  A
// manifest read as 1.6 or older is written in that form again (one image, no
// entries[].image).
TEST(ModuleManifest, MinorVersionIsKeptAsRead) {
  ModuleManifest m = one_metric_module();
  m.entries.push_back(ModuleEntry{"scan", 0, std::nullopt, "variant", {{"tail_merge", 1}}});
  EXPECT_EQ(json::parse(to_json(m))["version"]["minor"], kModuleManifestMinor);
  for (int minor : {0, 3, 6, kModuleImagesMinor, kModuleManifestMinor, kModuleManifestMinor + 5}) {
    ModuleManifest w = m;
    w.version_minor = minor;
    json j = json::parse(to_json(w));
    EXPECT_EQ(j.contains("image"), minor < kModuleImagesMinor) << minor;
    EXPECT_EQ(j.contains("images"), minor >= kModuleImagesMinor) << minor;
    EXPECT_EQ(j["entries"][0].contains("image"), minor >= kModuleImagesMinor) << minor;
    auto r = parse_module_manifest(j.dump(), "m.json");
    ASSERT_TRUE(r) << all_messages(r.error());
    EXPECT_EQ(r->version_minor, minor);
    EXPECT_EQ(r->entries[0].launch.at("tail_merge"), 1);
    EXPECT_EQ(r->images, m.images);
    EXPECT_EQ(json::parse(to_json(*r)), j) << "written back as read";
  }
}

// 1.7: images[] and entries[].image, each checked; the 1.6 form is refused
// in a 1.7 manifest and the other way round.
TEST(ModuleManifest, ImagesAndEntryImagesAreChecked) {
  ModuleManifest m;
  m.kernel_pack_name = "ivf_flat_v1";
  m.archs = {90};
  m.images = {ModuleImage{10, std::string(64, 'a')}, ModuleImage{20, std::string(64, 'b')}};
  m.artifacts.push_back(module_artifact_from(sample()));
  m.entries.push_back(ModuleEntry{"scan", 0, std::nullopt, "variant", {}, 0});
  m.entries.push_back(ModuleEntry{"merge", std::nullopt, std::nullopt, "merge", {}, 1});
  const json good = json::parse(to_json(m));
  auto back = parse_module_manifest(good.dump(), "m.json");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_EQ(*back, m);
  auto rejected = [](const json& j, const std::string& what) {
    auto r = parse_module_manifest(j.dump(), "m.json");
    ASSERT_FALSE(r) << "accepted: " << what;
    EXPECT_NE(all_messages(r.error()).find(what), std::string::npos) << all_messages(r.error());
  };
  json j = good; j["entries"][1]["image"] = 2;
  rejected(j, "'entries[1].image': out of range");
  j = good; j["entries"][1]["image"] = -1;
  rejected(j, "'entries[1].image': out of range");
  j = good; j["entries"][0].erase("image");
  rejected(j, "'entries[0].image': missing");
  j = good; j["entries"][0]["image"] = nullptr;
  rejected(j, "'entries[0].image'");
  j = good; j["images"] = json::array();
  rejected(j, "'images': empty");
  j = good; j["images"][1]["kind"] = "cubin";
  rejected(j, "'images[1].kind'");
  j = good; j["image"] = j["images"][0];
  rejected(j, "image");
  j = good; j["version"]["minor"] = 6;  // images in a 1.6 manifest
  rejected(j, "images");
}

// A module holds one container section per image, in order, each checked
// against the manifest's size and SHA-256.
TEST(Module, OneSectionPerImage) {
  Module mod;
  mod.manifest.kernel_pack_name = "ivf_flat_v1";
  mod.manifest.archs = {90};
  mod.manifest.artifacts.push_back(module_artifact_from(sample()));
  mod.manifest.entries.push_back(ModuleEntry{"scan", 0, std::nullopt, "variant", {}, 0});
  mod.manifest.entries.push_back(ModuleEntry{"merge", std::nullopt, std::nullopt, "merge", {}, 1});
  mod.images = {Bytes{1, 2, 3}, Bytes{4, 5, 6, 7}};
  const Bytes bytes = serialize_module(mod);
  auto back = parse_module(bytes, "m.udfm");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_EQ(back->images, mod.images);
  ASSERT_EQ(back->manifest.images.size(), 2u);
  EXPECT_EQ(back->manifest.images[1].size, 4u);
  EXPECT_EQ(serialize_module(*back), bytes) << "deterministic";

  // A section short, and a section whose bytes are not the manifest's.
  auto c = read_container(bytes, "m.udfm", ContainerKind::Module);
  ASSERT_TRUE(c);
  Container fewer = *c;
  fewer.payloads.pop_back();
  auto r = parse_module(write_container(fewer), "m.udfm");
  ASSERT_FALSE(r);
  EXPECT_NE(all_messages(r.error()).find("lists 2 image(s) but the module holds 1"), std::string::npos) << all_messages(r.error());
  Container swapped = *c;
  std::swap(swapped.payloads[0], swapped.payloads[1]);
  r = parse_module(write_container(swapped), "m.udfm");
  ASSERT_FALSE(r);
  EXPECT_NE(all_messages(r.error()).find("fatbin 1 does not match the manifest's images[0]"), std::string::npos)
      << all_messages(r.error());
}

TEST(ModuleManifest, FiltersAndFilteredEntriesRoundTrip) {
  ModuleManifest m = one_metric_module();
  m.filters.push_back(module_filter_from(filter_sample()));
  m.entries.push_back(ModuleEntry{"scan", 0, std::nullopt, "variant", {}});
  m.entries.push_back(ModuleEntry{"scan_where", 0, 0, "variant", {}});
  auto back = parse_module_manifest(to_json(m), "m.json");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_EQ(*back, m);
  ASSERT_EQ(back->filters.size(), 1u);
  EXPECT_EQ(back->filters[0].symbol, "tenant_is");
  EXPECT_EQ(back->entries[1].filter, 0);

  json j = json::parse(to_json(m));
  for (json bad : {json(1), json(-1), json(4294967296), json("0")}) {
    j["entries"][1]["filter"] = bad;
    auto r = parse_module_manifest(j.dump(), "m.json");
    ASSERT_FALSE(r) << bad;
  }
  j["entries"][1]["filter"] = 0;
  j["entries"][1]["artifact"] = nullptr;
  auto r = parse_module_manifest(j.dump(), "m.json");
  ASSERT_FALSE(r);
  EXPECT_NE(all_messages(r.error()).find("a filtered entry needs its metric"), std::string::npos) << all_messages(r.error());
  // A 1.0 module (no filters, no entry filter fields) still reads.
  json old = json::parse(to_json(m));
  old.erase("filters");
  old["entries"].erase(1);
  old["entries"][0].erase("filter");
  auto o = parse_module_manifest(old.dump(), "old.json");
  ASSERT_TRUE(o) << all_messages(o.error());
  EXPECT_TRUE(o->filters.empty());
}

// --- ABI v2 metrics (ivf_flat.metric.v2, manifest 1.2) ----------------------

ArtifactManifest v2_state_sample() {
  ArtifactManifest m = sample();
  m.abi_id = kMetricV2AbiId;
  m.abi_version = kMetricV2AbiVersion;
  m.shape = MetricShape::State;
  m.symbol = "pearson_update";
  m.finalize = "pearson_finalize";
  m.elem = ElemType::F16;
  m.acc = AccType::F32;
  m.order = Order::Min;
  m.initial = InitialValue{};  // not used by v2
  m.initial_state = {InitialValue{0.0}, InitialValue{std::numeric_limits<double>::infinity()}, InitialValue{-1.5},
                     InitialValue{-std::numeric_limits<double>::infinity()}};
  m.state_words = 5;
  return m;
}

ArtifactManifest v2_vector_sample() {
  ArtifactManifest m = v2_state_sample();
  m.shape = MetricShape::Vector;
  m.symbol = "emd";
  m.finalize.reset();
  m.initial_state.clear();
  m.state_words = 0;
  m.order = Order::Max;
  return m;
}

TEST(ManifestV2, StateRoundTrip) {
  const ArtifactManifest m = v2_state_sample();
  const std::string text = to_json(m);
  json j = json::parse(text);
  EXPECT_EQ(j["abi"]["id"], "ivf_flat.metric.v2");
  EXPECT_EQ(j["abi"]["version"], 2);
  EXPECT_EQ(j["version"]["minor"], kArtifactManifestMinor);
  EXPECT_EQ(j["udf_kind"], "metric");
  EXPECT_EQ(j["shape"], "state");
  EXPECT_EQ(j["finalize"], "pearson_finalize");
  EXPECT_EQ(j["initial"], json::parse(R"([0.0, "inf", -1.5, "-inf"])"));
  EXPECT_EQ(j.dump(2) + "\n", text);
  auto back = parse_artifact_manifest(text, "state.json");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_EQ(*back, m);
  EXPECT_EQ(back->shape, MetricShape::State);
  EXPECT_EQ(back->initial_state.size(), 4u);
  EXPECT_EQ(to_json(*back), text);
}

TEST(ManifestV2, StateWithoutInitialWritesAnEmptyList) {
  ArtifactManifest m = v2_state_sample();
  m.initial_state.clear();
  EXPECT_EQ(json::parse(to_json(m))["initial"], json::array());
  auto back = parse_artifact_manifest(to_json(m), "state.json");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_EQ(*back, m);
}

TEST(ManifestV2, VectorRoundTrip) {
  const ArtifactManifest m = v2_vector_sample();
  const std::string text = to_json(m);
  json j = json::parse(text);
  EXPECT_EQ(j["abi"]["id"], "ivf_flat.metric.v2");
  EXPECT_EQ(j["shape"], "vector");
  EXPECT_TRUE(j["finalize"].is_null());
  EXPECT_EQ(j["initial"], json::array());
  EXPECT_EQ(j["order"], "max");
  auto back = parse_artifact_manifest(text, "vector.json");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_EQ(*back, m);
  EXPECT_EQ(back->shape, MetricShape::Vector);
  EXPECT_FALSE(back->finalize);
  EXPECT_EQ(to_json(*back), text);
}

TEST(ManifestV2, I32StateRoundTripsAsIntegers) {
  ArtifactManifest m = v2_state_sample();
  m.elem = ElemType::U8;
  m.acc = AccType::I32;
  m.initial_state = {InitialValue{-2147483648.0}, InitialValue{2147483647.0}, InitialValue{0}, InitialValue{7}};
  const std::string text = to_json(m);
  EXPECT_EQ(json::parse(text)["initial"], json::parse("[-2147483648, 2147483647, 0, 7]"));
  EXPECT_NE(text.find("\"initial\": [\n    -2147483648,"), std::string::npos) << text;  // integers, not 2147483647.0
  auto back = parse_artifact_manifest(text, "i32.json");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_EQ(*back, m);
}

TEST(ManifestV2, EightWordsAreTheLimit) {
  ArtifactManifest m = v2_state_sample();
  m.initial_state.assign(8, InitialValue{1.0});
  m.state_words = 8;
  auto back = parse_artifact_manifest(to_json(m), "eight.json");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_EQ(back->initial_state.size(), 8u);
}

TEST(ManifestV2, V1ManifestsAreUnchanged) {
  // A v1 metric has no shape and a scalar initial, as in 1.1.
  json j = json::parse(to_json(sample()));
  EXPECT_FALSE(j.contains("shape"));
  EXPECT_EQ(j["abi"]["id"], "ivf_flat.metric.v1");
  EXPECT_EQ(j["abi"]["version"], 1);
  EXPECT_EQ(j["initial"], "-inf");
  // A 1.1 manifest (minor 1) still reads, and so does the sample with minor 1.
  j["version"]["minor"] = 1;
  auto r = parse_artifact_manifest(j.dump(), "v1.json");
  ASSERT_TRUE(r) << all_messages(r.error());
  EXPECT_FALSE(r->shape);
  EXPECT_TRUE(r->initial_state.empty());
  EXPECT_EQ(*r, sample());
}

// Each bad ABI v2 manifest is rejected with an error naming the JSON path of
// the bad field.
void expect_rejected(const json& j, const std::string& path, const std::string& what = "") {
  auto r = parse_artifact_manifest(j.dump(), "bad.json");
  ASSERT_FALSE(r) << "accepted: " << path;
  const std::string all = all_messages(r.error());
  EXPECT_NE(all.find("bad.json: manifest field '" + path + "': " + what), std::string::npos) << path << " not in:\n" << all;
}

TEST(ManifestV2, BadManifestsNameTheirJsonPath) {
  const json state = json::parse(to_json(v2_state_sample()));
  const json vector = json::parse(to_json(v2_vector_sample()));
  const json v1 = json::parse(to_json(sample()));
  json j;

  j = state; j.erase("shape");
  expect_rejected(j, "shape", "missing");
  j = state; j["state_words"] = 0;
  expect_rejected(j, "state_words", "expected an integer 1..8");
  j = state; j["state_words"] = 9;
  expect_rejected(j, "state_words", "expected an integer 1..8");
  j = state; j["state_words"] = 3;  // the sample's initial state has 4 values
  expect_rejected(j, "state_words", "3 words, but the initial state gives 4 values");
  j = vector; j["state_words"] = 1;
  expect_rejected(j, "state_words", "only a state-shaped metric has state words");
  j = v1; j["state_words"] = 1;
  expect_rejected(j, "state_words");
  j = state; j["shape"] = "matrix";
  expect_rejected(j, "shape", "'matrix' is not one of state, vector");
  j = state; j["shape"] = 1;
  expect_rejected(j, "shape");
  j = state; j["initial"] = 0.0;
  expect_rejected(j, "initial", "expected an array");
  j = state; j["initial"] = json::array(); for (int i = 0; i < 9; ++i) j["initial"].push_back(0.0);
  expect_rejected(j, "initial", "9 values; the ABI v2 state has 8 words");
  j = state; j["initial"] = json::parse(R"([0, "infinity"])");
  expect_rejected(j, "initial[1]", "expected a number");
  j = state; j["initial"] = json::parse("[0, 1e300]");
  expect_rejected(j, "initial[1]", "1e+300 is out of range for the f32 accumulator");
  j = state; j["element_type"] = "i8"; j["accumulator_type"] = "i32"; j["initial"] = json::parse("[0, 1.5]");
  expect_rejected(j, "initial[1]", "1.5 is not an integer in the i32 range");
  j = state; j["element_type"] = "i8"; j["accumulator_type"] = "i32"; j["initial"] = json::parse(R"(["inf"])");
  expect_rejected(j, "initial[0]", "\"inf\" is not an i32 value");
  j = state; j["element_type"] = "u8"; j["accumulator_type"] = "i32"; j["initial"] = json::parse("[2147483648]");
  expect_rejected(j, "initial[0]");
  j = state; j["finalize"] = nullptr;
  expect_rejected(j, "finalize", "a state-shaped metric needs its finalize function");
  j = state; j.erase("finalize");
  expect_rejected(j, "finalize", "missing");
  j = state; j["finalize"] = "not an identifier";
  expect_rejected(j, "finalize", "'not an identifier' is not a C identifier");
  j = state; j["abi"]["version"] = 1;
  expect_rejected(j, "abi.version", "1 is not the version of ABI ivf_flat.metric.v2 (2)");
  j = vector; j["finalize"] = "emd_fin";
  expect_rejected(j, "finalize", "a vector-shaped metric has no finalize (null)");
  j = vector; j["initial"] = json::parse("[0]");
  expect_rejected(j, "initial", "a vector-shaped metric has no initial state ([])");
  j = vector; j["initial"] = 0;
  expect_rejected(j, "initial", "expected an array");
  // v1 metrics have no shape and a scalar initial.
  j = v1; j["shape"] = "state";
  expect_rejected(j, "shape", "only ABI ivf_flat.metric.v2 metrics have a shape");
  j = v1; j["initial"] = json::parse("[0]");
  expect_rejected(j, "initial", "expected a number");
  // Filters have neither, and cannot claim the v2 metric ABI.
  j = json::parse(to_json(filter_sample())); j["shape"] = "vector";
  expect_rejected(j, "shape", "a filter has no such field");
  j = json::parse(to_json(filter_sample())); j["abi"] = {{"id", "ivf_flat.metric.v2"}, {"version", 2}};
  expect_rejected(j, "abi.id", "'ivf_flat.metric.v2' does not fit udf_kind 'filter'");
}

TEST(ManifestV2, EveryBadV2FieldIsReportedAtOnce) {
  json j = json::parse(to_json(v2_state_sample()));
  j["shape"] = "matrix";
  j["initial"] = json::parse(R"([0, "x", 2, "y"])");
  j["abi"]["version"] = 3;
  auto r = parse_artifact_manifest(j.dump(), "bad.json");
  ASSERT_FALSE(r);
  const std::string all = all_messages(r.error());
  for (const char* path : {"'shape'", "'initial[1]'", "'initial[3]'", "'abi.version'"})
    EXPECT_NE(all.find(std::string("manifest field ") + path), std::string::npos) << path << " not in:\n" << all;
}

// "monotone" (1.4): an optional boolean of ABI v1 metrics, written only when
// true, so that every other manifest reads and writes as before.
TEST(ManifestMonotone, RoundTripAndAbsentIsFalse) {
  ArtifactManifest m = sample();
  EXPECT_FALSE(m.monotone);
  EXPECT_FALSE(json::parse(to_json(m)).contains("monotone"));
  auto plain = parse_artifact_manifest(to_json(m), "m.json");
  ASSERT_TRUE(plain) << all_messages(plain.error());
  EXPECT_FALSE(plain->monotone);

  m.monotone = true;
  const std::string text = to_json(m);
  json j = json::parse(text);
  ASSERT_TRUE(j.contains("monotone"));
  EXPECT_EQ(j["monotone"], true);
  EXPECT_EQ(j.dump(2) + "\n", text);  // still canonical
  auto back = parse_artifact_manifest(text, "m.json");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_TRUE(back->monotone);
  EXPECT_EQ(*back, m);
  EXPECT_EQ(to_json(*back), text);

  // Only the field tells the two apart.
  json without = j;
  without.erase("monotone");
  EXPECT_EQ(without, json::parse(to_json(sample())));

  // "monotone": false reads as absent and is written back without the key;
  // so does a manifest older than 1.4 (here 1.3, without the field).
  json f = json::parse(to_json(sample()));
  f["monotone"] = false;
  auto r = parse_artifact_manifest(f.dump(), "false.json");
  ASSERT_TRUE(r) << all_messages(r.error());
  EXPECT_FALSE(r->monotone);
  EXPECT_EQ(to_json(*r), to_json(sample()));
  json old = json::parse(to_json(sample()));
  old["version"]["minor"] = 3;
  r = parse_artifact_manifest(old.dump(), "old.json");
  ASSERT_TRUE(r) << all_messages(r.error());
  EXPECT_FALSE(r->monotone);
}

TEST(ManifestMonotone, MustBeABoolean) {
  json j = json::parse(to_json(sample()));
  for (json bad : {json(1), json(0), json("true"), json(nullptr), json::array({true}), json::object()}) {
    j["monotone"] = bad;
    expect_rejected(j, "monotone", "expected boolean, got ");
  }
}

TEST(ManifestMonotone, OnlyAbiV1MetricsHaveIt) {
  // A filter has no metric fields; whatever the value, the field is refused.
  for (json v : {json(true), json(false)}) {
    json j = json::parse(to_json(filter_sample()));
    j["monotone"] = v;
    expect_rejected(j, "monotone", "a filter has no such field (it belongs to metrics)");
    // ABI v2 metrics (either shape) have no v1 accumulator to stop folding.
    for (const ArtifactManifest& m : {v2_state_sample(), v2_vector_sample()}) {
      json k = json::parse(to_json(m));
      k["monotone"] = v;
      expect_rejected(k, "monotone", "only ABI ivf_flat.metric.v1 metrics may be monotone (this one is ivf_flat.metric.v2)");
    }
  }
  // Reported with the manifest's other problems.
  json j = json::parse(to_json(filter_sample()));
  j["monotone"] = true;
  j["order"] = "min";
  auto r = parse_artifact_manifest(j.dump(), "f.json");
  ASSERT_FALSE(r);
  const std::string all = all_messages(r.error());
  EXPECT_NE(all.find("'monotone'"), std::string::npos) << all;
  EXPECT_NE(all.find("'order'"), std::string::npos) << all;
}

// "coarse_weights" (1.5): the name of a metric's f32 array capture whose value
// a build takes as its coarse weights; written only when set, carried into
// the module (1.13), and refused where it names no such capture.
ArtifactManifest weighted_sample() {
  ArtifactManifest m = sample();
  m.coarse_metric = CoarseMetric::L2;
  m.captures = {Capture{"bias", CaptureType::I32, false}, Capture{"w", CaptureType::F32, true},
                Capture{"h", CaptureType::F16, true}};
  m.coarse_weights = "w";
  return m;
}

TEST(ManifestCoarseWeights, RoundTripAndAbsentIsNone) {
  EXPECT_FALSE(json::parse(to_json(sample())).contains("coarse_weights"));
  const ArtifactManifest m = weighted_sample();
  const std::string text = to_json(m);
  json j = json::parse(text);
  EXPECT_EQ(j["coarse_weights"], "w");
  EXPECT_EQ(j.dump(2) + "\n", text);  // still canonical
  auto back = parse_artifact_manifest(text, "m.json");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_EQ(back->coarse_weights, std::optional<std::string>("w"));
  EXPECT_EQ(*back, m);
  j.erase("coarse_weights");
  back = parse_artifact_manifest(j.dump(), "m.json");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_FALSE(back->coarse_weights);

  // The module keeps it, and reads it back; without it, the module has no key.
  ModuleManifest mod = one_metric_module();
  mod.artifacts[0] = module_artifact_from(m);
  EXPECT_EQ(mod.artifacts[0].coarse_weights, std::optional<std::string>("w"));
  json mj = json::parse(to_json(mod));
  EXPECT_EQ(mj["artifacts"][0]["coarse_weights"], "w");
  EXPECT_EQ(mj["version"]["minor"], 13);
  auto mback = parse_module_manifest(mj.dump(), "m.json");
  ASSERT_TRUE(mback) << all_messages(mback.error());
  EXPECT_EQ(mback->artifacts[0].coarse_weights, std::optional<std::string>("w"));
  EXPECT_FALSE(json::parse(to_json(one_metric_module()))["artifacts"][0].contains("coarse_weights"));
}

TEST(ManifestCoarseWeights, MustNameAnF32ArrayCaptureOfAnL2OrIpMetric) {
  const json good = json::parse(to_json(weighted_sample()));
  json j = good;
  j["coarse_weights"] = "v";
  expect_rejected(j, "coarse_weights", "names capture 'v', which is not declared (captures: bias:i32, w:f32[], h:f16[])");
  j["coarse_weights"] = "bias";
  expect_rejected(j, "coarse_weights", "capture 'bias' is bias:i32: coarse weights are an f32 array");
  j["coarse_weights"] = "h";
  expect_rejected(j, "coarse_weights", "capture 'h' is h:f16[]: coarse weights are an f32 array");
  j["coarse_weights"] = 3;
  expect_rejected(j, "coarse_weights", "expected the name of a capture (a string), got number");
  j = good;
  j["coarse_metric"] = "cosine";
  expect_rejected(j, "coarse_weights", "the coarse metric is cosine");
  j = good;
  j["coarse_metric"] = "inner_product";
  EXPECT_TRUE(parse_artifact_manifest(j.dump(), "ip.json"));
  // A filter has none.
  json f = json::parse(to_json(filter_sample()));
  f["coarse_weights"] = "w";
  expect_rejected(f, "coarse_weights", "a filter has no such field (it belongs to metrics)");
  // A module's artifact is checked the same way, by its own path.
  ModuleManifest mod = one_metric_module();
  mod.artifacts[0] = module_artifact_from(weighted_sample());
  json mj = json::parse(to_json(mod));
  mj["artifacts"][0]["coarse_weights"] = "h";
  auto r = parse_module_manifest(mj.dump(), "m.json");
  ASSERT_FALSE(r);
  EXPECT_NE(all_messages(r.error()).find("'artifacts[0].coarse_weights': capture 'h' is h:f16[]"), std::string::npos)
      << all_messages(r.error());
}

TEST(ParseInitialState, ListsOfUpToEightValues) {
  auto a = parse_initial_state("0,inf,-1.5", AccType::F32);
  ASSERT_TRUE(a) << a.error().message();
  ASSERT_EQ(a->size(), 3u);
  EXPECT_EQ((*a)[0].value, 0.0);
  EXPECT_TRUE(std::isinf((*a)[1].value) && (*a)[1].value > 0);
  EXPECT_EQ((*a)[2].value, -1.5);
  EXPECT_EQ(to_string(*a, AccType::F32), "0,inf,-1.5");
  EXPECT_EQ(parse_initial_state("0.1", AccType::F32)->front().value, static_cast<double>(0.1f));  // rounded to f32

  auto i = parse_initial_state("-2147483648,2147483647,0", AccType::I32);
  ASSERT_TRUE(i) << i.error().message();
  EXPECT_EQ(to_string(*i, AccType::I32), "-2147483648,2147483647,0");

  EXPECT_TRUE(parse_initial_state("1,2,3,4,5,6,7,8", AccType::F32));
  auto nine = parse_initial_state("1,2,3,4,5,6,7,8,9", AccType::F32);
  ASSERT_FALSE(nine);
  EXPECT_NE(nine.error().message().find("9 values; the ABI v2 state has 8 words"), std::string::npos) << nine.error().message();
  EXPECT_EQ(nine.error().kind(), ErrorKind::Usage);

  for (const char* bad : {"1,,2", "1,", ",1", "", "1;2", "nan"}) EXPECT_FALSE(parse_initial_state(bad, AccType::F32)) << bad;
  for (const char* bad : {"1,2.5", "inf", "0,2147483648"}) EXPECT_FALSE(parse_initial_state(bad, AccType::I32)) << bad;
  // Every bad value is reported, not only the first.
  auto two = parse_initial_state("x,1,y", AccType::F32);
  ASSERT_FALSE(two);
  EXPECT_EQ(two.error().diagnostics().size(), 2u) << all_messages(two.error());
}

ModuleManifest v2_module() {
  ModuleManifest m;
  m.kernel_pack_name = "ivf_flat_v1";
  m.archs = {90};
  m.images = {ModuleImage{1, std::string(64, 'a')}};
  m.images = {ModuleImage{1, std::string(64, 'a')}};
  m.artifacts.push_back(module_artifact_from(v2_state_sample()));
  m.artifacts.push_back(module_artifact_from(v2_vector_sample()));
  m.artifacts.push_back(module_artifact_from(sample()));
  m.filters.push_back(module_filter_from(filter_sample()));
  m.entries.push_back(ModuleEntry{"udf_ivf_scan_v2_state__pearson_update__f16_f32_min_k32", 0, std::nullopt,
                                  "udf_ivf_scan_v2_state_f16_f32_min_k32", {{"k_max", 32}}});
  m.entries.push_back(ModuleEntry{"udf_ivf_scan_v2_vector__emd__f16_f32_max_k32", 1, std::nullopt,
                                  "udf_ivf_scan_v2_vector_f16_f32_max_k32",
                                  {{"k_max", 32}, {"smem_per_staged_row_word", 16}}});
  m.entries.push_back(ModuleEntry{"udf_ivf_scan_v2_vector__emd__where__tenant_is__f16_f32_max_k32", 1, 0,
                                  "udf_ivf_scan_v2_vector_f16_f32_max_k32", {{"k_max", 32}}});
  return m;
}

TEST(ModuleManifestV2, V1AndV2ArtifactsRoundTrip) {
  const ModuleManifest m = v2_module();
  const std::string text = to_json(m);
  json j = json::parse(text);
  EXPECT_EQ(j["version"]["minor"], kModuleManifestMinor);
  EXPECT_EQ(j["artifacts"][0]["shape"], "state");
  EXPECT_EQ(j["artifacts"][0]["state_words"], 5);
  EXPECT_FALSE(j["artifacts"][1].contains("state_words"));
  EXPECT_EQ(j["artifacts"][0]["finalize"], "pearson_finalize");
  EXPECT_EQ(j["artifacts"][0]["initial"], json::parse(R"([0.0, "inf", -1.5, "-inf"])"));
  EXPECT_EQ(j["artifacts"][1]["shape"], "vector");
  EXPECT_TRUE(j["artifacts"][1]["finalize"].is_null());
  EXPECT_EQ(j["artifacts"][1]["initial"], json::array());
  EXPECT_FALSE(j["artifacts"][2].contains("shape"));  // v1: as in 1.1
  EXPECT_EQ(j["artifacts"][2]["initial"], "-inf");
  EXPECT_EQ(j["entries"][1]["launch"]["smem_per_staged_row_word"], 16);
  auto back = parse_module_manifest(text, "m.json");
  ASSERT_TRUE(back) << all_messages(back.error());
  EXPECT_EQ(*back, m);
  EXPECT_EQ(back->artifacts[0].shape, MetricShape::State);
  EXPECT_EQ(back->artifacts[1].shape, MetricShape::Vector);
  EXPECT_FALSE(back->artifacts[2].shape);
  EXPECT_EQ(to_json(*back), text);
}

TEST(ModuleManifestV2, BadArtifactsNameTheirJsonPath) {
  const json good = json::parse(to_json(v2_module()));
  auto rejected = [](const json& j, const std::string& path) {
    auto r = parse_module_manifest(j.dump(), "m.json");
    ASSERT_FALSE(r) << "accepted: " << path;
    EXPECT_NE(all_messages(r.error()).find("manifest field '" + path + "'"), std::string::npos) << all_messages(r.error());
  };
  json j = good; j["artifacts"][0]["shape"] = "matrix";
  rejected(j, "artifacts[0].shape");
  j = good; j["artifacts"][0]["shape"] = 2;
  rejected(j, "artifacts[0].shape");
  j = good; j["artifacts"][0]["initial"] = 0.0;
  rejected(j, "artifacts[0].initial");
  j = good; j["artifacts"][0]["initial"] = json::array(); for (int i = 0; i < 9; ++i) j["artifacts"][0]["initial"].push_back(1);
  rejected(j, "artifacts[0].initial");
  j = good; j["artifacts"][0]["initial"] = json::parse(R"([0, "x"])");
  rejected(j, "artifacts[0].initial[1]");
  j = good; j["artifacts"][0]["accumulator_type"] = "i32"; j["artifacts"][0]["element_type"] = "i8";
  j["artifacts"][0]["initial"] = json::parse("[0, 0.5]");
  rejected(j, "artifacts[0].initial[1]");
  j = good; j["artifacts"][2]["initial"] = json::parse("[0]");  // v1: one value
  rejected(j, "artifacts[2].initial");
  j = good; j["artifacts"][0]["finalize"] = nullptr;  // state: finalize required
  rejected(j, "artifacts[0].finalize");
  j = good; j["artifacts"][1]["finalize"] = "fin";  // vector: none
  rejected(j, "artifacts[1].finalize");
  j = good; j["artifacts"][1]["initial"] = json::parse("[1]");  // vector: no state
  rejected(j, "artifacts[1].initial");
  j = good; j["artifacts"][0]["state_words"] = 9;
  rejected(j, "artifacts[0].state_words");
  j = good; j["artifacts"][1]["state_words"] = 1;  // vector: no state words
  rejected(j, "artifacts[1].state_words");
  j = good; j["artifacts"][2]["state_words"] = 1;  // v1
  rejected(j, "artifacts[2].state_words");
  j = good; j["artifacts"][0].erase("state_words");  // 1.2: every word
  auto old = parse_module_manifest(j.dump(), "m.json");
  ASSERT_TRUE(old) << all_messages(old.error());
  EXPECT_EQ(old->artifacts[0].state_words, 8u);
}

}  // namespace
}  // namespace udf
