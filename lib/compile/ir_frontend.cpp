// The IR front ends' light half, linked into udfc: cache keys, the libNVVM
// version, and the loader of the heavy half.  libudf_frontend_ir.so holds the
// MLIR and LLVM IR front ends and links libLLVM and libMLIR, whose loading
// and static initializers are not free: udfc loads it with dlopen only when
// it compiles MLIR or LLVM IR, so a cache hit or a CUDA compile never pays.
#include <nvvm.h>

#include <filesystem>

#include <fmt/format.h>
#include <llvm/Config/llvm-config.h>  // LLVM_VERSION_STRING only: no LLVM library

#include "ir_internal.h"
#include "udf/support/cuda_libs.h"
#include "udf/support/dynlib.h"
#include "udf/support/install_layout.h"
#include "udf/support/hash.h"
#include "udf/support/version.h"

namespace udf {

std::string nvvm_version_string() {
  int major = 0, minor = 0;
  if (nvvmVersion(&major, &minor) != NVVM_SUCCESS) return "libnvvm unknown";
  return fmt::format("libnvvm {}.{}", major, minor);
}

std::string ir_cache_key(SourceKind kind, const IrSource& src, const UdfMetadata& meta, const std::string& nvvm_version) {
  Sha256Builder key;
  key.part(artifact_key_tag()).part(kUdfVersion).part(to_string(kind)).part(sha256_hex(src.bytes));
  key.part(std::filesystem::path(src.display_name).filename().string());
  if (kind == SourceKind::LtoIr) key.part("ltoir-check-v1");
  else key.part(nvvm_version.empty() ? nvvm_version_string() : nvvm_version).part("llvm " LLVM_VERSION_STRING);
  add_metadata_key_parts(key, meta);
  add_target_key_parts(key, meta);
  return key.finish_hex();
}

namespace {

// $UDF_FRONTEND_IR_LIBRARY alone when set (a wrong path is reported, as for
// the CUDA libraries), else next to udfc (the install layout's LIB folder, or
// BIN/../lib as in a build tree): an install tree works wherever it is moved.
std::vector<std::string> plugin_candidates() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("UDF_FRONTEND_IR_LIBRARY"); env && *env) return {env};
  for (const auto& dir : library_dirs_near_executable()) candidates.push_back(dir + "/libudf_frontend_ir.so");
  return candidates;
}

const DynamicLibrary& plugin() {
  static const DynamicLibrary lib = DynamicLibrary::open(
      plugin_candidates(), "udfc's MLIR/LLVM IR front end (libudf_frontend_ir.so)",
      "MLIR and LLVM IR inputs need it and the LLVM/MLIR 22 shared libraries it links (libLLVM.so.22.1, "
      "libMLIR.so.22.1), which the udf wheel does not ship: install them (Debian/Ubuntu: the libllvm22 and "
      "libmlir-22 packages of apt.llvm.org), or set UDF_FRONTEND_IR_LIBRARY to a plugin built against your "
      "LLVM 22. CUDA C++, Python (@udf.metric) and LTO-IR inputs need neither");
  return lib;
}

}  // namespace

std::vector<std::string> ir_frontend_dependencies() {
  std::vector<std::string> deps;
  // The plugin that compiles (found as plugin() will load it, without loading
  // it: a cache hit never needs it), then libdevice, which it links.
  for (const auto& c : plugin_candidates()) {
    std::error_code ec;
    if (c.find('/') != std::string::npos && std::filesystem::is_regular_file(c, ec)) {
      deps.push_back(c);
      break;
    }
  }
  if (auto ld = libdevice_path(/*load=*/false); !ld.empty()) deps.push_back(ld);
  return deps;
}

LibraryStatus ir_frontend_library_status() {
  LibraryStatus s{"udfc IR front end", plugin().loaded(), plugin().path(), {}, plugin().error(), {}};
  if (s.loaded) s.version = std::string("llvm ") + LLVM_VERSION_STRING;
  return s;
}

namespace {

Expected<CompileOutput> call_plugin(int kind, const IrSource& src, const UdfMetadata& meta) {
  auto fn = plugin().function<ir::PluginCompileFn>(ir::kPluginEntry);
  if (!fn) return Error(ErrorKind::Internal, DiagCode::LibraryMissing, plugin().error().empty() ? std::string("libudf_frontend_ir.so has no entry point ") + ir::kPluginEntry
                                                          : plugin().error());
  std::optional<Expected<CompileOutput>> out;
  fn(kind, &src, &meta, &out);
  if (!out) return internal_error("the IR front end returned nothing");
  return std::move(*out);
}

}  // namespace

Expected<CompileOutput> compile_llvm_ir(const IrSource& src, const UdfMetadata& meta) { return call_plugin(0, src, meta); }
Expected<CompileOutput> compile_mlir(const IrSource& src, const UdfMetadata& meta) { return call_plugin(1, src, meta); }

}  // namespace udf
