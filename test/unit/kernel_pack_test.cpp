// The IVF-Flat kernel pack (kernels/, share/udf/kernels/): the manifest is
// complete and matches the built LTO-IR, and every tested scan variant links
// with a UDF and an entry wrapper made the way udf-link makes them, with the
// scan body and the UDF inlined into the entry kernel.  No GPU needed.
// ABI v2 (ivf_flat.metric.v2) scan variants live in their own file of the
// pack ("contents": "metric_v2"); their UDFs (update + finalize, or distance)
// are checked the same way.
#include <gtest/gtest.h>

#include <nvJitLink.h>
#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "udf/kernels/ivf_flat_v1.h"
#include "udf/link/elf.h"
#include "udf/link/kernel_pack.h"
#include "udf/support/cache.h"
#include "udf/support/fs.h"
#include "udf/support/hash.h"

// Suite name "kernel_pack" so that `ctest -R kernel_pack` selects these tests.
namespace {

using nlohmann::json;

const std::string kPackDir = UDF_KERNEL_PACK_DIR;
// The build's UDF_KERNEL_PACK_ARCH and UDF_KERNEL_PACK_COPY_ARCH (empty: none).
const char* const kPackArch = UDF_KERNEL_PACK_ARCH;
const char* const kCopyArch = UDF_KERNEL_PACK_COPY_ARCH;
// The NN of compute_NN.
int sm_of(const std::string& arch) { return std::stoi(arch.substr(arch.find('_') + 1)); }
// 1.13: a pack for an arch older than compute_80 builds the v1 and state rows
// families once more for the copy arch, unless the build turned that off.
const bool kCopyFiles = kCopyArch[0] != '\0' && sm_of(kPackArch) < 80;
const std::string kIncludeDir = std::string(UDF_SOURCE_DIR) + "/include";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ADD_FAILURE() << "cannot read " << path;
  return {std::istreambuf_iterator<char>(in), {}};
}

const json& manifest() {
  static const json m = json::parse(slurp(kPackDir + "/ivf_flat_v1.json"));
  return m;
}

// The manifest's entry for a pack file.
const json* file_entry(const std::string& name) {
  for (const json& f : manifest().at("files"))
    if (f.at("path") == name) return &f;
  return nullptr;
}

// A pack file's bytes (each read once).
const std::string& pack_file(const std::string& name) {
  static std::map<std::string, std::string> read;
  auto it = read.find(name);
  if (it == read.end()) it = read.emplace(name, slurp(kPackDir + "/" + name)).first;
  return it->second;
}

// The pack file holding a scan variant or kernel, as the manifest says.
std::string file_of(const std::string& symbol) {
  for (const char* list : {"scan_variants", "kernels"})
    for (const json& v : manifest().at(list))
      if (v.at("symbol") == symbol) return v.at("file");
  ADD_FAILURE() << symbol << " is not in the pack's manifest";
  return "";
}

// The NN of a pack file's compute_NN.
int file_arch(const std::string& name) {
  const json* f = file_entry(name);
  if (!f) {
    ADD_FAILURE() << name << " is not one of the pack's files";
    return 0;
  }
  return sm_of(f->at("arch"));
}

// The file a link for `arch` (sm_NN) takes for a scan variant: of its file
// and arch_files, the newest not newer than the target (1.13; udf-link's
// PlannedEntry::pack_file).
std::string file_for(const std::string& variant, const std::string& arch) {
  const int target = std::stoi(arch.substr(3));
  std::string best = file_of(variant);
  for (const json& v : manifest().at("scan_variants"))
    if (v.at("symbol") == variant)
      for (const json& f : v.value("arch_files", json::array()))
        if (file_arch(f) <= target && file_arch(f) > file_arch(best)) best = f;
  return best;
}

// A variant's file for `arch` and the one with its order's merges, as udf-link links them.
std::vector<std::pair<std::string, const std::string*>> pack_inputs(const std::string& variant, const std::string& order,
                                                                    const std::string& arch) {
  const std::string merges = file_of("udf_ivf_merge_v1_" + order + "_k32");
  const std::string file = file_for(variant, arch);
  return {{file, &pack_file(file)}, {merges, &pack_file(merges)}};
}

// --- NVRTC and nvJitLink, every result and log checked ---------------------

struct Compiled {
  std::string ltoir;
  std::string log;
};

Compiled nvrtc_ltoir(const std::string& src, const std::string& name, const std::string& arch) {
  const std::string abi = slurp(kIncludeDir + "/udf/abi/metric_v1.h");
  const std::string abi_v2 = slurp(kIncludeDir + "/udf/abi/metric_v2.h");
  const std::string filter_abi = slurp(kIncludeDir + "/udf/abi/filter_v1.h");
  const std::string kern = slurp(kIncludeDir + "/udf/kernels/ivf_flat_v1.h");
  const char* hdrs[] = {abi.c_str(), abi_v2.c_str(), filter_abi.c_str(), kern.c_str()};
  const char* names[] = {"udf/abi/metric_v1.h", "udf/abi/metric_v2.h", "udf/abi/filter_v1.h", "udf/kernels/ivf_flat_v1.h"};
  nvrtcProgram prog = nullptr;
  EXPECT_EQ(nvrtcCreateProgram(&prog, src.c_str(), name.c_str(), 4, hdrs, names), NVRTC_SUCCESS);
  const std::string arch_opt = "-arch=" + arch;
  const char* opts[] = {arch_opt.c_str(), "-dlto", "-rdc=true", "-std=c++17"};
  const nvrtcResult r = nvrtcCompileProgram(prog, 4, opts);
  Compiled out;
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  out.log.assign(n, '\0');
  nvrtcGetProgramLog(prog, out.log.data());
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  EXPECT_EQ(r, NVRTC_SUCCESS) << name << ":\n" << out.log << "\n" << src;
  if (r == NVRTC_SUCCESS) {
    EXPECT_EQ(nvrtcGetLTOIRSize(prog, &n), NVRTC_SUCCESS);
    out.ltoir.assign(n, '\0');
    EXPECT_EQ(nvrtcGetLTOIR(prog, out.ltoir.data()), NVRTC_SUCCESS);
  }
  nvrtcDestroyProgram(&prog);
  return out;
}

struct Linked {
  bool ok = false;
  std::string image;  // cubin, or PTX text with want_ptx
  std::string error_log;
  double seconds = 0;
};

std::string jl_error_log(nvJitLinkHandle h) {
  size_t n = 0;
  if (nvJitLinkGetErrorLogSize(h, &n) != NVJITLINK_SUCCESS) return "<no log>";
  std::string s(n, '\0');
  if (n) nvJitLinkGetErrorLog(h, s.data());
  while (!s.empty() && (s.back() == '\0' || s.back() == '\n')) s.pop_back();
  return s;
}

