// The TEXMEX readers (parse_vecs): each input read as .fvecs (f32), .bvecs
// (u8) and .ivecs (i32).  An accepted file holds rows x cols elements of
// one dimension.
#include "fuzz_util.h"
#include "udf/data/vector_files.h"

using namespace udf;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  for (DType t : {DType::F32, DType::U8, DType::I32}) {
    auto m = parse_vecs(std::span<const std::uint8_t>(data, size), t, "fuzz.vecs");
    if (!m) continue;
    UDF_FUZZ_CHECK(m->dtype == t && m->rows >= 1 && m->cols >= 1);
    UDF_FUZZ_CHECK(m->data.size() == m->bytes());
    UDF_FUZZ_CHECK(m->rows * (4 + m->cols * dtype_size(t)) == size);
  }
  return 0;
}
