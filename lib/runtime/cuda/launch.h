// Kernel launches and their shared-memory checks.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include "cuda/runtime.h"

namespace udf::rt {

/// Checks that f can have `bytes` of dynamic shared memory on this device
/// (what(): what needs it, for the error) and opts in above 48 KB.  Once a
/// size passed for f, smaller ones return at once.
void prepare_smem_now(udf_runtime* rt, CUfunction f, size_t bytes, const std::string& what);
template <class F>
  requires std::is_invocable_r_v<std::string, F>
void prepare_smem(udf_runtime* rt, CUfunction f, size_t bytes, F&& what) {
  auto it = rt->smem_checked.find(f);
  if (it != rt->smem_checked.end() && bytes <= it->second) return;
  prepare_smem_now(rt, f, bytes, what());
}
/// Launches f on rt's stream: grid blocks of 128 threads (none when grid is 0).
void launch(udf_runtime* rt, CUfunction f, unsigned grid, size_t smem, void* args);
/// The general form: grid (x, y), `block` threads, on `stream`.
void launch_on(CUstream stream, CUfunction f, unsigned grid_x, unsigned grid_y, unsigned block, size_t smem, void* args);
/// Waits for everything queued on rt's stream.
void sync(udf_runtime* rt);
/// Milliseconds of a steady clock.
double now_ms();

}  // namespace udf::rt