Linked jit_link(const std::string& arch, const std::vector<std::pair<std::string, const std::string*>>& inputs,
                bool want_ptx, const std::vector<std::string>& extra = {}) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> opts = {"-arch=" + arch, "-lto"};
  if (want_ptx) opts.push_back("-ptx");
  opts.insert(opts.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  Linked out;
  nvJitLinkHandle h = nullptr;
  if (nvJitLinkCreate(&h, static_cast<uint32_t>(argv.size()), argv.data()) != NVJITLINK_SUCCESS) {
    out.error_log = "nvJitLinkCreate failed";
    return out;
  }
  for (const auto& [name, data] : inputs) {
    if (nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, data->data(), data->size(), name.c_str()) != NVJITLINK_SUCCESS) {
      out.error_log = name + ": " + jl_error_log(h);
      nvJitLinkDestroy(&h);
      return out;
    }
  }
  const nvJitLinkResult r = nvJitLinkComplete(h);
  out.error_log = jl_error_log(h);
  if (r == NVJITLINK_SUCCESS) {
    size_t n = 0;
    if (want_ptx) {
      if (nvJitLinkGetLinkedPtxSize(h, &n) == NVJITLINK_SUCCESS) {
        out.image.assign(n, '\0');
        out.ok = nvJitLinkGetLinkedPtx(h, out.image.data()) == NVJITLINK_SUCCESS;
      }
    } else if (nvJitLinkGetLinkedCubinSize(h, &n) == NVJITLINK_SUCCESS) {
      out.image.assign(n, '\0');
      out.ok = nvJitLinkGetLinkedCubin(h, out.image.data()) == NVJITLINK_SUCCESS;
    }
  }
  nvJitLinkDestroy(&h);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::set<std::string> cubin_symbols(const std::string& cubin, std::set<std::string>* functions = nullptr) {
  auto elf = udf::read_elf(std::span(reinterpret_cast<const std::uint8_t*>(cubin.data()), cubin.size()), "cubin");
  EXPECT_TRUE(static_cast<bool>(elf)) << (elf ? "" : elf.error().message());
  std::set<std::string> names;
  if (!elf) return names;
  EXPECT_EQ(elf->machine, 190);  // EM_CUDA
  for (const auto& s : elf->symbols) {
    names.insert(s.name);
    if (functions && s.is_function()) functions->insert(s.name);
  }
  return names;
}

// --- The UDFs and the entry wrapper ----------------------------------------

struct Udf {
  std::string source;    // compiled as the UDF artifact would be (its own module)
  std::string metric;    // symbol
  std::string finalize;  // symbol or empty
  std::string acc_c;     // float or int32_t
};

Udf l2_f32() {
  return {R"(#include <udf/abi/metric_v1.h>
extern "C" __device__ float udf_l2(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y; return acc + d * d;
})", "udf_l2", "", "float"};
}

Udf ip_sqrt_f32() {
  return {R"(#include <udf/abi/metric_v1.h>
extern "C" __device__ float udf_ip(float x, float y, float acc, const udf_ctx_v1 *ctx) { return acc + x * y; }
extern "C" __device__ float udf_ip_fin(float acc, const udf_ctx_v1 *ctx) { return acc * 0.5f; }
)", "udf_ip", "udf_ip_fin", "float"};
}

Udf l2_i32() {
  return {R"(#include <udf/abi/metric_v1.h>
extern "C" __device__ int32_t udf_l2i(int32_t x, int32_t y, int32_t acc, const udf_ctx_v1 *ctx) {
  int32_t d = x - y; return acc + d * d;
}
extern "C" __device__ float udf_l2i_fin(int32_t acc, const udf_ctx_v1 *ctx) { return sqrtf((float)acc); }
)", "udf_l2i", "udf_l2i_fin", "int32_t"};
}

Udf weighted_l2_f32() {
  return {R"(#include <udf/abi/metric_v1.h>
static __device__ __forceinline__ const float *udf_capture_w(const udf_ctx_v1 *ctx) {
  return (const float *)ctx->captures[0].ptr;
}
extern "C" __device__ float udf_wl2(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y; return acc + UDF_CAPTURE(ctx, w)[ctx->dim] * d * d;
})", "udf_wl2", "", "float"};
}

std::string entry_name(const std::string& variant) { return "udf_entry_" + variant.substr(std::string("udf_ivf_scan_v1_").size()); }

// Exactly the wrapper udf-link generates (see docs/kernels.md).
std::string entry_source(const std::string& variant, const Udf& udf) {
  std::string s = "#include <udf/kernels/ivf_flat_v1.h>\n";
  s += fmt::format("extern \"C\" __device__ {0} {1}({0} x, {0} y, {0} acc, const udf_ctx_v1 *ctx);\n", udf.acc_c, udf.metric);
  if (!udf.finalize.empty())
    s += fmt::format("extern \"C\" __device__ float {}({} acc, const udf_ctx_v1 *ctx);\n", udf.finalize, udf.acc_c);
  s += fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(udf_ivf_scan_args_v1 args) {{ {}(&args, &{}, {}, nullptr); }}\n",
      UDF_IVF_V1_BLOCK_THREADS, entry_name(variant), variant, udf.metric,
      udf.finalize.empty() ? std::string("nullptr") : "&" + udf.finalize);
  return s;
}

// --- Manifest ----------------------------------------------------------------

