// IVF-Flat kernel pack v1: the ABI v1 scan variants (device functions,
// linked with each UDF by udf-link) and the UDF-independent merge kernels.
// Compiled to LTO-IR for compute_75 once per pack file (pack_file.cuh): file
// scan_v1_<elem>_<acc>_<order> holds that family's plain and prune variants,
// rows_v1_<elem>_<acc>_<order> their rows twins (exact search and refine),
// merge_v1_<order> that order's merges.
#include "ivf_flat_scan.cuh"
#include "pack_file.cuh"

// ---------------------------------------------------------------------------
// Exported symbols.

// name: udf_ivf_scan_v1_ for the plain variants, udf_ivf_scan_v1_prune_ for
// PRUNE's (the same scans for monotone metrics), udf_ivf_rows_v1_ for the
// rows layout's (ivf_flat_v1.h).
#define UDF_IVF_SCAN_V1_DEFINE_AS(name, prune, layout, elem, acc, order, kmax)                                 \
  extern "C" __device__ void name##elem##_##acc##_##order##_k##kmax(                                            \
      const udf_ivf_scan_args_v1* args, udf_metric_v1_##acc##_fn metric, udf_finalize_v1_##acc##_fn finalize,    \
      udf_filter_v1_fn filter) {                                                                                  \
    using Udf = udf_kernels::UdfV1<UDF_ACC_##acc>;                                                                \
    udf_kernels::scan<UDF_ELEM_##elem, UDF_ACC_##acc, UDF_ISMAX_##order, kmax, Udf, prune,                        \
                      udf_kernels::Layout::layout>(args, Udf{metric, finalize}, filter);                          \
  }
#define UDF_IVF_SCAN_V1_DEFINE(elem, acc, order, kmax) \
  UDF_PACK_WHEN(scan_v1_##elem##_##acc##_##order, UDF_IVF_SCAN_V1_DEFINE_AS(udf_ivf_scan_v1_, false, Lists, elem, acc, order, kmax))
#define UDF_IVF_SCAN_V1_PRUNE_DEFINE(elem, acc, order, kmax)                      \
  UDF_PACK_WHEN(scan_v1_##elem##_##acc##_##order,                                 \
                UDF_IVF_SCAN_V1_DEFINE_AS(udf_ivf_scan_v1_prune_, true, Lists, elem, acc, order, kmax))
#define UDF_IVF_ROWS_V1_DEFINE(elem, acc, order, kmax) \
  UDF_PACK_WHEN(rows_v1_##elem##_##acc##_##order, UDF_IVF_SCAN_V1_DEFINE_AS(udf_ivf_rows_v1_, false, Rows, elem, acc, order, kmax))
UDF_IVF_SCAN_V1_FOR_EACH_VARIANT(UDF_IVF_SCAN_V1_DEFINE)
UDF_IVF_SCAN_V1_PRUNE_FOR_EACH_VARIANT(UDF_IVF_SCAN_V1_PRUNE_DEFINE)
UDF_IVF_SCAN_V1_FOR_EACH_VARIANT(UDF_IVF_ROWS_V1_DEFINE)

#define UDF_IVF_MERGE_V1_DEFINE_ONE(order, kmax)                                                                    \
  extern "C" __global__ void __launch_bounds__(UDF_IVF_V1_BLOCK_THREADS) udf_ivf_merge_v1_##order##_k##kmax( \
      udf_ivf_merge_args_v1 args) {                                                                               \
    udf_kernels::merge<UDF_ISMAX_##order, kmax>(args);                                                            \
  }
#define UDF_IVF_MERGE_V1_DEFINE(order, kmax) UDF_PACK_WHEN(merge_v1_##order, UDF_IVF_MERGE_V1_DEFINE_ONE(order, kmax))
UDF_IVF_MERGE_V1_FOR_EACH_KERNEL(UDF_IVF_MERGE_V1_DEFINE)
