// The runtime's own kernels (include/udf/kernels/ivf_index_v1_kernels.def):
// one handle per line of the table, looked up by name.
#pragma once

#include <cstddef>

#include "cuda/cuda_dl.h"

namespace udf::rt {

/// A kernel of the table: IndexKernel::convert, IndexKernel::sched_small, ...
enum class IndexKernel : int {
#define UDF_IVF_INDEX_KERNEL(stage, name) name,
#include "udf/kernels/ivf_index_v1_kernels.def"
#undef UDF_IVF_INDEX_KERNEL
};

/// How many kernels the table holds.
inline constexpr std::size_t kIndexKernelCount = 0
#define UDF_IVF_INDEX_KERNEL(stage, name) +1
#include "udf/kernels/ivf_index_v1_kernels.def"
#undef UDF_IVF_INDEX_KERNEL
    ;

/// Every kernel's function handle, by IndexKernel.
class IndexKernels {
 public:
  CUfunction operator[](IndexKernel k) const { return fn_[static_cast<std::size_t>(k)]; }
  /// Looks every kernel of the table up in `lib` (its symbol
  /// udf_ivf_index_v1_<name>), in table order.
  void load(CUlibrary lib);

 private:
  CUfunction fn_[kIndexKernelCount] = {};
};

}  // namespace udf::rt
