// CUDA's libraries (NVRTC, libNVVM, nvJitLink, nvFatbin, the driver, NCCL),
// loaded with dlopen on first use: start-up pays for none of them, and a
// missing one is a clear message when it is needed.  One mechanism for all:
//
// Each library has one X-macro table of the functions udf calls,
// X(name, (params), (args)) -- or X(name) where nothing forwards them -- whose
// types come from the library's own declarations (decltype(&::name)), so
// that they cannot drift from its real signatures.  From a table:
//
//   struct Api { UDF_DL_FUNCTIONS(TABLE) };   one pointer per function, and
//                                             resolve(), which fills them;
//   load_functions<Api>(library)              the loader: every function the
//                                             library has, and the first one of
//                                             the table it lacks;
//   UDF_DL_FORWARD(get, fallback, X...)       defines the C function `name`
//                                             itself, calling get().fn.name, or
//                                             returning `fallback` when the
//                                             library or the function is absent
//                                             (callers keep the library's own
//                                             C API).
//
// Where a library is found is udf/support/cuda_libs.h's business (the driver
// and NCCL by soname); the check of a call's result and the reading of its
// log are udf/cudalibs/check.h's.
#pragma once

#include <string>

#include "udf/support/dynlib.h"

// The name after macro expansion: cuda.h makes cuMemAlloc cuMemAlloc_v2 and
// nvJitLink.h makes nvJitLinkCreate __nvJitLinkCreate_13_0, the symbols the
// libraries export.
#define UDF_DL_STR_(x) #x
#define UDF_DL_STR(x) UDF_DL_STR_(x)

#define UDF_DL_MEMBER_(name, ...) decltype(&::name) name = nullptr;
#define UDF_DL_RESOLVE_(name, ...)                                \
  name = lib.function<decltype(&::name)>(UDF_DL_STR(name));       \
  if (!name && !missing) missing = UDF_DL_STR(name);

/// Inside a struct: one function pointer per entry of TABLE, and
/// `const char* resolve(lib)`, which looks every one up in `lib` and returns
/// the first the library lacks (nullptr when none).
#define UDF_DL_FUNCTIONS(TABLE)                                   \
  TABLE(UDF_DL_MEMBER_)                                           \
  const char* resolve(const ::udf::DynamicLibrary& lib) {         \
    const char* missing = nullptr;                                \
    TABLE(UDF_DL_RESOLVE_)                                        \
    return missing;                                               \
  }

/// Defines the library's C function `name` (declared by its header) as a call
/// through get().fn.name, or `fallback` when that is null.
#define UDF_DL_FORWARD(get, fallback, name, params, args)                 \
  extern "C" ::udf::dl_result_t<decltype(&::name)> name params {          \
    const auto f = get().fn.name;                                         \
    return f ? f args : fallback;                                         \
  }

namespace udf {

template <class F>
struct DlResult;
template <class R, class... A>
struct DlResult<R (*)(A...)> {
  using type = R;
};
template <class F>
using dl_result_t = typename DlResult<F>::type;

/// A library's table resolved: `fn` holds every function the library has
/// (null for the others and when it did not load).
template <class Api>
struct LoadedFunctions {
  const DynamicLibrary* library = nullptr;
  Api fn;
  std::string missing;  // the first function of the table the library lacks; empty when none

  bool loaded() const { return library->loaded(); }
  /// Loaded, with every function of the table.
  bool complete() const { return loaded() && missing.empty(); }
};

/// The loader: every function of Api's table looked up in `library`, which
/// must outlive the result.  Callers keep the result in a function-local
/// static, so that the library is loaded and resolved once, on first use.
template <class Api>
LoadedFunctions<Api> load_functions(const DynamicLibrary& library) {
  LoadedFunctions<Api> l;
  l.library = &library;
  if (!library.loaded()) return l;
  if (const char* m = l.fn.resolve(library)) l.missing = m;
  return l;
}

}  // namespace udf
