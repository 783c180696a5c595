// The MLIR front end without code generation: parse (func, arith, math, scf,
// cf, llvm dialects), lower to the LLVM dialect, translate to LLVM IR, then
// the ABI checks udfc applies before libNVVM.  The metadata comes from the
// input's first line (`// udfc: FLAGS`).
//
// One MLIR context serves 1000 inputs: making one with its dialects loaded
// takes longer than most inputs (about 4 ms under ASan), and a context only
// gathers uniqued types, attributes and names from the inputs it parses, so
// a crash reproduces from its input alone (scripts/fuzz.sh replays them so).
#include "../../lib/compile/ir_internal.h"
#include "fuzz_util.h"
#include "ir_fuzz.h"

using namespace udf;

namespace {
std::shared_ptr<mlir::MLIRContext> g_ctx;
int g_uses = 0;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!g_ctx || ++g_uses > 1000) {
    g_ctx.reset();
    g_ctx = ir::make_mlir_context();
    g_uses = 1;
  }
  IrSource src;
  src.bytes.assign(data, data + size);
  src.display_name = "fuzz.mlir";
  const UdfMetadata meta = fuzz::metadata_from_first_line(fuzz::as_text(data, size));
  auto symbol = ir::check_mlir_impl(src, meta, g_ctx.get());
  if (symbol) UDF_FUZZ_CHECK(!symbol->empty());
  else UDF_FUZZ_CHECK(!symbol.error().diagnostics().empty());
  return 0;
}
