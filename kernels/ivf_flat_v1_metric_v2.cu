// IVF-Flat kernel pack v1: the ABI v2 (ivf_flat.metric.v2) scan variants.
// Compiled to LTO-IR for compute_75 once per pack file (pack_file.cuh): file
// scan_v2_<shape>_<elem>_<acc>_<order> holds that family's variants,
// rows_v2_<shape>_<elem>_<acc>_<order> their rows twins
// ("contents": "metric_v2" in the manifest).
#include "ivf_flat_scan.cuh"
#include "pack_file.cuh"

// ---------------------------------------------------------------------------
// Exported symbols.

#define UDF_UDF_TYPE_state(acc) udf_kernels::UdfState<UDF_ACC_##acc>
#define UDF_UDF_TYPE_vector(acc) udf_kernels::UdfVector<UDF_ACC_##acc>
#define UDF_UDF_state(acc) UDF_UDF_TYPE_state(acc){update, finalize}
#define UDF_UDF_vector(acc) UDF_UDF_TYPE_vector(acc){distance}
// name: udf_ivf_scan_v2_ (interleaved lists) or udf_ivf_rows_v2_ (the rows
// layout's twins, ivf_flat_v1.h).
#define UDF_IVF_SCAN_V2_DEFINE_ONE(name, layout, shape, elem, acc, order, kmax)                                    \
  extern "C" __device__ void name##shape##_##elem##_##acc##_##order##_k##kmax(                                    \
      const udf_ivf_scan_args_v1* args, UDF_IVF_SCAN_V2_FNS_##shape(acc), udf_filter_v1_fn filter) {              \
    udf_kernels::scan<UDF_ELEM_##elem, UDF_ACC_##acc, UDF_ISMAX_##order, kmax, UDF_UDF_TYPE_##shape(acc), false, \
                      udf_kernels::Layout::layout>(args, UDF_UDF_##shape(acc), filter);                            \
  }
#define UDF_IVF_SCAN_V2_DEFINE(shape, elem, acc, order, kmax) \
  UDF_PACK_WHEN(scan_v2_##shape##_##elem##_##acc##_##order,   \
                UDF_IVF_SCAN_V2_DEFINE_ONE(udf_ivf_scan_v2_, Lists, shape, elem, acc, order, kmax))
#define UDF_IVF_ROWS_V2_DEFINE(shape, elem, acc, order, kmax) \
  UDF_PACK_WHEN(rows_v2_##shape##_##elem##_##acc##_##order,   \
                UDF_IVF_SCAN_V2_DEFINE_ONE(udf_ivf_rows_v2_, Rows, shape, elem, acc, order, kmax))
UDF_IVF_SCAN_V2_FOR_EACH_VARIANT(UDF_IVF_SCAN_V2_DEFINE)
UDF_IVF_SCAN_V2_FOR_EACH_VARIANT(UDF_IVF_ROWS_V2_DEFINE)

