// Vocabulary shared by manifests, compilers and linkers: element and
// accumulator types, ordering, coarse metrics, captures and target archs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "udf/support/error.h"

namespace udf {

enum class ElemType { F32, F16, I8, U8 };
enum class AccType { F32, I32 };
enum class Order { Min, Max };
enum class CoarseMetric { L2, InnerProduct, Cosine };
enum class CaptureType { F32, F16, I32, U8 };
/// What a UDF is for: a metric (ivf_flat.metric.v1 or .v2) or a filter (ivf_flat.filter.v1).
enum class UdfKind { Metric, Filter };
/// The shape of an ABI v2 metric (include/udf/abi/metric_v2.h): a fold into an
/// 8-word state plus finalize, or one call per (query, vector) pair with both
/// vectors whole.  A v1 metric has no shape.
enum class MetricShape { State, Vector };

std::string_view to_string(ElemType t);
std::string_view to_string(AccType t);
std::string_view to_string(Order o);
std::string_view to_string(CoarseMetric m);
std::string_view to_string(CaptureType t);
std::string_view to_string(UdfKind k);
std::string_view to_string(MetricShape s);

std::optional<ElemType> parse_elem_type(std::string_view s);
std::optional<AccType> parse_acc_type(std::string_view s);
std::optional<Order> parse_order(std::string_view s);
std::optional<CoarseMetric> parse_coarse_metric(std::string_view s);
std::optional<CaptureType> parse_capture_type(std::string_view s);
std::optional<UdfKind> parse_udf_kind(std::string_view s);
std::optional<MetricShape> parse_metric_shape(std::string_view s);
/// The ABI id a UDF of this kind follows: "ivf_flat.metric.v1" / "ivf_flat.filter.v1".
std::string_view abi_id(UdfKind k);
/// ABI ivf_flat.metric.v2 (include/udf/abi/metric_v2.h): its id and version number.
inline constexpr const char* kMetricV2AbiId = "ivf_flat.metric.v2";
inline constexpr int kMetricV2AbiVersion = 2;
/// Words of an ABI v2 state (UDF_ABI_METRIC_V2_STATE_WORDS).
inline constexpr int kMetricV2StateWords = 8;

/// The accumulator types an element type may use; the first is the default.
std::vector<AccType> allowed_acc_types(ElemType e);
/// C spelling of the accumulator type in the ABI ("float", "int32_t").
std::string_view c_type(AccType a);

/// A named capture: a per-search value handed to the UDF through ctx.
struct Capture {
  std::string name;
  CaptureType type;
  bool array = false;  // NAME:TYPE[] (device array) vs NAME:TYPE (scalar)
  bool operator==(const Capture&) const = default;
};

/// Parses `NAME:TYPE` or `NAME:TYPE[]`.  Arrays may be f32, f16, i32, u8;
/// scalars f32 or i32.  NAME is a C identifier.
Expected<Capture> parse_capture(std::string_view spec);
std::string to_string(const Capture& c);  // back to NAME:TYPE[] form
/// C spelling of what the UDF sees: "const float *", "int32_t", ...
std::string c_type(const Capture& c);

/// A GPU architecture, as the number in sm_XX (90 for sm_90).
using Arch = int;
const std::vector<Arch>& supported_archs();
/// Parses "sm_90" (also "compute_90" and "90"); errors list the supported archs.
Expected<Arch> parse_arch(std::string_view s);
std::string arch_name(Arch a);  // "sm_90"
/// Parses --arch values, each one arch or a comma-separated list
/// ("sm_80,sm_90"): sorted, each arch once.  Every bad entry is reported
/// (usage errors).
Expected<std::vector<Arch>> parse_arch_lists(const std::vector<std::string>& lists);

bool is_c_identifier(std::string_view s);

}  // namespace udf
