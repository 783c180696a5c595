#include "udf/support/dynlib.h"

#include <dlfcn.h>

namespace udf {

DynamicLibrary DynamicLibrary::open(const std::vector<std::string>& candidates, const std::string& what) {
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
  return lib;
}

void* DynamicLibrary::symbol(const char* name) const { return handle_ ? ::dlsym(handle_, name) : nullptr; }

}  // namespace udf
