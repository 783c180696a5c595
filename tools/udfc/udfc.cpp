// udfc: compile a user-defined GPU function into a UDF artifact.
// A thin main: command line -> UdfcConfig -> udf::run_udfc -> exit code.
#include "../common/tool_main.h"
#include "udf/driver/udfc.h"
#include "udf/support/version.h"

namespace {

int run(int argc, char** argv) {
  udf::UdfcConfig cfg;
  bool verbose = false;
  CLI::App app{"udfc: compile a user-defined GPU function (UDF ABI ivf_flat.metric.v1) into an artifact", "udfc"};
  app.set_version_flag("--version", std::string("udfc ") + udf::kUdfVersion);
  app.add_option("input", cfg.input, "UDF source: .cu/.cuh (CUDA C++), .mlir, .ll/.bc (LLVM IR), .ltoir (LTO-IR), or - for standard input");
  app.add_option("-e,--source-string", cfg.source_string, "compile SOURCE given on the command line");
  app.add_option("-o,--output", cfg.output, "artifact to write (atomically)");
  app.add_option("--arch", cfg.archs, "target arch, repeatable or comma-separated: sm_80,sm_90,...")
      ->type_name("ARCH[,ARCH...]")
      ->allow_extra_args(false);
  app.add_option("-I,--include-dir", cfg.include_dirs, "add a header search folder")
      ->type_name("DIR")
      ->allow_extra_args(false);
  app.add_option("-D,--define", cfg.defines, "define a macro: NAME or NAME=VALUE")
      ->type_name("MACRO")
      ->allow_extra_args(false);
  app.add_option("--symbol", cfg.symbol, "the metric function (default: the only extern \"C\" __device__ function)");
  app.add_option("--finalize", cfg.finalize, "function mapping the accumulator to the distance: float NAME(ACC, const udf_ctx_v1*)");
  app.add_option("--elem", cfg.elem, "element type: f32 (default), f16, i8, u8");
  app.add_option("--acc", cfg.acc, "accumulator type: f32 (f32/f16 elements), i32 (default for i8/u8) or f32");
  app.add_option("--order", cfg.order, "min (default: smaller is nearer) or max (larger is nearer)");
  app.add_option("--initial", cfg.initial, "initial accumulator: a number, inf or -inf (default 0)");
  app.add_option("--coarse-metric", cfg.coarse_metric, "metric for the coarse (centroid) probe: l2 (default), inner_product, cosine");
  app.add_option("--capture", cfg.captures, "declare a capture: NAME:TYPE[] (f32 f16 i32 u8 arrays) or NAME:TYPE (f32 i32)")
      ->type_name("NAME:TYPE")
      ->allow_extra_args(false);
  app.add_option("--input-kind", cfg.input_kind, "input kind when the extension does not tell: cuda, mlir, llvm, ltoir");
  app.add_option("--inspect", cfg.inspect, "print the manifest of an artifact (.udfa) or module (.udfm) as JSON and exit")->type_name("FILE");
  app.add_flag("--print-prelude", cfg.print_prelude, "print the header udfc includes before the UDF (ABI + capture accessors)");
  app.add_flag("--no-cache", cfg.no_cache, "neither read nor write the on-disk cache ($UDF_CACHE_DIR)");
  app.add_flag("-v,--verbose", verbose, "print the compiler's raw log and what was written");

  if (auto code = udf::tool::parse(app, "udfc", argc, argv)) return *code;
  return udf::tool::finish("udfc", udf::run_udfc(cfg), verbose);
}

}  // namespace

int main(int argc, char** argv) {
  return udf::tool::guarded_main("udfc", [&] { return run(argc, argv); });
}
