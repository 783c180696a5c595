// The value parsers of udfc's and udf-link's flags: --capture (parse_capture),
// --arch lists (parse_arch_lists), --initial (parse_initial), -D and the
// rest together (udfc_metadata).  The input is lines "FLAG VALUE" (--capture,
// --arch, --initial, -D, --elem, --acc, --order, --coarse-metric, --symbol,
// --finalize); every line is also given whole to each value parser.
// Accepted values render back (to_string) to text that parses to the same
// value.
#include <algorithm>
#include <cmath>

#include "fuzz_util.h"
#include "udfc_flags.h"
#include "udf/artifact/manifest.h"
#include "udf/driver/udfc.h"

using namespace udf;

namespace {

void each_parser(std::string_view text) {
  if (auto c = parse_capture(text)) {
    auto back = parse_capture(to_string(*c));
    UDF_FUZZ_CHECK(back && *back == *c);
  }
  if (auto a = parse_arch(text)) {
    const auto& all = supported_archs();
    UDF_FUZZ_CHECK(std::find(all.begin(), all.end(), *a) != all.end());
    UDF_FUZZ_CHECK(parse_arch(arch_name(*a)) && *parse_arch(arch_name(*a)) == *a);
  }
  for (AccType acc : {AccType::F32, AccType::I32}) {
    auto v = parse_initial(text, acc);
    if (!v) continue;
    UDF_FUZZ_CHECK(!std::isnan(v->value));
    if (acc == AccType::I32)
      UDF_FUZZ_CHECK(v->value == std::floor(v->value) && v->value >= -2147483648.0 && v->value <= 2147483647.0);
    auto back = parse_initial(to_string(*v, acc), acc);
    UDF_FUZZ_CHECK(back && *back == *v);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in = fuzz::as_text(data, size);
  UdfcConfig cfg;
  std::vector<std::string> arch_lists;
  std::size_t pos = 0;
  while (pos <= in.size()) {
    std::size_t nl = std::min(in.find('\n', pos), in.size());
    std::string_view line = in.substr(pos, nl - pos);
    pos = nl + 1;
    each_parser(line);
    std::size_t sp = line.find(' ');
    std::string_view flag = line.substr(0, sp), value = sp == std::string_view::npos ? "" : line.substr(sp + 1);
    std::string v(value);
    if (flag == "-D") cfg.defines.push_back(v);
    else fuzz::set_metadata_flag(cfg, flag, v);
  }
  if (auto archs = parse_arch_lists(cfg.archs)) {
    UDF_FUZZ_CHECK(std::is_sorted(archs->begin(), archs->end()));
    UDF_FUZZ_CHECK(std::adjacent_find(archs->begin(), archs->end()) == archs->end());
  }
  auto meta = udfc_metadata(cfg);
  if (!meta) {
    UDF_FUZZ_CHECK(!meta.error().diagnostics().empty());
    return 0;
  }
  UDF_FUZZ_CHECK(validate(*meta));
  UDF_FUZZ_CHECK(meta->captures.size() == cfg.captures.size());
  return 0;
}