TEST(kernel_pack, ManifestDescribesThePack) {
  const json& m = manifest();
  EXPECT_EQ(m.at("kind"), "udf.kernel-pack");
  EXPECT_EQ(m.at("version").at("major"), 1);
  EXPECT_EQ(m.at("version").at("minor"), 16);  // 1.2: ABI v2 scan variants; 1.3: per_query_state_word; 1.4: tail_merge; 1.5: query_bound; 1.6: prune variants; 1.7: a file per family; 1.8: k_max 32 sort_capacity 128; 1.9: rows twins; 1.10: their row stage; 1.11: one-row queries skip the tail merge; 1.12: the rows twins' copied stage; 1.13: their arch_files; 1.14: the v1 f32 twins' tile_queries; 1.15: filtered_min_blocks_per_sm; 1.16: filtered_prune
  for (const json& v : m.at("scan_variants")) {
    EXPECT_EQ(v.value("tail_merge", 0), 1) << v.at("symbol");
    EXPECT_EQ(v.value("query_bound", 0), 1) << v.at("symbol");
  }
  EXPECT_EQ(m.at("name"), UDF_IVF_V1_PACK_ID);
  EXPECT_EQ(m.at("abi"), UDF_ABI_METRIC_V1_ID);
  EXPECT_EQ(m.at("filter_abi"), UDF_ABI_FILTER_V1_ID);
  EXPECT_EQ(m.at("metric_abis"), (json{UDF_ABI_METRIC_V1_ID, UDF_ABI_METRIC_V2_ID}));
  EXPECT_EQ(m.at("header"), "udf/kernels/ivf_flat_v1.h");
  EXPECT_EQ(m.at("layout").at("group_size"), UDF_IVF_V1_GROUP_SIZE);
  // 1.7: one file per family -- 12 of v1 scans, 2 of merges, 24 of v2 scans
  // (marked "contents": "metric_v2"), all for the pack's arch; 1.9: the rows
  // twins' 12 + 24 (rows_v2_* marked too).  1.13: in a pack for an arch
  // older than compute_80, the 12 v1 and 12 state rows families once more
  // for the copy arch (<family>.compute_80.ltoir), unless the build turned
  // them off.
  ASSERT_EQ(m.at("files").size(), kCopyFiles ? 98u : 74u);
  std::set<std::string> paths;
  for (const json& f : m.at("files")) {
    const std::string path = f.at("path");
    EXPECT_TRUE(paths.insert(path).second) << "duplicate " << path;
    EXPECT_EQ(f.at("kind"), "ltoir") << path;
    const std::string suffix = std::string(".") + kCopyArch + ".ltoir";
    const bool copy = path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
    EXPECT_EQ(f.at("arch"), copy ? kCopyArch : kPackArch) << path;
    if (copy) {
      EXPECT_TRUE(path.rfind("rows_v1_", 0) == 0 || path.rfind("rows_v2_state_", 0) == 0) << path;
    }
    const bool v2 = path.rfind("scan_v2_", 0) == 0 || path.rfind("rows_v2_", 0) == 0;
    EXPECT_EQ(f.value("contents", ""), v2 ? "metric_v2" : "") << path;
  }

  // Every (elem, acc) pair of the ABI, both orders, k up to 1024.
  std::set<std::string> symbols;
  std::set<std::tuple<std::string, std::string, std::string>> combos, pruned;
  int max_k = 0;
  for (const json& v : m.at("scan_variants")) {
    if (v.contains("abi")) continue;  // ABI v2: ManifestDescribesTheV2Variants
    if (v.contains("rows")) continue;  // ManifestDescribesTheRowsTwins
    const std::string elem = v.at("elem"), acc = v.at("acc"), order = v.at("order");
    const unsigned kmax = v.at("k_max");
    // 1.6: the prune variants (monotone metrics), k_max 32, beside the plain ones; the f32
    // ones ask for 7 blocks an SM.  1.16: the f32 and f16 ones prune filtered launches
    // too, the f32 entries at 6 blocks an SM.
    const bool prune = v.value("prune", 0) == 1;
    EXPECT_EQ(v.at("symbol"), fmt::format("udf_ivf_scan_v1_{}{}_{}_{}_k{}", prune ? "prune_" : "", elem, acc, order, kmax));
    if (prune) {
      EXPECT_EQ(kmax, 32u) << v.at("symbol");
      EXPECT_EQ(v.value("min_blocks_per_sm", 0), elem == "f32" ? 7 : 0) << v.at("symbol");
      EXPECT_EQ(v.value("filtered_min_blocks_per_sm", 0), elem == "f32" ? 6 : 0) << v.at("symbol");
      EXPECT_EQ(v.value("filtered_prune", 0), elem == "f32" || elem == "f16" ? 1 : 0) << v.at("symbol");
      pruned.insert({elem, acc, order});
    } else {
      EXPECT_FALSE(v.contains("min_blocks_per_sm")) << v.at("symbol");
      EXPECT_FALSE(v.contains("filtered_prune")) << v.at("symbol");
      // 1.15: the plain f32 scans' filtered entries ask for 6 blocks an SM.
      EXPECT_EQ(v.value("filtered_min_blocks_per_sm", 0), elem == "f32" ? 6 : 0) << v.at("symbol");
    }
    EXPECT_TRUE(symbols.insert(v.at("symbol")).second) << "duplicate " << v.at("symbol");
    EXPECT_EQ(v.at("file"), fmt::format("scan_v1_{}_{}_{}.ltoir", elem, acc, order));
    EXPECT_EQ(v.at("block_threads"), UDF_IVF_V1_BLOCK_THREADS);
    EXPECT_EQ(v.at("grid"), "n_items");
    EXPECT_EQ(v.at("metric_type"), "udf_metric_v1_" + acc + "_fn");
    EXPECT_EQ(v.at("finalize_type"), "udf_finalize_v1_" + acc + "_fn");
    EXPECT_EQ(v.at("args_type"), "udf_ivf_scan_args_v1");
    const unsigned eb = v.at("elem_bytes");
    EXPECT_EQ(v.at("veclen"), 16u / eb);
    const unsigned s = v.at("sort_capacity");
    EXPECT_EQ(s, UDF_IVF_V1_SORT_CAPACITY(kmax));
    // The manifest's smem formula agrees with the header's macro.
    const json& sm = v.at("dynamic_smem");
    for (unsigned qpi : {1u, 3u, 8u})
      for (unsigned dim : {3u, 100u, 129u, 1024u}) {
        const unsigned dp = UDF_IVF_V1_DIM_PADDED(dim, eb);
        EXPECT_EQ(dp % (16u / eb), 0u);
        EXPECT_GE(dp, dim);
        const unsigned from_manifest = sm.at("constant").get<unsigned>() +
                                       qpi * (sm.at("per_query").get<unsigned>() + sm.at("per_query_dim_padded").get<unsigned>() * dp);
        EXPECT_EQ(from_manifest, UDF_IVF_SCAN_V1_SMEM_BYTES(qpi, s, dp)) << v.at("symbol");
      }
    combos.insert({elem, acc, order});
    max_k = std::max(max_k, static_cast<int>(kmax));
  }
  for (const char* ea : {"f32/f32", "f16/f32", "i8/i32", "i8/f32", "u8/i32", "u8/f32"})
    for (const char* order : {"min", "max"}) {
      const std::string s = ea;
      EXPECT_TRUE(combos.count({s.substr(0, s.find('/')), s.substr(s.find('/') + 1), order})) << ea << " " << order;
    }
  EXPECT_GE(max_k, 1024);
  EXPECT_EQ(pruned, combos) << "a prune variant for every (elem, acc, order)";

  std::set<std::string> merges;
  for (const json& k : m.at("kernels")) {
    EXPECT_EQ(k.at("role"), "merge");
    EXPECT_EQ(k.at("grid"), "n_queries");
    EXPECT_EQ(k.at("args_type"), "udf_ivf_merge_args_v1");
    const unsigned s = k.at("sort_capacity");
    EXPECT_EQ(k.at("dynamic_smem").at("constant"), UDF_IVF_MERGE_V1_SMEM_BYTES(s));
    EXPECT_EQ(k.at("symbol"), fmt::format("udf_ivf_merge_v1_{}_k{}", k.at("order").get<std::string>(), k.at("k_max").get<int>()));
    EXPECT_EQ(k.at("file"), fmt::format("merge_v1_{}.ltoir", k.at("order").get<std::string>()));
    if (k.at("k_max").get<int>() >= 1024) merges.insert(k.at("order"));
  }
  EXPECT_EQ(merges, (std::set<std::string>{"min", "max"}));
}

TEST(kernel_pack, LtoirMatchesManifest) {
  for (const json& f : manifest().at("files")) {
    const std::string& bytes = pack_file(f.at("path"));
    ASSERT_FALSE(bytes.empty()) << f.at("path");
    EXPECT_EQ(f.at("size").get<size_t>(), bytes.size()) << f.at("path");
    EXPECT_EQ(f.at("sha256"), udf::sha256_hex(bytes)) << f.at("path");
  }
}

