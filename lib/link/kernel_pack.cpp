#include "udf/link/kernel_pack.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "udf/artifact/module.h"
#include "udf/support/cache.h"
#include "udf/support/dynlib.h"
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

// Every access below checks the JSON type first: nlohmann's value() and get()
// throw (or convert a float to an integer, undefined when out of range) on a
// value of another type, and the manifest is input like any other.
const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::string string_or_empty(const json& obj, const char* key) {
  const json* v = member(obj, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

// A JSON integer that fits int64 (unsigned ones above INT64_MAX do not).
std::optional<std::int64_t> int64_of(const json* v) {
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) {
    auto u = v->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v->is_number_integer()) return v->get<std::int64_t>();
  return std::nullopt;
}

// Integer launch parameters of a variant or kernel, flattened:
// dynamic_smem.{constant,per_query,per_query_dim_padded} -> smem_*.
std::map<std::string, std::int64_t> launch_of(const json& v) {
  std::map<std::string, std::int64_t> l;
  for (const char* k : {"block_threads", "veclen", "elem_bytes", "sort_capacity", "recommended_queries_per_item", "k_max",
                        "tail_merge", "query_bound", "prune", "filtered_prune", "rows", "min_blocks_per_sm", "filtered_min_blocks_per_sm",
                        "tile_queries"})
    if (auto i = int64_of(member(v, k))) l[k] = *i;
  if (const json* smem = member(v, "dynamic_smem"); smem && smem->is_object())
    for (auto it = smem->begin(); it != smem->end(); ++it)
      if (auto i = int64_of(&*it)) l["smem_" + it.key()] = *i;
  return l;
}

// The number after the last ".v" of an ABI id ("ivf_flat.metric.v1" -> 1); 0 when none.
int abi_version_of(const std::string& id) {
  auto v = id.rfind(".v");
  if (v == std::string::npos) return 0;
  int out = 0;
  const char* first = id.data() + v + 2;
  auto [p, ec] = std::from_chars(first, id.data() + id.size(), out);
  return ec == std::errc{} && p != first ? out : 0;
}

// The parsed manifest as bytes, for the memo cache (load_kernel_pack): a
// cache hit reads these instead of parsing 134 KB of JSON (about a third of
// udf-link's hit).  Integers are 8 bytes little-endian, strings their length
// and bytes, enums their names (read back with the parsers above, so that a
// bad value is refused, not cast).  The layout's version is in kPackMemo,
// and so is the set of launch fields launch_of() keeps: a memo written by a
// tool that dropped a field would hide it from this one.
constexpr std::string_view kPackMemo = "udf kernel pack manifest v3";

class MemoWriter {
 public:
  void num(std::int64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(static_cast<std::uint64_t>(v) >> (8 * i)));
  }
  void str(std::string_view v) {
    num(static_cast<std::int64_t>(v.size()));
    out_.append(v);
  }
  void launch(const std::map<std::string, std::int64_t>& l) {
    num(static_cast<std::int64_t>(l.size()));
    for (const auto& [k, v] : l) {
      str(k);
      num(v);
    }
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads what MemoWriter wrote; any short or bad field clears ok().
class MemoReader {
 public:
  explicit MemoReader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  bool done() const { return ok_ && pos_ == in_.size(); }
  std::int64_t num() {
    if (!ok_ || in_.size() - pos_ < 8) return fail(), 0;
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in_[pos_ + i])) << (8 * i);
    pos_ += 8;
    return static_cast<std::int64_t>(v);
  }
  // A count of items each at least `min_bytes` long (so that a bad count cannot ask for more than the input holds).
  std::size_t count(std::size_t min_bytes) {
    std::int64_t n = num();
    if (n < 0 || static_cast<std::uint64_t>(n) > (in_.size() - pos_) / min_bytes) return fail(), 0;
    return static_cast<std::size_t>(n);
  }
  std::string str() {
    std::size_t n = count(1);
    if (!ok_) return {};
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  template <class T>
  T parsed(std::optional<T> (*parse)(std::string_view)) {
    auto v = parse(str());
    if (!v) return fail(), T{};
    return *v;
  }
  int small_int() {
    std::int64_t v = num();
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) return fail(), 0;
    return static_cast<int>(v);
  }
  std::map<std::string, std::int64_t> launch() {
    std::map<std::string, std::int64_t> l;
    for (std::size_t n = count(16); ok_ && n > 0; --n) {
      std::string k = str();
      l[k] = num();
    }
    return l;
  }
  void fail() { ok_ = false; }

 private:
  std::string_view in_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

std::string encode_pack_memo(const KernelPackManifest& m) {
  const KernelPack& p = m.pack;
  MemoWriter w;
  w.str(p.name);
  w.str(p.manifest_sha256);
  w.str(p.metric_abi_id);
  w.num(p.metric_abi_version);
  w.str(p.filter_abi_id);
  w.num(p.filter_abi_version);
  w.num(p.metric_v2);
  w.num(static_cast<std::int64_t>(m.files.size()));
  for (const auto& f : m.files) {
    w.str(f.path);
    w.num(f.arch);
    w.num(static_cast<std::int64_t>(f.size));
    w.str(f.sha256);
    w.num(f.metric_v2);
  }
  w.num(static_cast<std::int64_t>(p.variants.size()));
  for (const auto& v : p.variants) {
    w.str(v.name);
    w.str(v.file);
    w.num(static_cast<std::int64_t>(v.arch_files.size()));
    for (const auto& f : v.arch_files) w.str(f);
    w.str(v.shape ? to_string(*v.shape) : std::string_view());
    w.str(to_string(v.elem));
    w.str(to_string(v.acc));
    w.str(to_string(v.order));
    w.num(v.k_max);
    w.launch(v.launch);
  }
  w.num(static_cast<std::int64_t>(p.kernels.size()));
  for (const auto& k : p.kernels) {
    w.str(k.name);
    w.str(k.file);
    w.str(k.order ? to_string(*k.order) : std::string_view());
    w.launch(k.launch);
  }
  return w.take();
}

std::optional<KernelPackManifest> decode_pack_memo(std::string_view bytes) {
  MemoReader r(bytes);
  KernelPackManifest m;
  KernelPack& p = m.pack;
  p.name = r.str();
  p.manifest_sha256 = r.str();
  p.metric_abi_id = r.str();
  p.metric_abi_version = r.small_int();
  p.filter_abi_id = r.str();
  p.filter_abi_version = r.small_int();
  p.metric_v2 = r.num() != 0;
  for (std::size_t n = r.count(48); r.ok() && n > 0; --n) {
    KernelPackFileEntry f;
    f.path = r.str();
    f.arch = r.small_int();
    f.size = static_cast<std::uint64_t>(r.num());
    f.sha256 = r.str();
    f.metric_v2 = r.num() != 0;
    m.files.push_back(std::move(f));
  }
  for (std::size_t n = r.count(72); r.ok() && n > 0; --n) {
    PackVariant v;
    v.name = r.str();
    v.file = r.str();
    for (std::size_t f = r.count(8); r.ok() && f > 0; --f) v.arch_files.push_back(r.str());
    if (std::string shape = r.str(); !shape.empty()) {
      v.shape = parse_metric_shape(shape);
      if (!v.shape) r.fail();
    }
    v.elem = r.parsed(&parse_elem_type);
    v.acc = r.parsed(&parse_acc_type);
    v.order = r.parsed(&parse_order);
    v.k_max = r.small_int();
    v.launch = r.launch();
    p.variants.push_back(std::move(v));
  }
  for (std::size_t n = r.count(32); r.ok() && n > 0; --n) {
    PackKernel k;
    k.name = r.str();
    k.file = r.str();
    if (std::string order = r.str(); !order.empty()) {
      k.order = parse_order(order);
      if (!k.order) r.fail();
    }
    k.launch = r.launch();
    p.kernels.push_back(std::move(k));
  }
  if (!r.done() || p.variants.empty() || m.files.empty()) return std::nullopt;
  return m;
}

}  // namespace

