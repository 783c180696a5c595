// Headers embedded into the library at build time, handed to NVRTC in memory.
#pragma once
namespace udf {
/// include/udf/abi/metric_v1.h: the UDF ABI, as <udf/abi/metric_v1.h>.
const char* embedded_abi_header();
/// include/udf/abi/filter_v1.h: the filter ABI, as <udf/abi/filter_v1.h>.
const char* embedded_filter_abi_header();
/// include/udf/abi/metric_v2.h: metric ABI v2, as <udf/abi/metric_v2.h>.
const char* embedded_abi_v2_header();
/// include/udf/kernels/ivf_flat_v1.h: the kernel pack contract, as <udf/kernels/ivf_flat_v1.h>.
const char* embedded_kernel_header();
}  // namespace udf