// The ABI v2 variants: both shapes for every (elem, acc) pair, both orders and
// the same k as v1, in the v2 file, with the functions' types and the shared
// memory formulas of the header.
TEST(kernel_pack, ManifestDescribesTheV2Variants) {
  const json& m = manifest();
  std::set<std::tuple<std::string, std::string, std::string, std::string, unsigned>> v1, v2;
  std::set<std::string> symbols;
  for (const json& v : m.at("scan_variants")) {
    const std::string elem = v.at("elem"), acc = v.at("acc"), order = v.at("order");
    const unsigned kmax = v.at("k_max");
    if (v.contains("rows")) continue;  // ManifestDescribesTheRowsTwins
    if (!v.contains("abi")) {
      for (const char* shape : {"state", "vector"}) v1.insert({shape, elem, acc, order, kmax});
      continue;
    }
    EXPECT_EQ(v.at("abi"), UDF_ABI_METRIC_V2_ID);
    const std::string shape = v.at("shape");
    ASSERT_TRUE(shape == "state" || shape == "vector") << shape;
    EXPECT_EQ(v.at("symbol"), fmt::format("udf_ivf_scan_v2_{}_{}_{}_{}_k{}", shape, elem, acc, order, kmax));
    EXPECT_TRUE(symbols.insert(v.at("symbol")).second) << "duplicate " << v.at("symbol");
    EXPECT_EQ(v.at("file"), fmt::format("scan_v2_{}_{}_{}_{}.ltoir", shape, elem, acc, order));
    ASSERT_NE(file_entry(v.at("file")), nullptr);
    EXPECT_EQ(file_entry(v.at("file"))->value("contents", ""), "metric_v2");
    EXPECT_FALSE(v.contains("metric_type"));
    EXPECT_EQ(v.at("filter_type"), "udf_filter_v1_fn");
    EXPECT_EQ(v.at("args_type"), "udf_ivf_scan_args_v1");
    EXPECT_EQ(v.at("block_threads"), UDF_IVF_V1_BLOCK_THREADS);
    const unsigned eb = v.at("elem_bytes");
    EXPECT_EQ(v.at("veclen"), 16u / eb);
    const unsigned s = v.at("sort_capacity");
    EXPECT_EQ(s, UDF_IVF_V1_SORT_CAPACITY(kmax));
    const json& sm = v.at("dynamic_smem");
    if (shape == "state") {
      EXPECT_EQ(v.at("update_type"), "udf_update_v2_" + acc + "_fn");
      EXPECT_EQ(v.at("finalize_type"), "udf_finalize_v2_fn");
      EXPECT_FALSE(v.contains("distance_type"));
      EXPECT_FALSE(sm.contains("per_staged_row_word"));
    } else {
      EXPECT_EQ(v.at("distance_type"), "udf_distance_v2_" + acc + "_fn");
      EXPECT_FALSE(v.contains("update_type"));
      EXPECT_FALSE(v.contains("finalize_type"));
      EXPECT_TRUE(sm.contains("per_staged_row_word"));
    }
    EXPECT_EQ(sm.at("filtered_extra"), UDF_IVF_SCAN_V1_FILTER_SMEM_BYTES);
    for (unsigned qpi : {1u, 3u, 8u})
      for (unsigned dim : {3u, 100u, 129u, 1024u})
        for (unsigned rows : {1u, 2u, 32u}) {
          const unsigned dp = UDF_IVF_V1_DIM_PADDED(dim, eb);
          unsigned from_manifest = sm.at("constant").get<unsigned>() +
                                   qpi * (sm.at("per_query").get<unsigned>() + sm.at("per_query_dim_padded").get<unsigned>() * dp);
          if (shape == "state") {
            for (unsigned words : {1u, 5u, 8u})
              EXPECT_EQ(from_manifest + qpi * sm.at("per_query_state_word").get<unsigned>() * words,
                        UDF_IVF_SCAN_V2_STATE_SMEM_BYTES(qpi, s, dp, words))
                  << v.at("symbol") << " words " << words;
          } else {
            from_manifest += sm.at("per_staged_row_word").get<unsigned>() * rows * UDF_IVF_SCAN_V2_ROW_WORDS(dp);
            EXPECT_EQ(from_manifest, UDF_IVF_SCAN_V2_VECTOR_SMEM_BYTES(qpi, s, dp, rows))
                << v.at("symbol") << " dim " << dim << " rows " << rows;
          }
        }
    v2.insert({shape, elem, acc, order, kmax});
  }
  EXPECT_EQ(v2, v1) << "every v1 (elem, acc, order, k) has a state and a vector variant";
}

// 1.9: every plain scan variant (v1 and v2, not prune) has exactly one rows
// twin (ivf_flat_v1.h, ROWS LAYOUT): the same fields but its symbol
// (udf_ivf_rows_*), its file (rows_*) and rows = 1; no other variant says rows.
// 1.10: a v1 or state twin's dynamic_smem.constant is its row stage,
// UDF_IVF_SCAN_ROWS_STAGE_BYTES (a vector twin's stays the plain one's).
// 1.12: in a pack for compute_80 or newer, a v1 or state twin's
// dynamic_smem.copied_stage is its copied row stage,
// UDF_IVF_SCAN_ROWS_STAGE_COPIED_BYTES; a vector twin has none.  1.13: in a
// pack for an older arch, the v1 and state twins name their family's file
// for the copy arch in arch_files, and have copied_stage with it (without
// copy files, neither).  1.14: the v1 f32 twins with copied_stage have
// tile_queries UDF_IVF_SCAN_ROWS_TILE_QUERIES (TILED FOLD); no other does.
TEST(kernel_pack, ManifestDescribesTheRowsTwins) {
  const json& m = manifest();
  std::map<std::string, json> plain, twins;
  for (const json& v : m.at("scan_variants")) {
    const std::string sym = v.at("symbol");
    if (v.contains("rows")) {
      EXPECT_EQ(v.at("rows"), 1) << sym;
      EXPECT_EQ(sym.rfind("udf_ivf_rows_", 0), 0u) << sym;
      EXPECT_EQ(v.at("file").get<std::string>().rfind("rows_", 0), 0u) << sym;
      EXPECT_TRUE(twins.emplace(sym, v).second) << "duplicate " << sym;
    } else if (!v.contains("prune")) {
      EXPECT_EQ(sym.rfind("udf_ivf_scan_", 0), 0u) << sym;
      plain.emplace(sym, v);
    }
  }
  ASSERT_EQ(twins.size(), plain.size());
  const bool copies = sm_of(kPackArch) >= 80 || kCopyFiles;
  for (const auto& [sym, v] : plain) {
    const std::string twin_sym = "udf_ivf_rows_" + sym.substr(std::string("udf_ivf_scan_").size());
    auto it = twins.find(twin_sym);
    ASSERT_NE(it, twins.end()) << "no rows twin for " << sym;
    json a = v, b = it->second;
    EXPECT_EQ(b.at("file"), "rows_" + v.at("file").get<std::string>().substr(5)) << sym;
    const bool vector = v.value("shape", "") == "vector";
    EXPECT_EQ(b.at("dynamic_smem").at("constant"), vector ? 0u : UDF_IVF_SCAN_ROWS_STAGE_BYTES) << sym;
    EXPECT_EQ(b.at("dynamic_smem").contains("copied_stage"), !vector && copies) << sym;
    if (!vector && copies) {
      EXPECT_EQ(b.at("dynamic_smem").at("copied_stage"), UDF_IVF_SCAN_ROWS_STAGE_COPIED_BYTES) << sym;
    }
    const bool tiles = copies && !v.contains("shape") && v.at("elem") == "f32";
    EXPECT_EQ(b.contains("tile_queries"), tiles) << sym;
    if (tiles) {
      EXPECT_EQ(b.at("tile_queries"), UDF_IVF_SCAN_ROWS_TILE_QUERIES) << sym;
    }
    b.erase("tile_queries");
    const std::string file = b.at("file");
    if (!vector && kCopyFiles)
      EXPECT_EQ(b.at("arch_files"), json::array({file.substr(0, file.size() - 6) + "." + kCopyArch + ".ltoir"})) << sym;
    else
      EXPECT_FALSE(b.contains("arch_files")) << sym;
    b["dynamic_smem"]["constant"] = a.at("dynamic_smem").at("constant");
    b["dynamic_smem"].erase("copied_stage");
    b.erase("arch_files");
    for (json* x : {&a, &b}) {
      x->erase("symbol");
      x->erase("file");
      x->erase("rows");
    }
    EXPECT_EQ(a, b) << sym;
  }
}