Expected<KernelPackManifest> parse_kernel_pack_manifest(std::span<const std::uint8_t> text, const std::string& path) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  auto bad = [&](const std::string& what) { return diagnosed(DiagCode::KernelPack, fmt::format("{}: bad kernel pack manifest: {}", path, what)); };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (string_or_empty(j, "kind") != "udf.kernel-pack") return bad("kind is not 'udf.kernel-pack'");
  const json* version = member(j, "version");
  if (!version || int64_of(member(*version, "major")) != 1) return bad("unsupported version (this tool reads 1.x)");
  KernelPackManifest out;
  KernelPack& p = out.pack;
  p.name = string_or_empty(j, "name");
  p.manifest_sha256 = sha256_hex(text);
  p.metric_abi_id = string_or_empty(j, "abi");
  p.metric_abi_version = abi_version_of(p.metric_abi_id);
  if (p.name.empty() || p.metric_abi_version <= 0) return bad("missing name or abi");
  if (const json* f = member(j, "filter_abi")) {
    p.filter_abi_id = f->is_string() ? f->get<std::string>() : std::string();
    p.filter_abi_version = abi_version_of(p.filter_abi_id);
    if (p.filter_abi_version <= 0) return bad("filter_abi must be an ABI id such as ivf_flat.filter.v1");
  }
  const json* files = member(j, "files");
  if (!files || !files->is_array() || files->empty()) return bad("no files");
  for (const auto& f : *files) {
    std::string rel = string_or_empty(f, "path");
    if (rel.empty() || rel == "." || rel == ".." || rel.find_first_of(std::string_view("/\0", 2)) != std::string::npos)
      return bad("file path must be a plain file name");
    auto arch = parse_arch(string_or_empty(f, "arch"));
    if (!arch) return bad("file " + rel + ": " + arch.error().message());
    const json* size = member(f, "size");
    auto sz = int64_of(size);
    if (!sz || *sz < 0) return bad("file " + rel + ": size must be a non-negative integer");
    const std::string contents = string_or_empty(f, "contents");
    if (member(f, "contents") && contents != "metric_v2") return bad("file " + rel + ": contents must be \"metric_v2\" (or absent)");
    out.files.push_back(KernelPackFileEntry{rel, *arch, static_cast<std::uint64_t>(*sz), string_or_empty(f, "sha256"),
                                            contents == "metric_v2"});
  }
  static const json kNone = json::array();
  const json* variants = member(j, "scan_variants");
  const json* kernels = member(j, "kernels");
  if ((variants && !variants->is_array()) || (kernels && !kernels->is_array()))
    return bad("scan_variants and kernels must be arrays");
  std::size_t i = 0;
  // Each variant and kernel names a listed file (pack 1.7 spreads them over
  // one file per family; before, every one named the same file).
  auto listed = [&](const std::string& file) {
    return std::any_of(out.files.begin(), out.files.end(), [&](const KernelPackFileEntry& f) { return f.path == file; });
  };
  for (const auto& v : variants ? *variants : kNone) {
    PackVariant pv;
    pv.name = string_or_empty(v, "symbol");
    pv.file = string_or_empty(v, "file");
    auto e = parse_elem_type(string_or_empty(v, "elem"));
    auto a = parse_acc_type(string_or_empty(v, "acc"));
    auto o = parse_order(string_or_empty(v, "order"));
    auto k = int64_of(member(v, "k_max"));
    if (pv.name.empty() || !e || !a || !o || !k || *k <= 0 || *k > std::numeric_limits<int>::max())
      return bad(fmt::format("bad scan variant {} ('{}'): it needs symbol, elem, acc, order and k_max >= 1", i, pv.name));
    if (!listed(pv.file))
      return bad(fmt::format("scan variant {} ('{}'): its file '{}' is not one of the listed files", i, pv.name, pv.file));
    if (const json* af = member(v, "arch_files")) {
      // Each of its own arch, newer than file's (the link picks by arch).
      auto arch_of = [&](const std::string& file) {
        return std::find_if(out.files.begin(), out.files.end(), [&](const KernelPackFileEntry& f) { return f.path == file; })->arch;
      };
      std::set<Arch> archs{arch_of(pv.file)};
      if (!af->is_array() || af->empty()) return bad(fmt::format("scan variant {} ('{}'): arch_files must be a list of files", i, pv.name));
      for (const auto& f : *af) {
        const std::string file = f.is_string() ? f.get<std::string>() : std::string();
        if (!listed(file))
          return bad(fmt::format("scan variant {} ('{}'): its arch file '{}' is not one of the listed files", i, pv.name, file));
        const Arch arch = arch_of(file);
        if (arch <= arch_of(pv.file) || !archs.insert(arch).second)
          return bad(fmt::format("scan variant {} ('{}'): its arch file '{}' is for {}, which is not newer than its file's "
                                 "or is another arch file's",
                                 i, pv.name, file, fmt::format("compute_{}", arch)));
        pv.arch_files.push_back(file);
      }
    }
    if (const json* ab = member(v, "abi")) {
      const std::string id = ab->is_string() ? ab->get<std::string>() : std::string();
      if (id == kMetricV2AbiId) {
        pv.shape = parse_metric_shape(string_or_empty(v, "shape"));
        if (!pv.shape) return bad(fmt::format("scan variant {} ('{}'): an {} variant needs shape state or vector", i, pv.name, id));
        p.metric_v2 = true;
      } else if (id != p.metric_abi_id) {
        return bad(fmt::format("scan variant {} ('{}'): unknown abi '{}'", i, pv.name, id));
      }
    }
    if (!pv.shape && member(v, "shape"))
      return bad(fmt::format("scan variant {} ('{}'): a shape belongs to {} variants only", i, pv.name, kMetricV2AbiId));
    pv.elem = *e;
    pv.acc = *a;
    pv.order = *o;
    pv.k_max = static_cast<int>(*k);
    pv.launch = launch_of(v);
    // The modules linked from it carry it (module.h, sort_capacities_for).
    if (auto problem = sort_capacity_problem(pv.launch))
      return bad(fmt::format("scan variant {} ('{}'): sort_capacity {}", i, pv.name, *problem));
    p.variants.push_back(std::move(pv));
    ++i;
  }
  for (const auto& k : kernels ? *kernels : kNone) {
    PackKernel pk{string_or_empty(k, "symbol"), string_or_empty(k, "file"), std::nullopt, launch_of(k)};
    if (pk.name.empty()) return bad("kernel without a symbol");
    if (!listed(pk.file)) return bad(fmt::format("kernel {}: its file '{}' is not one of the listed files", pk.name, pk.file));
    if (auto problem = sort_capacity_problem(pk.launch)) return bad(fmt::format("kernel {}: sort_capacity {}", pk.name, *problem));
    if (member(k, "order")) {
      pk.order = parse_order(string_or_empty(k, "order"));
      if (!pk.order) return bad("kernel " + pk.name + " has a bad order");
    }
    p.kernels.push_back(std::move(pk));
  }
  if (p.variants.empty()) return bad("no scan variants");
  return out;
}

