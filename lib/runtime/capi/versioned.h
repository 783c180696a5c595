// The C API's versioned structs (include/udf/runtime.h, "Versioned structs"):
// a leading size_t struct_size says how large the caller's struct is.  This
// file owns the rule for all of them: udf_X_init writes exactly struct_size
// bytes, a call reads exactly struct_size bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "cuda/runtime_error.h"
#include "udf/runtime.h"

namespace udf::rt {

/// Writes `defaults` (whose struct_size is ignored) into the caller's
/// `size` bytes at `out`: the fields they cover, zero beyond the library's
/// struct (fields a newer header added, whose zero means "as before"), and
/// struct_size = size.  A size that cannot hold struct_size writes nothing.
template <class T> void init_versioned(T* out, std::size_t size, const T& defaults) {
  if (!out || size < sizeof(std::size_t)) return;
  auto* bytes = reinterpret_cast<unsigned char*>(out);
  std::memcpy(bytes, &defaults, std::min(size, sizeof(T)));
  if (size > sizeof(T)) std::memset(bytes + sizeof(T), 0, size - sizeof(T));
  std::memcpy(bytes, &size, sizeof size);
}

/// Reads the caller's struct at `in` into a full T: the bytes its
/// struct_size covers over `defaults`.  Throws UDF_ERROR_INVALID_ARGUMENT
/// (naming `what`, e.g. "params") when struct_size is below `min_size` (the
/// struct was never filled by udf_X_default) or when it is above sizeof(T)
/// and the bytes this library does not know are not all zero (a newer
/// caller that uses a field added later).
template <class T>
T read_versioned(const T& in, const T& defaults, std::size_t min_size, const char* what, const char* type) {
  const std::size_t size = in.struct_size;
  if (size < min_size)
    fail(UDF_ERROR_INVALID_ARGUMENT, std::string(what) + "->struct_size = " + std::to_string(size) +
                                         " is smaller than any " + type + " (" + std::to_string(min_size) +
                                         " bytes): fill it with " + type + "_default()");
  if (size > sizeof(T)) {
    const auto* extra = reinterpret_cast<const unsigned char*>(&in) + sizeof(T);
    if (std::any_of(extra, extra + (size - sizeof(T)), [](unsigned char c) { return c != 0; }))
      fail(UDF_ERROR_INVALID_ARGUMENT,
           std::string(what) + " sets fields that this library does not know (struct_size " + std::to_string(size) +
               " > " + std::to_string(sizeof(T)) + ", runtime API " + std::to_string(UDF_RUNTIME_API_VERSION) +
               "): link with a newer libudf_runtime or leave them zero");
  }
  T out = defaults;
  std::memcpy(&out, &in, std::min(size, sizeof(T)));
  out.struct_size = sizeof(T);
  return out;
}

/// The first versions' sizes (through their last field then): a caller's
/// struct_size may not be smaller.  Fields added later leave these alone.
inline constexpr std::size_t kLinkOptionsMinSize = offsetof(udf_link_options, on_demand) + sizeof(int32_t);  // API 2
inline constexpr std::size_t kIndexParamsMinSize = offsetof(udf_index_params, progress_user) + sizeof(void*);  // API 3
inline constexpr std::size_t kSearchParamsMinSize =
    offsetof(udf_search_params, n_filter_captures) + sizeof(std::size_t);  // API 3

udf_index_params index_params_defaults();
udf_search_params search_params_defaults();
udf_link_options link_options_defaults();

}  // namespace udf::rt
