#include "cuda/launch.h"

#include <algorithm>
#include <chrono>

namespace udf::rt {

void prepare_smem_now(udf_runtime* rt, CUfunction f, size_t bytes, const std::string& what) {
  int static_smem = 0;
  CU(cuFuncGetAttribute, &static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f);
  if (bytes + static_cast<size_t>(static_smem) > static_cast<size_t>(rt->max_smem_optin))
    fail(UDF_ERROR_UNSUPPORTED, what + " needs " + std::to_string(bytes + static_smem) +
                                    " bytes of shared memory per block; this GPU allows " +
                                    std::to_string(rt->max_smem_optin));
  // Static and dynamic together above 48 KB need the opt-in (the direct
  // selection's 1024-thread block has 18 KB of static shared memory).
  if (bytes + static_cast<size_t>(static_smem) > 48 * 1024)
    CU(cuFuncSetAttribute, f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(bytes));
  size_t& checked = rt->smem_checked[f];
  checked = std::max(checked, bytes);
}

void launch(udf_runtime* rt, CUfunction f, unsigned grid, size_t smem, void* args) {
  launch_on(rt->stream, f, grid, 1, 128, smem, args);
}

void launch_on(CUstream stream, CUfunction f, unsigned grid_x, unsigned grid_y, unsigned block, size_t smem, void* args) {
  if (grid_x == 0 || grid_y == 0) return;
  void* params[] = {args};
  CU(cuLaunchKernel, f, grid_x, grid_y, 1, block, 1, 1, static_cast<unsigned>(smem), stream, params, nullptr);
}

void sync(udf_runtime* rt) { CU(cuStreamSynchronize, rt->stream); }

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace udf::rt
