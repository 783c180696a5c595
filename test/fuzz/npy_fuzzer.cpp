// The .npy reader (parse_npy).  An accepted array holds exactly
// rows x cols elements, and serialize_npy / parse_npy gives it back.
#include "fuzz_util.h"
#include "udf/data/vector_files.h"

using namespace udf;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto m = parse_npy(std::span<const std::uint8_t>(data, size), "fuzz.npy");
  if (!m) return 0;
  UDF_FUZZ_CHECK(m->data.size() == m->bytes());
  auto back = parse_npy(serialize_npy(*m), "again.npy");
  UDF_FUZZ_CHECK(back);
  UDF_FUZZ_CHECK(back->dtype == m->dtype && back->rows == m->rows && back->cols == m->cols && back->one_d == m->one_d);
  UDF_FUZZ_CHECK(back->data == m->data);
  return 0;
}