// The pack as udf-link reads it (parse_kernel_pack_manifest) and the schema's
// kernel pack fixtures: the good one parses, with its v2 variants' shapes;
// bad ones the reader also checks are rejected.
std::string fixture(const std::string& name) {
  return slurp(std::string(UDF_SOURCE_DIR) + "/schemas/tests/" + name);
}

// Everything load_kernel_pack gives (the files not read), field by field.
void expect_same_pack(const udf::KernelPack& a, const udf::KernelPack& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.dir, b.dir);
  EXPECT_EQ(a.manifest_sha256, b.manifest_sha256);
  EXPECT_EQ(a.metric_abi_id, b.metric_abi_id);
  EXPECT_EQ(a.metric_abi_version, b.metric_abi_version);
  EXPECT_EQ(a.filter_abi_id, b.filter_abi_id);
  EXPECT_EQ(a.filter_abi_version, b.filter_abi_version);
  EXPECT_EQ(a.metric_v2, b.metric_v2);
  ASSERT_EQ(a.files.size(), b.files.size());
  for (std::size_t i = 0; i < a.files.size(); ++i) {
    const auto &x = a.files[i], &y = b.files[i];
    EXPECT_EQ(std::tie(x.name, x.arch, x.metric_v2, x.size, x.sha256, x.read, x.present),
              std::tie(y.name, y.arch, y.metric_v2, y.size, y.sha256, y.read, y.present)) << x.name;
  }
  ASSERT_EQ(a.variants.size(), b.variants.size());
  for (std::size_t i = 0; i < a.variants.size(); ++i) {
    const auto &x = a.variants[i], &y = b.variants[i];
    EXPECT_EQ(std::tie(x.name, x.file, x.arch_files, x.shape, x.elem, x.acc, x.order, x.k_max, x.launch),
              std::tie(y.name, y.file, y.arch_files, y.shape, y.elem, y.acc, y.order, y.k_max, y.launch)) << x.name;
  }
  ASSERT_EQ(a.kernels.size(), b.kernels.size());
  for (std::size_t i = 0; i < a.kernels.size(); ++i) {
    const auto &x = a.kernels[i], &y = b.kernels[i];
    EXPECT_EQ(std::tie(x.name, x.file, x.order, x.launch), std::tie(y.name, y.file, y.order, y.launch)) << x.name;
  }
}

// The memo (load_kernel_pack with a cache): the first load parses the
// manifest and remembers it, the next reads it back -- the same pack as a
// parse gives -- and a manifest changed in place (same size, same inode, its
// modification time put back) is parsed again, never read from the memo.
// Suite kernel_pack_cache: `ctest -R cache` selects it too.
TEST(kernel_pack_cache, MemoReadsBackTheParsedManifestNeverAStaleOne) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("udf-pack-memo-{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir / "pack");
  auto memo = udf::Cache::open((dir / "cache").string());
  ASSERT_TRUE(static_cast<bool>(memo)) << memo.error().message();

  auto parsed = udf::load_kernel_pack(kPackDir, false);
  ASSERT_TRUE(static_cast<bool>(parsed)) << parsed.error().message();
  auto first = udf::load_kernel_pack(kPackDir, false, &*memo);
  ASSERT_TRUE(static_cast<bool>(first)) << first.error().message();
  EXPECT_EQ(memo->stats().puts, 1u) << "the built pack changed in the last " << udf::kSettleSeconds << " s?";
  auto second = udf::load_kernel_pack(kPackDir, false, &*memo);
  ASSERT_TRUE(static_cast<bool>(second)) << second.error().message();
  EXPECT_EQ(memo->stats().puts, 1u);
  EXPECT_EQ(memo->stats().hits, 1u) << "not read from the memo";
  expect_same_pack(*parsed, *first);
  expect_same_pack(*parsed, *second);

  // A copy of the manifest alone (its files absent: listed, not present).
  const std::string path = (dir / "pack" / udf::kKernelPackManifest).string();
  fs::copy_file(kPackDir + "/" + udf::kKernelPackManifest, path);
  auto copy = udf::load_kernel_pack((dir / "pack").string(), false, &*memo);
  ASSERT_TRUE(static_cast<bool>(copy)) << copy.error().message();
  EXPECT_EQ(memo->stats().puts, 1u) << "a file changed a moment ago is remembered";
  std::this_thread::sleep_for(std::chrono::milliseconds(udf::kSettleSeconds * 1000 + 100));
  ASSERT_TRUE(static_cast<bool>(udf::load_kernel_pack((dir / "pack").string(), false, &*memo)));
  EXPECT_EQ(memo->stats().puts, 2u);

  // Rewritten in place: the same size and inode, the old modification time.
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  std::string text = slurp(path);
  const std::string from = "\"name\": \"ivf_flat_v1\"", to = "\"name\": \"ivf_flat_vX\"";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), to);
  {
    std::fstream out(path, std::ios::in | std::ios::out | std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  ASSERT_EQ(std::tie(after.st_ino, after.st_size, after.st_mtim.tv_sec, after.st_mtim.tv_nsec),
            std::tie(before.st_ino, before.st_size, before.st_mtim.tv_sec, before.st_mtim.tv_nsec));
  std::this_thread::sleep_for(std::chrono::milliseconds(udf::kSettleSeconds * 1000 + 100));
  auto edited = udf::load_kernel_pack((dir / "pack").string(), false, &*memo);
  ASSERT_TRUE(static_cast<bool>(edited)) << edited.error().message();
  EXPECT_EQ(edited->name, "ivf_flat_vX") << "a stale memo was read";
  EXPECT_EQ(edited->manifest_sha256, udf::sha256_hex(text));
  fs::remove_all(dir);
}

TEST(kernel_pack, ReaderSeesTheV2Variants) {
  const std::string text = slurp(kPackDir + "/ivf_flat_v1.json");
  auto p = udf::parse_kernel_pack_manifest(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()), "pack.json");
  ASSERT_TRUE(static_cast<bool>(p)) << p.error().message();
  EXPECT_TRUE(p->pack.metric_v2);
  int state = 0, vector = 0, v1 = 0;
  int rows = 0;
  for (const auto& v : p->pack.variants) {
    if (v.launch.count("prune")) continue;  // 1.6: v1 only
    if (v.rows()) {  // 1.9: the rows twins, counted apart
      ++rows;
      continue;
    }
    if (!v.shape) ++v1;
    else if (*v.shape == udf::MetricShape::State) ++state;
    else ++vector;
  }
  EXPECT_GT(v1, 0);
  EXPECT_EQ(state, v1);
  EXPECT_EQ(vector, v1);
  EXPECT_EQ(rows, v1 + state + vector);
  // 1.13: the v1 and state rows families for the copy arch too (24 more, 12 of them v2).
  ASSERT_EQ(p->files.size(), kCopyFiles ? 98u : 74u);
  EXPECT_EQ(std::count_if(p->files.begin(), p->files.end(), [](const auto& f) { return f.metric_v2; }), kCopyFiles ? 60 : 48);

  const std::string good = fixture("kernel-pack-good-v2.json");
  auto g = udf::parse_kernel_pack_manifest(std::span(reinterpret_cast<const std::uint8_t*>(good.data()), good.size()), "good.json");
  ASSERT_TRUE(static_cast<bool>(g)) << g.error().message();
  ASSERT_EQ(g->pack.variants.size(), 3u);
  EXPECT_FALSE(g->pack.variants[0].shape);
  EXPECT_EQ(g->pack.variants[1].shape, udf::MetricShape::State);
  EXPECT_EQ(g->pack.variants[2].shape, udf::MetricShape::Vector);
  EXPECT_EQ(g->pack.variants[2].launch.at("smem_per_staged_row_word"), 16);
  for (const char* bad : {"kernel-pack-bad-v2-no-shape.json", "kernel-pack-bad-file-contents.json"}) {
    const std::string b = fixture(bad);
    EXPECT_FALSE(static_cast<bool>(
        udf::parse_kernel_pack_manifest(std::span(reinterpret_cast<const std::uint8_t*>(b.data()), b.size()), bad)))
        << bad;
  }
}

