// udf-run: load a module, build or load an IVF-Flat index over a dataset
// file, search a query file, write neighbours and distances, and with --check
// print recall against an exhaustive search.  A thin main: argv ->
// UdfRunConfig -> run_udf_run; the progress bar is drawn here.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "../common/tool_main.h"
#include "udf/driver/udf_run.h"
#include "udf/support/version.h"

namespace {

// A bar redrawn in place when standard error is a terminal; otherwise a
// line at each new stage and every 25%, so logs stay short.
class ProgressBar {
 public:
  ProgressBar() : tty_(isatty(STDERR_FILENO) == 1), t0_(std::chrono::steady_clock::now()) {}
  ~ProgressBar() { finish(); }
  void update(double f, const char* stage) {
    f = f < 0 ? 0 : f > 1 ? 1 : f;
    std::string s = stage ? stage : "";
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (tty_) {
      int filled = static_cast<int>(f * 30 + 0.5);
      std::fprintf(stderr, "\rudf-run: building index [%s%s] %3d%% %-8s %6.1fs", std::string(filled, '#').c_str(),
                   std::string(30 - filled, ' ').c_str(), static_cast<int>(f * 100 + 0.5), s.c_str(), secs);
      std::fflush(stderr);
      drawn_ = true;
    } else if (s != stage_ || f >= next_) {
      std::fprintf(stderr, "udf-run: building index: %s %d%% (%.1fs)\n", s.c_str(), static_cast<int>(f * 100 + 0.5), secs);
      next_ = s != stage_ ? 0.25 : next_ + 0.25;
      while (next_ <= f) next_ += 0.25;
    }
    stage_ = s;
  }
  void finish() {
    if (drawn_) std::fputc('\n', stderr);
    drawn_ = false;
  }

 private:
  bool tty_;
  bool drawn_ = false;
  std::string stage_;
  double next_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

int main(int argc, char** argv) {
  return udf::tool::guarded_main("udf-run", [&] {
    udf::UdfRunConfig cfg;
    bool quiet = false;
    udf::tool::ToolSpec spec{"udf-run", "udf-run: build or load an IVF-Flat index with a UDF metric, search it, and check the results",
                             /*dependency_flags=*/false, [] { return udf::udf_run_version_report(); }};
    auto define = [&](CLI::App& app) {
      cfg = {};
      quiet = false;
      app.add_option("module", cfg.module, "linked module (.udfm) made by udf-link")->required();
      app.add_option("--metric", cfg.metric, "the metric's symbol (default: the module's only metric)")->type_name("SYMBOL");
      app.add_option("--dataset", cfg.dataset, "vectors to index: .fvecs, .bvecs or .npy (2-D, C order)")->type_name("FILE");
      app.add_option("--queries", cfg.queries, "query vectors: .fvecs, .bvecs or .npy")->type_name("FILE")->required();
      app.add_option("--index", cfg.index, "index file (.udfi) for --save-index / --load-index")->type_name("FILE");
      app.add_flag("--save-index", cfg.save_index, "build the index, then write it to --index");
      app.add_flag("--load-index", cfg.load_index, "read the index from --index instead of building one");
      app.add_option("-k,--k", cfg.k, "neighbours per query (default 10)");
      app.add_option("--n-probes", cfg.n_probes, "lists probed per query (default 32)");
      app.add_option("--n-lists", cfg.n_lists, "lists of a new index (default 1024)");
      app.add_option("--kmeans-iters", cfg.kmeans_iters, "k-means iterations of a new index (default 20)");
      app.add_option("--kmeans-mesoclusters", cfg.kmeans_mesoclusters,
                     "k-means in two levels with this many mesoclusters, e.g. sqrt(n-lists) (default 0: every list over the whole sample)");
      app.add_option("--coarse-weights", cfg.coarse_weights,
                     "a new index's k-means and coarse probe over the rows scaled by sqrt(w): a 1-D f32 .npy of dim "
                     "weights w (pass a weighted metric's weights)")
          ->type_name("FILE.npy");
      app.add_option("--capture", cfg.captures, "bind a capture: NAME=FILE.npy (array) or NAME=VALUE (scalar); repeatable")
          ->type_name("NAME=FILE.npy|VALUE")
          ->allow_extra_args(false);
      app.add_option("--filter", cfg.filter, "search only the vectors this filter of the module keeps (ivf_flat.filter.v1)")
          ->type_name("NAME");
      app.add_option("--filter-capture", cfg.filter_captures,
                     "bind a capture of the filter: NAME=FILE.npy (array) or NAME=VALUE (scalar); repeatable")
          ->type_name("NAME=FILE.npy|VALUE")
          ->allow_extra_args(false);
      app.add_option("-o,--out", cfg.out, "write ids and distances: .npy (ids; distances in OUT.distances.npy) or .json")
          ->type_name("FILE");
      app.add_flag("--exact", cfg.exact,
                   "no index: score every row of --dataset for each query (udf_exact_search; the module needs udf-link "
                   "--exact's entries)");
      app.add_option("--refine", cfg.refine,
                     "no index: re-rank each query's candidates, an n_queries x m int64 .npy of --dataset's rows (-1 pads; "
                     "udf_refine); with --check, recall@k against the exact answer")
          ->type_name("FILE");
      app.add_flag("--check", cfg.check, "compare with an exhaustive search (every list probed) and print recall@k");
      app.add_option("--device", cfg.device, "CUDA device ordinal (default 0)")->type_name("N");
      app.add_option("--devices", cfg.devices,
                     "shard the index over these CUDA ordinals, comma-separated (repeats allowed: 0,0 is two shards on "
                     "device 0); the first is the home device; excludes --device")
          ->type_name("N,N,...")
          ->allow_extra_args(false);
      app.add_option("--shard-layout", cfg.shard_layout,
                     "with --devices, how the devices split the index: vectors (the default: each keeps an equal part "
                     "of every list) or lists (each keeps a contiguous range of whole lists)")
          ->type_name("lists|vectors");
      app.add_flag("-q,--quiet", quiet, "no progress output");
    };
    auto run = [&]() -> udf::Expected<udf::UdfRunResult> {
      cfg.progress = !quiet;
      ProgressBar bar;
      auto r = udf::run_udf_run(cfg, [&](double f, const char* stage) { bar.update(f, stage); });
      bar.finish();
      return r;
    };
    auto after = [&](const udf::UdfRunResult& r) {
      if (!quiet) std::fputs(r.summary.c_str(), stderr);
    };
    return udf::tool::run_tool<udf::UdfRunResult>(spec, argc, argv, define, nullptr, run, after);
  });
}
