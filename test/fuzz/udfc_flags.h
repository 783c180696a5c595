// udfc's metadata flags that take a value, as the fuzz targets read them from
// their inputs (cli_values: "FLAG VALUE" lines; the IR targets: the first
// line's `udfc: FLAGS`): one mapping from flag to UdfcConfig field.
#pragma once

#include <string>
#include <string_view>

#include "udf/driver/udfc.h"

namespace udf::fuzz {

/// Sets the field of `flag` (--capture, --arch, --initial, --kind, --elem, --acc,
/// --order, --coarse-metric, --symbol, --finalize) to `value`; false for any
/// other flag.
inline bool set_metadata_flag(UdfcConfig& cfg, std::string_view flag, const std::string& value) {
  if (flag == "--capture") cfg.captures.push_back(value);
  else if (flag == "--arch") cfg.archs.push_back(value);
  else if (flag == "--initial") cfg.initial = value;
  else if (flag == "--kind") cfg.kind = value;
  else if (flag == "--elem") cfg.elem = value;
  else if (flag == "--acc") cfg.acc = value;
  else if (flag == "--order") cfg.order = value;
  else if (flag == "--coarse-metric") cfg.coarse_metric = value;
  else if (flag == "--symbol") cfg.symbol = value;
  else if (flag == "--finalize") cfg.finalize = value;
  else return false;
  return true;
}

}  // namespace udf::fuzz
