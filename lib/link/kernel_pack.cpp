#include "udf/link/kernel_pack.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "udf/support/hash.h"
#include "udf/support/install_layout.h"

namespace udf {

using nlohmann::json;

std::string default_kernel_pack_dir() {
  if (const char* env = std::getenv("UDF_KERNEL_PACK_DIR"); env && *env) return env;
  // The configured install layout first, then the build tree's.
  auto dirs = data_dirs_near_executable();
  for (const auto& d : dirs) {
    std::error_code ec;
    if (std::filesystem::is_directory(std::filesystem::path(d) / "kernels", ec)) return d + "/kernels";
  }
  return dirs.empty() ? "share/udf/kernels" : dirs.front() + "/kernels";
}

namespace {

// Integer launch parameters of a variant or kernel, flattened:
// dynamic_smem.{constant,per_query,per_query_dim_padded} -> smem_*.
std::map<std::string, std::int64_t> launch_of(const json& v) {
  std::map<std::string, std::int64_t> l;
  for (const char* k : {"block_threads", "veclen", "elem_bytes", "sort_capacity", "recommended_queries_per_item", "k_max"})
    if (v.contains(k) && v[k].is_number_integer()) l[k] = v[k].get<std::int64_t>();
  if (v.contains("dynamic_smem") && v["dynamic_smem"].is_object())
    for (auto it = v["dynamic_smem"].begin(); it != v["dynamic_smem"].end(); ++it)
      if (it->is_number_integer()) l["smem_" + it.key()] = it->get<std::int64_t>();
  return l;
}

}  // namespace

Expected<KernelPack> load_kernel_pack(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(dir) / kKernelPackManifest).string();
  auto bytes = read_file(path);
  if (!bytes)
    return Error(ErrorKind::Diagnosed, DiagCode::KernelPack, fmt::format("cannot load the kernel pack: {}", bytes.error().message()))
        .note("the pack is installed in share/udf/kernels next to the tools; --kernel-pack DIR or $UDF_KERNEL_PACK_DIR "
              "point elsewhere");
  json j = json::parse(bytes->begin(), bytes->end(), nullptr, false);
  auto bad = [&](const std::string& what) { return diagnosed(DiagCode::KernelPack, fmt::format("{}: bad kernel pack manifest: {}", path, what)); };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (j.value("kind", "") != "udf.kernel-pack") return bad("kind is not 'udf.kernel-pack'");
  if (!j.contains("version") || j["version"].value("major", 0) != 1) return bad("unsupported version (this tool reads 1.x)");
  KernelPack p;
  p.dir = dir;
  p.name = j.value("name", "");
  p.manifest_sha256 = sha256_hex(*bytes);
  p.metric_abi_id = j.value("abi", "");
  if (auto v = p.metric_abi_id.rfind(".v"); v != std::string::npos) p.metric_abi_version = std::atoi(p.metric_abi_id.c_str() + v + 2);
  if (p.name.empty() || p.metric_abi_version <= 0) return bad("missing name or abi");
  if (!j.contains("files") || !j["files"].is_array() || j["files"].empty()) return bad("no files");
  for (const auto& f : j["files"]) {
    std::string rel = f.value("path", "");
    if (rel.empty() || rel.find('/') != std::string::npos) return bad("file path must be a plain file name");
    auto arch = parse_arch(f.value("arch", ""));
    if (!arch) return bad("file " + rel + ": " + arch.error().message());
    auto data = read_file((fs::path(dir) / rel).string());
    if (!data) return std::move(data.error());
    if (data->size() != f.value("size", std::uint64_t{0}) || sha256_hex(*data) != f.value("sha256", ""))
      return bad(fmt::format("{} does not match its size/sha256 in the manifest (corrupt or stale pack)", rel));
    p.files.push_back(KernelPack::File{(fs::path(dir) / rel).filename().string(), *arch, std::move(*data)});
  }
  for (const auto& v : j.value("scan_variants", json::array())) {
    PackVariant pv;
    pv.name = v.value("symbol", "");
    auto e = parse_elem_type(v.value("elem", ""));
    auto a = parse_acc_type(v.value("acc", ""));
    auto o = parse_order(v.value("order", ""));
    pv.k_max = v.value("k_max", 0);
    if (pv.name.empty() || !e || !a || !o || pv.k_max <= 0) return bad("bad scan variant " + v.dump());
    pv.elem = *e;
    pv.acc = *a;
    pv.order = *o;
    pv.launch = launch_of(v);
    p.variants.push_back(std::move(pv));
  }
  for (const auto& k : j.value("kernels", json::array())) {
    PackKernel pk{k.value("symbol", ""), std::nullopt, launch_of(k)};
    if (pk.name.empty()) return bad("kernel without a symbol");
    if (k.contains("order")) {
      pk.order = parse_order(k.value("order", ""));
      if (!pk.order) return bad("kernel " + pk.name + " has a bad order");
    }
    p.kernels.push_back(std::move(pk));
  }
  if (p.variants.empty()) return bad("no scan variants");
  return p;
}

}  // namespace udf
