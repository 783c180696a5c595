#include "cuda/index_kernels.h"

#include <string>

namespace udf::rt {

void IndexKernels::load(CUlibrary lib) {
  const CudaApi& c = cuda();
  static constexpr const char* kSymbols[] = {
#define UDF_IVF_INDEX_KERNEL(stage, name) "udf_ivf_index_v1_" #name,
#include "udf/kernels/ivf_index_v1_kernels.def"
#undef UDF_IVF_INDEX_KERNEL
  };
  for (std::size_t i = 0; i < kIndexKernelCount; ++i) {
    const char* n = kSymbols[i];
    CUkernel k = nullptr;
    cu_check(c.cuLibraryGetKernel(&k, lib, n), "cuLibraryGetKernel", std::string("index kernel ") + n);
    CUfunction f = nullptr;
    cu_check(c.cuKernelGetFunction(&f, k), "cuKernelGetFunction", std::string("index kernel ") + n);
    fn_[i] = f;
  }
}

}  // namespace udf::rt
