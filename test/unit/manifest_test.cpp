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

#include "udf/artifact/manifest.h"
#include "udf/artifact/module.h"

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
  EXPECT_EQ(j["version"]["minor"], 1);
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
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "schemas" / "tests";
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

TEST(ModuleManifest, InitialMustSuitTheAccumulator) {
  ModuleManifest m;
  m.kernel_pack_name = "ivf_flat_v1";
  m.archs = {90};
  m.artifacts.push_back(module_artifact_from(sample()));
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
  ModuleManifest m;
  m.kernel_pack_name = "ivf_flat_v1";
  m.archs = {90};
  m.artifacts.push_back(module_artifact_from(sample()));
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

TEST(ModuleManifest, FiltersAndFilteredEntriesRoundTrip) {
  ModuleManifest m;
  m.kernel_pack_name = "ivf_flat_v1";
  m.archs = {90};
  m.artifacts.push_back(module_artifact_from(sample()));
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

}  // namespace
}  // namespace udf
