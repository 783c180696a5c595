// What capi/link_api.cpp (the C API of run-time linking) takes from the
// rest of the C API: the on-demand module's construction (capi/module_api.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "module/link_session.h"
#include "udf/runtime.h"

namespace udf::rt {

/// Makes an on-demand module of `session` (its entries linked when searches
/// need them; prefetch_k's bucket started in the background now) and counts
/// it in rt.  capi/module_api.cpp.
udf_status load_on_demand(udf_runtime* rt, LinkSession session, const std::string& name, uint32_t prefetch_k,
                          udf_module** out);

}  // namespace udf::rt