// 1.13: a variant's arch_files are listed files, each of its own arch and
// newer than its file's (a link picks among them by arch); anything else is
// refused, naming the variant and the file.
TEST(kernel_pack, ReaderChecksArchFiles) {
  json pack = json::parse(slurp(kPackDir + "/ivf_flat_v1.json"));
  auto parse = [](const json& j) {
    const std::string text = j.dump();
    return udf::parse_kernel_pack_manifest(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()), "pack.json");
  };
  json* rows = nullptr;
  for (json& v : pack["scan_variants"])
    if (v.contains("arch_files")) {
      rows = &v;
      break;
    }
  if (!rows) GTEST_SKIP() << "this build's pack has no arch_files (UDF_KERNEL_PACK_COPY_ARCH is empty or the pack is for compute_80 or newer)";
  const std::string sym = (*rows)["symbol"], file = (*rows)["file"], newer = (*rows)["arch_files"][0];
  {
    auto ok = parse(pack);
    ASSERT_TRUE(static_cast<bool>(ok)) << ok.error().message();
    const auto it = std::find_if(ok->pack.variants.begin(), ok->pack.variants.end(), [&](const auto& v) { return v.name == sym; });
    ASSERT_NE(it, ok->pack.variants.end());
    EXPECT_EQ(it->arch_files, std::vector<std::string>{newer});
  }
  auto refused = [&](const json& j, const std::string& what) {
    auto bad = parse(j);
    ASSERT_FALSE(static_cast<bool>(bad)) << what;
    const std::string& m = bad.error().message();
    EXPECT_NE(m.find(sym), std::string::npos) << m;
    EXPECT_NE(m.find(what), std::string::npos) << m;
    EXPECT_EQ(bad.error().diagnostics().front().code, udf::DiagCode::KernelPack);
  };
  // The pack with that variant's arch_files set to `value`.
  auto with_arch_files = [&](const json& value) {
    json j = pack;
    for (json& v : j["scan_variants"])
      if (v["symbol"] == sym) v["arch_files"] = value;
    return j;
  };
  refused(with_arch_files(json::array({"nosuch.ltoir"})), "its arch file 'nosuch.ltoir' is not one of the listed files");
  refused(with_arch_files(json::array({file})), "its arch file '" + file + "' is for " + kPackArch + ", which is not newer");
  refused(with_arch_files(newer), "arch_files must be a list of files");
}

// A pack's sort_capacity is what the modules linked from it carry, and what
// the runtime sizes shared memory with: the reader takes only a value a
// pack's rule gives the k_max (udf/artifact/module.h, sort_capacities_for),
// on scan variants and merge kernels alike.
TEST(kernel_pack, ReaderRefusesASortCapacityNoRuleGives) {
  const json pack = json::parse(slurp(kPackDir + "/ivf_flat_v1.json"));
  auto parse = [](const json& j) {
    const std::string text = j.dump();
    return udf::parse_kernel_pack_manifest(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()), "pack.json");
  };
  auto ok = parse(pack);
  ASSERT_TRUE(static_cast<bool>(ok)) << ok.error().message();
  for (const char* list : {"scan_variants", "kernels"}) {
    json j = pack;
    json& first = j[list][0];
    ASSERT_EQ(first["k_max"], 32) << list;
    first["sort_capacity"] = 256;  // the rule of packs before 1.8
    EXPECT_TRUE(static_cast<bool>(parse(j))) << list;
    first["sort_capacity"] = 300;
    auto bad = parse(j);
    ASSERT_FALSE(static_cast<bool>(bad)) << list;
    const std::string& m = bad.error().message();
    EXPECT_NE(m.find(first["symbol"].get<std::string>()), std::string::npos) << m;
    EXPECT_NE(m.find("sort_capacity 300 is not 128 or 256 (k_max 32)"), std::string::npos) << m;
    EXPECT_EQ(bad.error().diagnostics().front().code, udf::DiagCode::KernelPack);
  }
}

// --- Linking: the real check -------------------------------------------------

struct LinkCase {
  std::string variant;
  Udf udf;
  std::string arch;  // link target; the UDF and the wrapper are compiled for it too
  bool check_ptx;
};

void link_and_check(const LinkCase& c) {
  SCOPED_TRACE(c.variant + " " + c.arch);
  const std::string compute = "compute_" + c.arch.substr(3);
  const Compiled udf = nvrtc_ltoir(c.udf.source, "udf.cu", compute);
  const Compiled wrapper = nvrtc_ltoir(entry_source(c.variant, c.udf), "entry.cu", compute);
  ASSERT_FALSE(udf.ltoir.empty());
  ASSERT_FALSE(wrapper.ltoir.empty());
  EXPECT_EQ(wrapper.log, "");
  std::vector<std::pair<std::string, const std::string*>> inputs = pack_inputs(c.variant, "min", c.arch);
  inputs.insert(inputs.end(), {{"udf.ltoir", &udf.ltoir}, {"entry.ltoir", &wrapper.ltoir}});
  const std::string entry = entry_name(c.variant);

  const Linked cubin = jit_link(c.arch, inputs, false);
  ASSERT_TRUE(cubin.ok) << cubin.error_log;
  EXPECT_EQ(cubin.error_log, "");
  ASSERT_FALSE(cubin.image.empty());
  std::set<std::string> functions;
  const std::set<std::string> syms = cubin_symbols(cubin.image, &functions);
  EXPECT_TRUE(functions.count(entry)) << "entry kernel missing from the cubin";
  EXPECT_TRUE(functions.count("udf_ivf_merge_v1_min_k1024"));
  EXPECT_FALSE(syms.count(c.variant)) << "scan body not inlined";
  EXPECT_FALSE(syms.count(c.udf.metric)) << "UDF not inlined";
  if (!c.udf.finalize.empty()) {
    EXPECT_FALSE(syms.count(c.udf.finalize)) << "finalize not inlined";
  }
  for (const auto& f : functions) {
    // Allowed besides the kernels: CUDA's own math slow paths (e.g. sqrtf's).
    EXPECT_TRUE(f == entry || f.rfind("udf_ivf_merge_v1_", 0) == 0 || f.rfind("$__internal_", 0) == 0)
        << "unexpected function " << f;
  }
  std::printf("  [%s %s] cubin %zu bytes, link %.2f s\n", c.variant.c_str(), c.arch.c_str(), cubin.image.size(), cubin.seconds);

  if (c.check_ptx) {
    const Linked ptx = jit_link(c.arch, inputs, true);
    ASSERT_TRUE(ptx.ok) << ptx.error_log;
    EXPECT_EQ(ptx.error_log, "");
    EXPECT_NE(ptx.image.find(".entry " + entry), std::string::npos);
    static const std::regex call(R"((^|\s)call(\.uni)?\s)");
    EXPECT_FALSE(std::regex_search(ptx.image, call)) << "a call survived LTO";
    EXPECT_EQ(ptx.image.find(".extern .func"), std::string::npos);
    EXPECT_EQ(ptx.image.find(".func "), std::string::npos) << "a device function survived LTO";
    // The v1 and state rows twins copy rows with cp.async in their LTO-IR
    // for compute_80 or newer only (layout.cuh); nothing else does.
    const bool copies = c.variant.rfind("udf_ivf_rows_", 0) == 0 && c.variant.find("_vector_") == std::string::npos &&
                        file_arch(file_for(c.variant, c.arch)) >= 80;
    EXPECT_EQ(ptx.image.find("cp.async") != std::string::npos, copies) << file_for(c.variant, c.arch);
  }
}

