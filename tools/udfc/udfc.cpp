// udfc: compile a user-defined GPU function into a UDF artifact.
// A thin main: command line -> UdfcConfig -> udf::run_udfc -> exit code.
#include "../common/tool_main.h"
#include "udf/driver/udfc.h"

namespace {

void define_options(CLI::App& app, udf::UdfcConfig& cfg, bool& flags_from_first_line) {
  app.add_option("input", cfg.inputs,
                 "UDF source: .cu/.cuh (CUDA C++), .mlir, .ll/.bc (LLVM IR), .ltoir (LTO-IR; several, one per arch), or - for standard input")
      ->type_name("INPUT");
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
  app.add_option("--kind", cfg.kind, "what the UDF is: metric (default; ABI ivf_flat.metric.v1) or filter "
                                     "(ivf_flat.filter.v1: bool NAME(uint32_t query, int64_t id, const udf_ctx_v1*))");
  app.add_option("--symbol", cfg.symbol, "the metric or filter function (default: the only extern \"C\" __device__ function)");
  app.add_option("--finalize", cfg.finalize, "function mapping the accumulator to the distance: float NAME(ACC, const udf_ctx_v1*)");
  app.add_option("--abi", cfg.abi, "metric ABI: v1 (default; ACC f(x, y, acc, ctx)) or v2 (include/udf/abi/metric_v2.h: "
                                   "the state or the vector shape)");
  app.add_option("--shape", cfg.shape, "ABI v2 shape (implies --abi v2): state (void update(x, y, udf_state_v2*, ctx) + "
                                       "--finalize) or vector (float distance(const ACC *x, const ACC *y, n_dims, ctx)); "
                                       "default: from the symbol's signature");
  app.add_option("--elem", cfg.elem, "element type: f32 (default), f16, i8, u8");
  app.add_option("--acc", cfg.acc, "accumulator type: f32 (f32/f16 elements), i32 (default for i8/u8) or f32");
  app.add_option("--order", cfg.order, "min (default: smaller is nearer) or max (larger is nearer)");
  app.add_option("--initial", cfg.initial, "initial accumulator: a number, inf or -inf (default 0); ABI v2 state: up to 8 comma-separated values, the state's first words");
  app.add_option("--coarse-metric", cfg.coarse_metric, "metric for the coarse (centroid) probe: l2 (default), inner_product, cosine");
  app.add_option("--coarse-weights", cfg.coarse_weights,
                 "the f32 array capture (one weight a dimension) that index builds use as coarse weights: k-means and "
                 "the coarse probe work on the rows scaled by sqrt(w), where a weighted metric's queries find their lists")
      ->type_name("CAPTURE");
  app.add_flag("--monotone", cfg.monotone,
               "ABI v1 metrics: promise that the key only moves away from the best as coordinates fold (min order: "
               "metric(x, y, acc, ctx) >= acc for every input, max order: <= acc; finalize non-decreasing), so a scan "
               "may stop folding a vector once it is worse than the k-th best (same results, less work); declared for "
               "a metric that is not monotone (inner product, cosine, a negative weight) it gives wrong results");
  app.add_option("--capture", cfg.captures, "declare a capture: NAME:TYPE[] (f32 f16 i32 u8 arrays) or NAME:TYPE (f32 i32)")
      ->type_name("NAME:TYPE")
      ->allow_extra_args(false);
  app.add_option("--input-kind", cfg.input_kind, "input kind when the extension does not tell: cuda, mlir, llvm, ltoir");
  app.add_flag("--flags-from-first-line", flags_from_first_line,
               "also take the flags written in the input's first line: '// udfc: FLAGS' or '; udfc: FLAGS'");
  app.add_option("--inspect", cfg.inspect, "print the manifest of an artifact (.udfa) or module (.udfm) as JSON and exit")->type_name("FILE");
  app.add_flag("--print-prelude", cfg.print_prelude, "print the header udfc includes before the UDF (ABI + capture accessors)");
  app.add_flag("--no-cache", cfg.no_cache, "neither read nor write the on-disk cache ($UDF_CACHE_DIR)");
  udf::tool::add_compile_limit_options(app, cfg.compile_timeout, cfg.compile_memory_limit);
  udf::tool::add_depfile_options(app, cfg.depfile);
}

}  // namespace

int main(int argc, char** argv) {
  return udf::tool::guarded_main("udfc", [&] {
    udf::tool::ToolSpec spec{"udfc", "udfc: compile a user-defined GPU function (UDF ABI ivf_flat.metric.v1) into an artifact",
                             /*dependency_flags=*/true, [] { return udf::udfc_version_report(); }};
    udf::UdfcConfig cfg;
    bool flags_from_first_line = false;
    auto define = [&](CLI::App& app) {
      cfg = {};
      flags_from_first_line = false;
      define_options(app, cfg, flags_from_first_line);
    };
    // --flags-from-first-line: the input's own flags join the command line's.
    auto more_args = [&]() -> udf::Expected<std::vector<std::string>> {
      if (!flags_from_first_line) return std::vector<std::string>{};
      if (cfg.inputs.size() != 1) return udf::usage_error("--flags-from-first-line needs one input file");
      return udf::udfc_first_line_flags(cfg.inputs.front());
    };
    return udf::tool::run_tool<udf::UdfcResult>(spec, argc, argv, define, more_args, [&] {
      cfg.on_compile_limit = [](const udf::Error& e) { udf::tool::exit_with_error("udfc", e); };
      return udf::run_udfc(cfg);
    });
  });
}
