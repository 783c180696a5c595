// Text embedded into the library at build time.
#pragma once
namespace udf {
/// The contents of include/udf/abi/metric_v1.h, handed to NVRTC in memory.
const char* embedded_abi_header();
}
