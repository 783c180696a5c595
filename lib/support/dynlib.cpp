#include "udf/support/dynlib.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>

#include <fmt/format.h>

namespace udf {

std::string library_file_identity(const std::string& path) {
  struct stat st{};
  if (path.empty() || path[0] != '/' || ::stat(path.c_str(), &st) != 0) return {};
  char* real = ::realpath(path.c_str(), nullptr);
  std::string id = fmt::format("{} {} {}.{:09}", real ? real : path, static_cast<long long>(st.st_size),
                               static_cast<long long>(st.st_mtim.tv_sec), static_cast<long>(st.st_mtim.tv_nsec));
  std::free(real);
  return id;
}

DynamicLibrary DynamicLibrary::open(const std::vector<std::string>& candidates, const std::string& what,
                                    const std::string& hint) {
  DynamicLibrary lib;
  std::string tried;
  for (const auto& c : candidates) {
    if (c.empty()) continue;
    if (void* h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      lib.handle_ = h;
      lib.path_ = c;
      return lib;
    }
    const char* e = ::dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(e ? e : c.c_str());
  }
  lib.error_ = what + " could not be loaded: " + (tried.empty() ? "no candidate" : tried);
  if (!hint.empty()) lib.error_ += ". " + hint;
  return lib;
}

void* DynamicLibrary::symbol(const char* name) const { return handle_ ? ::dlsym(handle_, name) : nullptr; }

}  // namespace udf