TEST(kernel_pack, F32L2MinLinksInlinedSm90) { link_and_check({"udf_ivf_scan_v1_f32_f32_min_k32", l2_f32(), "sm_90", true}); }
TEST(kernel_pack, F16InnerProductMaxWithFinalizeLinksInlinedSm90) {
  link_and_check({"udf_ivf_scan_v1_f16_f32_max_k256", ip_sqrt_f32(), "sm_90", true});
}
TEST(kernel_pack, I8I32L2K1024LinksInlinedSm90) { link_and_check({"udf_ivf_scan_v1_i8_i32_min_k1024", l2_i32(), "sm_90", true}); }
TEST(kernel_pack, U8F32WeightedL2WithCaptureLinksInlinedSm90) {
  link_and_check({"udf_ivf_scan_v1_u8_f32_min_k128", weighted_l2_f32(), "sm_90", false});
}
// The rows twins (pack 1.9: exact search and refine) link the same way: the
// scan body and the UDF inlined, no call left.
TEST(kernel_pack, RowsF32L2LinksInlinedSm90) { link_and_check({"udf_ivf_rows_v1_f32_f32_min_k32", l2_f32(), "sm_90", true}); }
// For sm_75 the rows twins link from the pack's own files, which have no
// cp.async (above: with a compute_80 file for sm_90, they copy).
TEST(kernel_pack, RowsF32L2LinksInlinedSm75) {
  if (file_arch(file_of("udf_ivf_rows_v1_f32_f32_min_k32")) > 75) GTEST_SKIP() << "the pack is built for an arch newer than sm_75";
  link_and_check({"udf_ivf_rows_v1_f32_f32_min_k32", l2_f32(), "sm_75", true});
}
TEST(kernel_pack, RowsI8I32L2K1024LinksInlinedSm90) {
  link_and_check({"udf_ivf_rows_v1_i8_i32_min_k1024", l2_i32(), "sm_90", true});
}
TEST(kernel_pack, LinksIntoSm80) { link_and_check({"udf_ivf_scan_v1_f32_f32_min_k128", l2_f32(), "sm_80", false}); }
TEST(kernel_pack, LinksIntoSm100) { link_and_check({"udf_ivf_scan_v1_u8_i32_max_k32", l2_i32(), "sm_100", false}); }
TEST(kernel_pack, LinksIntoSm120) { link_and_check({"udf_ivf_scan_v1_i8_f32_min_k256", weighted_l2_f32(), "sm_120", false}); }

// --- ABI v2: state (update + finalize) and vector (distance) ---------------

struct UdfV2 {
  std::string shape;     // state or vector
  std::string source;    // compiled as udfc compiles a v2 artifact (its own module)
  std::string main;      // update (state) or distance (vector)
  std::string finalize;  // state only
  std::string acc_c;     // float or int32_t
};

// Pearson correlation distance: five running sums in the state.
UdfV2 pearson_state_f32() {
  return {"state", R"(#include <udf/abi/metric_v2.h>
extern "C" __device__ void udf_pearson(float x, float y, udf_state_v2 *s, const udf_ctx_v2 *ctx) {
  s->f[0] += x; s->f[1] += y; s->f[2] += x * x; s->f[3] += y * y; s->f[4] += x * y;
}
extern "C" __device__ float udf_pearson_fin(const udf_state_v2 *s, const udf_ctx_v2 *ctx) {
  float n = (float)ctx->n_dims;
  float cov = s->f[4] - s->f[0] * s->f[1] / n;
  float vx = s->f[2] - s->f[0] * s->f[0] / n, vy = s->f[3] - s->f[1] * s->f[1] / n;
  return 1.0f - cov * rsqrtf(vx * vy);
}
)", "udf_pearson", "udf_pearson_fin", "float"};
}

// An i32 state: mismatches and the largest stored coordinate, read through a capture.
UdfV2 mismatch_state_i32() {
  return {"state", R"(#include <udf/abi/metric_v2.h>
extern "C" __device__ void udf_mism(int32_t x, int32_t y, udf_state_v2 *s, const udf_ctx_v2 *ctx) {
  const int32_t *w = (const int32_t *)ctx->captures[0].ptr;
  s->i[0] += (x != y) * w[ctx->dim];
  if (x > s->i[1]) s->i[1] = x;
}
extern "C" __device__ float udf_mism_fin(const udf_state_v2 *s, const udf_ctx_v2 *ctx) { return (float)s->i[0] + 1e-3f * s->i[1]; }
)", "udf_mism", "udf_mism_fin", "int32_t"};
}

// 1-D earth mover's distance: a running prefix across the whole vectors.
UdfV2 emd_vector_f32() {
  return {"vector", R"(#include <udf/abi/metric_v2.h>
extern "C" __device__ float udf_emd(const float *x, const float *y, uint32_t n, const udf_ctx_v2 *ctx) {
  float carry = 0.0f, d = 0.0f;
  for (uint32_t i = 0; i < n; ++i) { carry += x[i] - y[i]; d += fabsf(carry); }
  return d + (float)(ctx->id & 1) * 0.0f + (float)ctx->query * 0.0f;
}
)", "udf_emd", "", "float"};
}

// Jensen-Shannon-like: normalise both vectors first (two passes), i32 accumulator.
UdfV2 js_vector_i32() {
  return {"vector", R"(#include <udf/abi/metric_v2.h>
extern "C" __device__ float udf_js(const int32_t *x, const int32_t *y, uint32_t n, const udf_ctx_v2 *ctx) {
  float sx = 0.0f, sy = 0.0f;
  for (uint32_t i = 0; i < n; ++i) { sx += (float)x[i]; sy += (float)y[i]; }
  float d = 0.0f;
  for (uint32_t i = 0; i < n; ++i) {
    float p = x[i] / sx, q = y[i] / sy, m = 0.5f * (p + q);
    if (p > 0.0f) d += p * __logf(p / m);
    if (q > 0.0f) d += q * __logf(q / m);
  }
  return 0.5f * d;
}
)", "udf_js", "", "int32_t"};
}

// A filter for the filtered v2 entry.
const char* kOddFilter = R"(#include <udf/abi/filter_v1.h>
extern "C" __device__ bool udf_odd(uint32_t query, int64_t id, const udf_ctx_v1 *ctx) { return id & 1; }
)";

std::string v2_entry_name(const std::string& variant) {
  return "udf_entry_v2_" + variant.substr(std::string("udf_ivf_scan_v2_").size());
}

