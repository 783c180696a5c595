// Shared by the IR front-end fuzz targets: the UDF metadata comes from the
// input's first line, `; udfc: FLAGS` or `// udfc: FLAGS` as with
// udfc --flags-from-first-line (sm_90 when no --arch); without one, or when
// the flags are invalid, the defaults (f32, min, no captures, sm_90).
#pragma once

#include <string>
#include <string_view>

#include "udf/compile/metadata.h"
#include "udf/driver/udfc.h"
#include "udf/support/cmdline.h"
#include "udfc_flags.h"

namespace udf::fuzz {

inline UdfMetadata metadata_from_first_line(std::string_view text) {
  UdfMetadata defaults;
  defaults.archs = {90};
  std::string_view line = text.substr(0, text.find('\n'));
  auto at = line.find("udfc:");
  if (at == std::string_view::npos) return defaults;
  auto args = split_gnu_command_line(line.substr(at + 5), "first line");
  if (!args) return defaults;
  UdfcConfig cfg;
  for (std::size_t i = 0; i + 1 < args->size(); i += 2) {
    const std::string& flag = (*args)[i];
    const std::string& v = (*args)[i + 1];
    if (!set_metadata_flag(cfg, flag, v))
      --i;  // a flag without a value (or an unknown one): look at the next word as a flag
  }
  if (cfg.archs.empty()) cfg.archs.push_back("sm_90");
  auto meta = udfc_metadata(cfg);
  return meta ? *meta : defaults;
}

}  // namespace udf::fuzz
