#include "udf/support/install_layout.h"

#include <dlfcn.h>

#include <filesystem>

#ifndef UDF_BIN_TO_LIB
#define UDF_BIN_TO_LIB "../lib"
#endif
#ifndef UDF_BIN_TO_DATA
#define UDF_BIN_TO_DATA "../share/udf"
#endif
#ifndef UDF_LIB_TO_DATA
#define UDF_LIB_TO_DATA "../share/udf"
#endif

namespace udf {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> join_unique(const std::string& base, std::initializer_list<const char*> rels) {
  std::vector<std::string> out;
  if (base.empty()) return out;
  for (const char* r : rels) {
    std::string p = (fs::path(base) / r).lexically_normal().string();
    if (!p.empty() && p.back() == '/') p.pop_back();
    bool seen = false;
    for (const auto& o : out) seen = seen || o == p;
    if (!seen) out.push_back(p);
  }
  return out;
}

}  // namespace

std::string executable_dir() {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::string shared_object_path(const void* address) {
  Dl_info info{};
  if (::dladdr(address, &info) == 0 || !info.dli_fname || !*info.dli_fname) return {};
  std::error_code ec;
  auto p = fs::canonical(info.dli_fname, ec);
  return ec ? std::string() : p.string();
}

std::string shared_object_dir(const void* address) {
  std::string p = shared_object_path(address);
  return p.empty() ? p : fs::path(p).parent_path().string();
}

std::vector<std::string> library_dirs_near_executable() {
  return join_unique(executable_dir(), {UDF_BIN_TO_LIB, "../lib"});
}

std::vector<std::string> data_dirs_near_executable() {
  return join_unique(executable_dir(), {UDF_BIN_TO_DATA, "../share/udf"});
}

std::vector<std::string> data_dirs_near_library(const std::string& lib_dir) {
  return join_unique(lib_dir, {UDF_LIB_TO_DATA, "../share/udf"});
}

}  // namespace udf
