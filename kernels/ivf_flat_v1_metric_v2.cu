// IVF-Flat kernel pack v1: the ABI v2 (ivf_flat.metric.v2) scan variants.
// Compiled to LTO-IR for compute_75 once per pack file (pack_file.cuh): file
// scan_v2_<shape>_<elem>_<acc>_<order> holds that family's variants
// ("contents": "metric_v2" in the manifest).
#include "ivf_flat_scan.cuh"
#include "pack_file.cuh"

// ---------------------------------------------------------------------------
// Exported symbols.

#define UDF_UDF_state(acc) udf_kernels::UdfState<UDF_ACC_##acc>{update, finalize}
#define UDF_UDF_vector(acc) udf_kernels::UdfVector<UDF_ACC_##acc>{distance}
#define UDF_IVF_SCAN_V2_DEFINE_ONE(shape, elem, acc, order, kmax)                                                \
  extern "C" __device__ void udf_ivf_scan_v2_##shape##_##elem##_##acc##_##order##_k##kmax(                     \
      const udf_ivf_scan_args_v1* args, UDF_IVF_SCAN_V2_FNS_##shape(acc), udf_filter_v1_fn filter) {              \
    udf_kernels::scan<UDF_ELEM_##elem, UDF_ACC_##acc, UDF_ISMAX_##order, kmax>(args, UDF_UDF_##shape(acc), filter); \
  }
#define UDF_IVF_SCAN_V2_DEFINE(shape, elem, acc, order, kmax)                 \
  UDF_PACK_WHEN(scan_v2_##shape##_##elem##_##acc##_##order,                   \
                UDF_IVF_SCAN_V2_DEFINE_ONE(shape, elem, acc, order, kmax))
UDF_IVF_SCAN_V2_FOR_EACH_VARIANT(UDF_IVF_SCAN_V2_DEFINE)

