// The MLIR front end without code generation: parse (func, arith, math, scf,
// cf, llvm dialects), lower to the LLVM dialect, translate to LLVM IR, then
// the ABI checks udfc applies before libNVVM.  The metadata comes from the
// input's first line (`// udfc: FLAGS`).
#include "../../lib/compile/ir_internal.h"
#include "fuzz_util.h"
#include "ir_fuzz.h"

using namespace udf;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  IrSource src;
  src.bytes.assign(data, data + size);
  src.display_name = "fuzz.mlir";
  const UdfMetadata meta = fuzz::metadata_from_first_line(fuzz::as_text(data, size));
  auto symbol = ir::check_mlir_impl(src, meta);
  if (symbol) UDF_FUZZ_CHECK(!symbol->empty());
  else UDF_FUZZ_CHECK(!symbol.error().diagnostics().empty());
  return 0;
}