// Exactly the wrapper udf-link generates for a v2 metric (lib/link/link.cpp).
std::string v2_entry_source(const std::string& variant, const UdfV2& udf, const std::string& filter = "") {
  std::string s = "#include <udf/kernels/ivf_flat_v1.h>\n";
  std::string fns;
  if (udf.shape == "state") {
    s += fmt::format("extern \"C\" __device__ void {1}({0}, {0}, udf_state_v2 *, const udf_ctx_v2 *);\n"
                     "extern \"C\" __device__ float {2}(const udf_state_v2 *, const udf_ctx_v2 *);\n",
                     udf.acc_c, udf.main, udf.finalize);
    fns = fmt::format("&{}, &{}", udf.main, udf.finalize);
  } else {
    s += fmt::format("extern \"C\" __device__ float {1}(const {0} *, const {0} *, uint32_t, const udf_ctx_v2 *);\n", udf.acc_c,
                     udf.main);
    fns = "&" + udf.main;
  }
  if (!filter.empty()) s += fmt::format("extern \"C\" __device__ bool {}(uint32_t, int64_t, const udf_ctx_v1 *);\n", filter);
  s += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}(udf_ivf_scan_args_v1 args) {{ {}(&args, {}, {}); }}\n",
                   UDF_IVF_V1_BLOCK_THREADS, v2_entry_name(variant), variant, fns, filter.empty() ? "nullptr" : "&" + filter);
  return s;
}

void link_v2_and_check(const std::string& variant, const UdfV2& udf, const std::string& arch, bool with_filter = false) {
  SCOPED_TRACE(variant + " " + arch);
  const std::string compute = "compute_" + arch.substr(3);
  const Compiled u = nvrtc_ltoir(udf.source, "udf.cu", compute);
  const Compiled f = with_filter ? nvrtc_ltoir(kOddFilter, "filter.cu", compute) : Compiled{};
  const Compiled w = nvrtc_ltoir(v2_entry_source(variant, udf, with_filter ? "udf_odd" : ""), "entry.cu", compute);
  ASSERT_FALSE(u.ltoir.empty());
  ASSERT_FALSE(w.ltoir.empty());
  EXPECT_EQ(u.log, "");
  EXPECT_EQ(w.log, "");
  // As udf-link links an entry: the pack file of its variant for the arch.
  const std::string file = file_for(variant, arch);
  std::vector<std::pair<std::string, const std::string*>> inputs = {
      {file, &pack_file(file)}, {"udf.ltoir", &u.ltoir}, {"entry.ltoir", &w.ltoir}};
  if (with_filter) inputs.push_back({"filter.ltoir", &f.ltoir});
  const std::string entry = v2_entry_name(variant);
  const std::vector<std::string> used = {"-kernels-used=" + entry};

  const Linked cubin = jit_link(arch, inputs, false, used);
  ASSERT_TRUE(cubin.ok) << cubin.error_log;
  EXPECT_EQ(cubin.error_log, "");
  std::set<std::string> functions;
  const std::set<std::string> syms = cubin_symbols(cubin.image, &functions);
  EXPECT_TRUE(functions.count(entry)) << "entry kernel missing from the cubin";
  EXPECT_FALSE(syms.count(variant)) << "scan body not inlined";
  EXPECT_FALSE(syms.count(udf.main)) << (udf.shape == "state" ? "update" : "distance") << " not inlined";
  if (!udf.finalize.empty()) {
    EXPECT_FALSE(syms.count(udf.finalize)) << "finalize not inlined";
  }
  if (with_filter) {
    EXPECT_FALSE(syms.count("udf_odd")) << "filter not inlined";
  }
  for (const auto& fn : functions)
    EXPECT_TRUE(fn == entry || fn.rfind("$__internal_", 0) == 0) << "unexpected function " << fn;
  std::printf("  [%s %s] cubin %zu bytes, link %.2f s\n", variant.c_str(), arch.c_str(), cubin.image.size(), cubin.seconds);

  const Linked ptx = jit_link(arch, inputs, true, used);
  ASSERT_TRUE(ptx.ok) << ptx.error_log;
  EXPECT_NE(ptx.image.find(".entry " + entry), std::string::npos);
  static const std::regex call(R"((^|\s)call(\.uni)?\s)");
  EXPECT_FALSE(std::regex_search(ptx.image, call)) << "a call survived LTO";
  EXPECT_EQ(ptx.image.find(".extern .func"), std::string::npos);
  EXPECT_EQ(ptx.image.find(".func "), std::string::npos) << "a device function survived LTO";
}

TEST(kernel_pack, V2StateF32PearsonLinksInlinedSm90) {
  link_v2_and_check("udf_ivf_scan_v2_state_f32_f32_min_k32", pearson_state_f32(), "sm_90");
}
TEST(kernel_pack, V2StateU8I32WithCaptureMaxK1024LinksInlinedSm90) {
  link_v2_and_check("udf_ivf_scan_v2_state_u8_i32_max_k1024", mismatch_state_i32(), "sm_90");
}
TEST(kernel_pack, V2VectorF16EmdLinksInlinedSm90) {
  link_v2_and_check("udf_ivf_scan_v2_vector_f16_f32_min_k128", emd_vector_f32(), "sm_90");
}
TEST(kernel_pack, V2VectorI8I32JensenShannonLinksInlinedSm80) {
  link_v2_and_check("udf_ivf_scan_v2_vector_i8_i32_min_k256", js_vector_i32(), "sm_80");
}
TEST(kernel_pack, V2StateWithFilterLinksInlinedSm90) {
  link_v2_and_check("udf_ivf_scan_v2_state_f32_f32_min_k32", pearson_state_f32(), "sm_90", /*with_filter=*/true);
}
TEST(kernel_pack, RowsV2StateWithFilterLinksInlinedSm90) {
  link_v2_and_check("udf_ivf_rows_v2_state_f32_f32_min_k32", pearson_state_f32(), "sm_90", /*with_filter=*/true);
}
TEST(kernel_pack, RowsV2VectorF16EmdLinksInlinedSm90) {
  link_v2_and_check("udf_ivf_rows_v2_vector_f16_f32_min_k128", emd_vector_f32(), "sm_90");
}
TEST(kernel_pack, V2VectorWithFilterLinksInlinedSm120) {
  link_v2_and_check("udf_ivf_scan_v2_vector_f32_f32_max_k32", emd_vector_f32(), "sm_120", /*with_filter=*/true);
}

// -kernels-used keeps one merge kernel: what udf-link passes to cut link time.
TEST(kernel_pack, KernelsUsedDropsOtherMergeKernels) {
  const Udf udf = l2_f32();
  const std::string variant = "udf_ivf_scan_v1_f32_f32_min_k32";
  const Compiled u = nvrtc_ltoir(udf.source, "udf.cu", "compute_90");
  const Compiled w = nvrtc_ltoir(entry_source(variant, udf), "entry.cu", "compute_90");
  std::vector<std::pair<std::string, const std::string*>> inputs = pack_inputs(variant, "min", "sm_90");
  inputs.insert(inputs.end(), {{"udf.ltoir", &u.ltoir}, {"entry.ltoir", &w.ltoir}});
  const Linked cubin = jit_link("sm_90", inputs,
                                false, {"-kernels-used=" + entry_name(variant), "-kernels-used=udf_ivf_merge_v1_min_k32"});
  ASSERT_TRUE(cubin.ok) << cubin.error_log;
  std::set<std::string> functions;
  cubin_symbols(cubin.image, &functions);
  EXPECT_EQ(functions, (std::set<std::string>{entry_name(variant), "udf_ivf_merge_v1_min_k32"}));
  std::printf("  [-kernels-used] cubin %zu bytes, link %.2f s\n", cubin.image.size(), cubin.seconds);
}

}  // namespace
