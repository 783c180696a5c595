// For the C++ wrapper's GPU tests (udf/runtime.hpp): device 0's runtime and
// the built-in metrics' module (builtin.udfm in $UDF_TEST_MODULE_DIR, else
// the build's test modules), or the reason there are none.
#pragma once

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "udf/runtime.hpp"

inline std::string module_path() {
  if (const char* e = std::getenv("UDF_TEST_MODULE_DIR")) return std::string(e) + "/builtin.udfm";
  return std::string(UDF_TEST_BINARY_DIR) + "/modules/builtin.udfm";
}

struct Gpu {
  std::optional<udf::Runtime> rt;
  std::optional<udf::Module> mod;
  std::string reason;
  Gpu() {
    try {
      rt.emplace(0);
    } catch (const udf::RuntimeError& e) {
      reason = e.what();
      return;
    }
    if (!std::ifstream(module_path()).good()) {
      reason = "no test module " + module_path() + " (build runtime_test_modules)";
      return;
    }
    mod.emplace(udf::Module::load_file(*rt, module_path()));
  }
};

inline Gpu& gpu() {
  static Gpu g;
  return g;
}
