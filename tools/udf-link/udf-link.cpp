// udf-link: link UDF artifacts with the prebuilt IVF-Flat kernel pack into a
// module (fatbin + manifest).  A thin main: argv -> UdfLinkConfig -> run_udf_link.
#include "../common/tool_main.h"
#include "udf/driver/udf_link.h"
#include "udf/support/version.h"

namespace {

int run(int argc, char** argv) {
  udf::UdfLinkConfig cfg;
  bool verbose = false;
  CLI::App app{"udf-link: link UDF artifacts with the IVF-Flat kernel pack (nvJitLink -lto) into a module", "udf-link"};
  app.add_option("inputs", cfg.inputs, "UDF artifacts (.udfa) made by udfc");
  app.add_option("-o,--output", cfg.output, "module (.udfm), fatbin or cubin to write (atomically)");
  app.add_option("--arch", cfg.archs, "target arch, repeatable or comma-separated: sm_80,sm_90,...")
      ->type_name("ARCH[,ARCH...]")
      ->allow_extra_args(false);
  app.add_option("--emit", cfg.emit, "module (default: fatbin + manifest), fatbin, or cubin (one arch)");
  app.add_option("--kernel-pack", cfg.kernel_pack_dir, "kernel pack folder (default: share/udf/kernels next to the tools, or $UDF_KERNEL_PACK_DIR)")
      ->type_name("DIR");
  app.add_flag("--dry-run", cfg.dry_run, "print the plan (inputs, nvJitLink and nvFatbin options) and link nothing");
  app.add_flag("--save-temps", cfg.save_temps, "also write the per-arch cubins as OUTPUT.sm_XX.cubin");
  app.add_flag("--no-cache", cfg.no_cache, "neither read nor write the on-disk cache ($UDF_CACHE_DIR)");
  app.add_flag("-v,--verbose", verbose, "print what was linked and where the time went");
  app.set_version_flag("--version", std::string("udf-link ") + udf::kUdfVersion);
  if (auto code = udf::tool::parse(app, "udf-link", argc, argv)) return *code;
  return udf::tool::finish("udf-link", udf::run_udf_link(cfg), verbose);
}

}  // namespace

int main(int argc, char** argv) {
  return udf::tool::guarded_main("udf-link", [&] { return run(argc, argv); });
}