Expected<KernelPack> load_kernel_pack(const std::string& dir, bool read_files, Cache* memo) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(dir) / kKernelPackManifest).string();
  auto read_and_parse = [&]() -> Expected<KernelPackManifest> {
    auto bytes = read_file(path, limits::kKernelPackManifest);
    if (!bytes && bytes.error().diagnostics().front().code == DiagCode::FileTooLarge) return std::move(bytes.error());
    if (!bytes)
      return Error(ErrorKind::Diagnosed, DiagCode::KernelPack, fmt::format("cannot load the kernel pack: {}", bytes.error().message()))
          .note("the pack is installed in share/udf/kernels next to the tools; --kernel-pack DIR or $UDF_KERNEL_PACK_DIR "
                "point elsewhere");
    return parse_kernel_pack_manifest(*bytes, path);
  };
  // The parsed manifest, remembered by the file's identity (file_identity:
  // device, inode, size, times) when the file did not change while it was
  // read: a cache hit then neither reads nor parses nor hashes it.
  std::optional<Expected<KernelPackManifest>> parsed;
  bool remembered_here = false;
  if (const std::string identity = memo ? file_identity(path) : std::string(); !identity.empty()) {
    const std::string remembered_bytes = remembered(*memo, kPackMemo, identity, [&](bool& keep) {
      parsed = read_and_parse();
      keep = *parsed && file_identity(path) == identity;
      return *parsed ? encode_pack_memo(**parsed) : std::string();
    });
    if (!parsed)
      if (auto m = decode_pack_memo(remembered_bytes)) {
        parsed = Expected<KernelPackManifest>(std::move(*m));
        remembered_here = true;
      }
  }
  if (!parsed) parsed = read_and_parse();  // no memo, or one that does not read back
  if (!*parsed) return std::move(parsed->error());
  KernelPackManifest manifest = parsed->take();
  KernelPack p = std::move(manifest.pack);
  p.dir = dir;
  p.remembered = remembered_here;
  for (const auto& f : manifest.files) {
    // A file may be left out of a pack folder (a slim copy, say for v1
    // metrics only): a link that needs it fails, naming it (plan_link).
    std::error_code ec;
    const bool present = fs::exists(fs::path(dir) / f.path, ec);
    p.files.push_back(KernelPack::File{f.path, f.arch, {}, f.metric_v2, f.size, f.sha256, false, present});
  }
  for (const auto& v : p.variants) {
    std::vector<std::string> files{v.file};
    files.insert(files.end(), v.arch_files.begin(), v.arch_files.end());
    for (const auto& f : files)
      if (v.shape && !pack_file(p, f)->metric_v2)
        return diagnosed(DiagCode::KernelPack, fmt::format("{}: bad kernel pack manifest: ABI v2 scan variant {} is in {}, a "
                                                           "file without \"contents\": \"metric_v2\"", path, v.name, f));
  }
  if (read_files) UDF_TRY_VOID(read_kernel_pack_files(p));
  return p;
}

Expected<void> read_kernel_pack_files(KernelPack& pack, const std::vector<std::string>* names) {
  namespace fs = std::filesystem;
  for (auto& f : pack.files) {
    if (f.read) continue;
    if (names ? std::find(names->begin(), names->end(), f.name) == names->end() : !f.present) continue;
    if (!f.present)
      return Error(ErrorKind::Diagnosed, DiagCode::KernelPack,
                   fmt::format("the kernel pack {}'s file {} is missing from {}", pack.name, f.name, pack.dir))
          .note("copy the whole share/udf/kernels folder");
    auto data = read_file((fs::path(pack.dir) / f.name).string(), limits::kLtoIr);
    if (!data) return std::move(data.error());
    if (data->size() != f.size || sha256_hex(*data) != f.sha256)
      return diagnosed(DiagCode::KernelPack,
                       fmt::format("{}: bad kernel pack manifest: {} does not match its size/sha256 in the manifest "
                                   "(corrupt or stale pack)", (fs::path(pack.dir) / kKernelPackManifest).string(), f.name));
    f.ltoir = std::move(*data);
    f.read = true;
  }
  return {};
}

const KernelPack::File* pack_file(const KernelPack& pack, const std::string& name) {
  for (const auto& f : pack.files)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace udf
