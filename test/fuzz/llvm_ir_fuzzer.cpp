// The LLVM IR front end without code generation: parse, verify, then the ABI
// checks udfc applies before libNVVM (target, symbol and signature, every
// read of ctx against the declared captures).  The metadata comes from the
// input's first line (`; udfc: FLAGS`).
//
// Bitcode inputs are skipped unless UDF_FUZZ_BITCODE=1: LLVM's bitcode
// reader is not robust against malformed bitcode (it aborts with "LLVM
// ERROR: out of memory" and leaks on some inputs: upstream/llvm_ir/), which
// would stop every run within a minute.  .ll text goes through LLVM's
// LLParser, which reports errors.
#include <cstdlib>

#include "../../lib/compile/ir_internal.h"
#include "fuzz_util.h"
#include "ir_fuzz.h"

using namespace udf;

namespace {

bool is_bitcode(const std::uint8_t* d, std::size_t n) {
  return n >= 4 && ((d[0] == 'B' && d[1] == 'C' && d[2] == 0xC0 && d[3] == 0xDE) ||
                    (d[0] == 0xDE && d[1] == 0xC0 && d[2] == 0x17 && d[3] == 0x0B));
}

const bool kFuzzBitcode = [] {
  const char* e = std::getenv("UDF_FUZZ_BITCODE");
  return e && *e == '1';
}();

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!kFuzzBitcode && is_bitcode(data, size)) return -1;  // -1: not added to the corpus
  IrSource src;
  src.bytes.assign(data, data + size);
  src.display_name = "fuzz.ll";
  const UdfMetadata meta = fuzz::metadata_from_first_line(fuzz::as_text(data, size));
  auto symbol = ir::check_llvm_ir_impl(src, meta);
  if (symbol) UDF_FUZZ_CHECK(!symbol->empty());
  else UDF_FUZZ_CHECK(!symbol.error().diagnostics().empty());
  return 0;
}
