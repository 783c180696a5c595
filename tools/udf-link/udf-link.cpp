// udf-link: link UDF artifacts with the prebuilt IVF-Flat kernel pack into a
// module (fatbin + manifest).  A thin main: argv -> UdfLinkConfig -> run_udf_link.
#include "../common/tool_main.h"
#include "udf/driver/udf_link.h"

int main(int argc, char** argv) {
  return udf::tool::guarded_main("udf-link", [&] {
    udf::UdfLinkConfig cfg;
    udf::tool::ToolSpec spec{"udf-link", "udf-link: link UDF artifacts with the IVF-Flat kernel pack (nvJitLink -lto) into a module",
                             /*dependency_flags=*/true, [&] { return udf::udf_link_version_report(cfg.kernel_pack_dir); }};
    auto define = [&](CLI::App& app) {
      cfg = {};
      app.add_option("inputs", cfg.inputs, "UDF artifacts (.udfa) made by udfc: metrics and filters");
      app.add_option("--pair", cfg.pairs,
                     "link METRIC with FILTER (symbols), repeatable; without --pair every metric is linked with every filter "
                     "(each metric also keeps its unfiltered scans)")
          ->type_name("METRIC:FILTER")
          ->allow_extra_args(false);
      app.add_option("--max-k", cfg.max_k,
                     "link the scans for searches up to this k only (the k buckets up to the smallest >= K); default: "
                     "every bucket, up to the pack's largest (1024)")
          ->type_name("K");
      app.add_flag("--exact", cfg.exact,
                   "also link each metric's exact-search and refine entries (the scans over rows of a dataset: "
                   "udf_exact_search, udf_refine, udf-run --exact / --refine)");
      app.add_option("-j,--jobs", cfg.jobs, "links run at once (default: $UDF_LINK_JOBS, else the CPUs this process may use)")
          ->type_name("N");
      app.add_option("-o,--output", cfg.output, "module (.udfm), fatbin or cubin to write (atomically)");
      app.add_option("--arch", cfg.archs, "target arch, repeatable or comma-separated: sm_80,sm_90,...")
          ->type_name("ARCH[,ARCH...]")
          ->allow_extra_args(false);
      app.add_option("--emit", cfg.emit, "module (default: fatbin + manifest), fatbin, or cubin (one arch)");
      app.add_option("--kernel-pack", cfg.kernel_pack_dir,
                     "kernel pack folder (default: share/udf/kernels next to the tools, or $UDF_KERNEL_PACK_DIR)")
          ->type_name("DIR");
      app.add_flag("--dry-run", cfg.dry_run, "print the plan (inputs, nvJitLink and nvFatbin options) and link nothing");
      app.add_flag("--save-temps", cfg.save_temps, "also write each linked cubin: OUTPUT.ENTRY.sm_XX.cubin (a module), OUTPUT.sm_XX.cubin (--emit fatbin|cubin)");
      app.add_flag("--no-cache", cfg.no_cache, "neither read nor write the on-disk cache ($UDF_CACHE_DIR)");
      udf::tool::add_compile_limit_options(app, cfg.compile_timeout, cfg.compile_memory_limit);
      udf::tool::add_depfile_options(app, cfg.depfile);
    };
    return udf::tool::run_tool<udf::UdfLinkResult>(spec, argc, argv, define, nullptr, [&] {
      cfg.on_compile_limit = [](const udf::Error& e) { udf::tool::exit_with_error("udf-link", e); };
      return udf::run_udf_link(cfg);
    });
  });
}
