// Exact search benchmark (issue 50), native: udf_exact_search through the C API, no Python and
// no PyTorch (usage: kUsage).  bench/exact_bench.py runs the same searches beside PyTorch; this
// one is for A/B runs of kernel packs and runtimes on a bare GPU machine.
//
// The dataset is rows x dim standard normal f32, uploaded once (a device array, read in place);
// each metric's f32 array captures get 0.5 + 1.5 u, u uniform in [0, 1) (exact_bench.py's
// weights).  For each batch it draws reps + 2 query batches (device arrays) and times, for each
// module and metric, 2 warm-up calls and `reps` calls, each on its own batch, device outputs, the
// wall clock around the (synchronous) call.  Several modules (the same metrics linked from
// different kernel packs) are timed in turn, --rounds times over: an A/B in one process, on one
// dataset and one set of queries; and each module's results on the first batch (host outputs)
// must equal the first module's, bit for bit, or the bench fails.
//
// --refine M also times udf_refine of M random candidate rows a query (a device array, a new
// set for every batch) with each metric, compared across the modules the same way.
//
// It prints the median time, the queries a second and, for a metric given with its FP32
// operations a coordinate (--metrics weighted_l2:3), the share of the FP32 issue limit:
// batch x rows x dim x ops / (time x SMs x 128 lanes x the SM clock), the clock being the
// device's maximum (CU_DEVICE_ATTRIBUTE_CLOCK_RATE).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>

#include "udf/runtime.h"

namespace {

constexpr const char* kUsage =
    "usage: exact_search_bench MODULE[,MODULE...] [--rows N] [--dim D] [--batches B,...] [--k K] [--reps R]\n"
    "                          [--rounds N] [--metrics SYMBOL[:OPS],...] [--refine M]\n"
    "  MODULE: linked with udf-link --exact; several (comma-separated) are timed in turn and their results compared\n"
    "  --metrics: the metrics to time (default: every metric of the first module); OPS: FP32 operations a coordinate\n";

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "exact_search_bench: %s\n", what.c_str());
  std::exit(1);
}

void check(udf_status s, const std::string& call) {
  if (s != UDF_OK) fail(call + ": " + udf_last_error() + " (" + udf_status_name(s) + ")");
}

std::vector<std::string> split(const std::string& v, char sep = ',') {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= v.size()) {
    const size_t end = std::min(v.find(sep, at), v.size());
    if (end > at) out.push_back(v.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

uint64_t parse_count(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n == 0) fail(opt + " takes a whole number above 0, not '" + v + "'");
  return n;
}

struct MetricArg {
  std::string symbol;
  double ops = 0;  // FP32 operations a coordinate (0: no issue share)
};

struct Options {
  std::vector<std::string> modules;
  int64_t rows = 1000000, dim = 128;
  std::vector<uint32_t> batches{100, 10000};
  uint32_t k = 10, reps = 5, rounds = 1;
  uint32_t refine = 0;  // candidates a query for udf_refine (0: no refine rows)
  std::vector<MetricArg> metrics;
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--rows") {
      o.rows = static_cast<int64_t>(parse_count(a, value()));
    } else if (a == "--dim") {
      o.dim = static_cast<int64_t>(parse_count(a, value()));
    } else if (a == "--batches") {
      o.batches.clear();
      for (const std::string& b : split(value())) o.batches.push_back(static_cast<uint32_t>(parse_count(a, b)));
    } else if (a == "--k") {
      o.k = static_cast<uint32_t>(parse_count(a, value()));
    } else if (a == "--reps") {
      o.reps = static_cast<uint32_t>(parse_count(a, value()));
    } else if (a == "--refine") {
      o.refine = static_cast<uint32_t>(parse_count(a, value()));
    } else if (a == "--rounds") {
      o.rounds = static_cast<uint32_t>(parse_count(a, value()));
    } else if (a == "--metrics") {
      for (const std::string& m : split(value())) {
        const std::vector<std::string> parts = split(m, ':');
        if (parts.empty() || parts.size() > 2) fail("--metrics takes SYMBOL[:OPS], not '" + m + "'");
        MetricArg arg{parts[0]};
        if (parts.size() == 2) arg.ops = std::atof(parts[1].c_str());
        o.metrics.push_back(arg);
      }
    } else if (!a.empty() && a[0] == '-') {
      fail("unknown option " + a + "\n" + kUsage);
    } else if (o.modules.empty()) {
      o.modules = split(a);
    } else {
      fail("one MODULE argument (comma-separated for several)\n" + std::string(kUsage));
    }
  }
  if (o.modules.empty()) fail(std::string("no MODULE\n") + kUsage);
  return o;
}

// The device's SM clock at most, in Hz (the driver is loaded: udf_runtime_create did it).
double max_sm_clock_hz(int ordinal) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) fail(std::string("dlopen libcuda.so.1: ") + dlerror());
  auto get = reinterpret_cast<int (*)(int*, int)>(dlsym(lib, "cuDeviceGet"));
  auto attr = reinterpret_cast<int (*)(int*, int, int)>(dlsym(lib, "cuDeviceGetAttribute"));
  if (!get || !attr) fail("libcuda.so.1 lacks cuDeviceGet or cuDeviceGetAttribute");
  int dev = 0, khz = 0;
  constexpr int kClockRate = 13;  // CU_DEVICE_ATTRIBUTE_CLOCK_RATE, kHz
  if (get(&dev, ordinal) != 0 || attr(&khz, kClockRate, dev) != 0) fail("cuDeviceGetAttribute(CLOCK_RATE) failed");
  return khz * 1e3;
}

// n x dim standard normal floats; block b of rows from its own generator (seed, b), so the data
// does not depend on the number of threads.
std::vector<float> normal_rows(int64_t n, int64_t dim, uint64_t seed) {
  std::vector<float> out(static_cast<size_t>(n * dim));
  constexpr int64_t kBlock = 16384;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<std::thread> pool;
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, blocks);
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int64_t b = t; b < blocks; b += threads) {
        std::mt19937_64 gen(seed * 1000003u + static_cast<uint64_t>(b));
        std::normal_distribution<float> normal;
        const int64_t end = std::min(n, (b + 1) * kBlock) * dim;
        for (int64_t i = b * kBlock * dim; i < end; ++i) out[static_cast<size_t>(i)] = normal(gen);
      }
    });
  for (std::thread& t : pool) t.join();
  return out;
}

struct DeviceArray {
  udf_device_array* a = nullptr;
  udf_tensor t{};
  DeviceArray(udf_runtime* rt, void* host, udf_dtype dt, int64_t rows, int64_t cols) {
    const udf_tensor h{host, UDF_HOST_DEVICE, dt, rows, cols, 0};
    check(udf_device_array_create(rt, &h, &a), "udf_device_array_create");
    check(udf_device_array_tensor(a, &t), "udf_device_array_tensor");
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { udf_device_array_destroy(a); }
};

struct Row {
  std::string metric;  // the metric's symbol, "+ refine" for its refine rows
  size_t module;
  uint32_t batch;
  std::vector<double> ms;  // every round's median
  double ops;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One batch size's inputs on the device: reps + 2 query batches (and with --refine as many
// candidate sets), and the device outputs the timed calls write.
struct BatchData {
  uint32_t batch = 0;
  std::vector<std::unique_ptr<DeviceArray>> queries, cands;
  std::unique_ptr<DeviceArray> out_d, out_i;

  BatchData(udf_runtime* rt, const Options& o, uint32_t b, uint64_t seed) : batch(b) {
    const uint32_t n = o.reps + 2;
    std::vector<float> host_q = normal_rows(int64_t(batch) * n, o.dim, seed);
    for (uint32_t i = 0; i < n; ++i)
      queries.push_back(std::make_unique<DeviceArray>(rt, host_q.data() + size_t(i) * batch * o.dim, UDF_DTYPE_F32, batch, o.dim));
    if (o.refine != 0) {  // o.refine random rows a query, a set for each query batch
      std::mt19937_64 gen(seed + 100);
      std::uniform_int_distribution<int64_t> row(0, o.rows - 1);
      std::vector<int64_t> c(size_t(batch) * o.refine);
      for (uint32_t i = 0; i < n; ++i) {
        for (int64_t& id : c) id = row(gen);
        cands.push_back(std::make_unique<DeviceArray>(rt, c.data(), UDF_DTYPE_I64, batch, o.refine));
      }
    }
    std::vector<float> zero_d(size_t(batch) * o.k);
    std::vector<int64_t> zero_i(size_t(batch) * o.k);
    out_d = std::make_unique<DeviceArray>(rt, zero_d.data(), UDF_DTYPE_F32, batch, o.k);
    out_i = std::make_unique<DeviceArray>(rt, zero_i.data(), UDF_DTYPE_I64, batch, o.k);
  }
};

// The metric's captures: every f32 array gets the weights (any other capture is refused).
std::vector<udf_capture_binding> metric_captures(udf_module* m, const std::string& symbol, const udf_tensor* weights) {
  size_t index = 0;
  check(udf_module_find_metric(m, symbol.c_str(), &index), "udf_module_find_metric");
  udf_metric_info mi{};
  check(udf_module_metric_info(m, index, &mi), "udf_module_metric_info");
  std::vector<udf_capture_binding> caps;
  for (uint32_t c = 0; c < mi.n_captures; ++c) {
    udf_capture_info ci{};
    check(udf_module_capture_info(m, index, c, &ci), "udf_module_capture_info");
    if (!ci.is_array || ci.type != UDF_DTYPE_F32) fail("metric " + symbol + ": capture " + ci.name + " is not an f32 array");
    caps.push_back({ci.name, weights, 0, 0});
  }
  return caps;
}

// One metric's searches (or, `refine`, refines) of one batch size with every module: the
// results on the first batch compared (host outputs), then `rounds` rounds of timed calls.
void bench_calls(const Options& o, const std::vector<udf_module*>& modules, const udf_tensor& dataset, const BatchData& bd,
                 const MetricArg& metric, const udf_search_params& p, bool refine, std::vector<Row>& rows) {
  const uint32_t batch = bd.batch;
  auto run = [&](udf_module* m, uint32_t i, const udf_tensor* d, const udf_tensor* ids) {
    return refine ? udf_refine(m, metric.symbol.c_str(), &dataset, &bd.queries[i]->t, &bd.cands[i]->t, &p, d, ids)
                  : udf_exact_search(m, metric.symbol.c_str(), &dataset, &bd.queries[i]->t, &p, d, ids);
  };
  const char* call = refine ? "udf_refine" : "udf_exact_search";
  const std::string label = metric.symbol + (refine ? " + refine " + std::to_string(o.refine) : "");
  std::vector<float> first_d;
  std::vector<int64_t> first_i;
  for (size_t m = 0; m < modules.size(); ++m) {
    std::vector<float> d(size_t(batch) * o.k);
    std::vector<int64_t> ids(size_t(batch) * o.k);
    const udf_tensor hd{d.data(), UDF_HOST_DEVICE, UDF_DTYPE_F32, batch, o.k, 0};
    const udf_tensor hi{ids.data(), UDF_HOST_DEVICE, UDF_DTYPE_I64, batch, o.k, 0};
    check(run(modules[m], 0, &hd, &hi), call);
    if (m == 0) {
      first_d = std::move(d);
      first_i = std::move(ids);
    } else if (ids != first_i || std::memcmp(d.data(), first_d.data(), d.size() * sizeof(float)) != 0) {
      fail(label + ", batch " + std::to_string(batch) + ": " + o.modules[m] + "'s results differ from " + o.modules[0] + "'s");
    }
  }
  std::vector<Row> mine;
  for (size_t m = 0; m < modules.size(); ++m) mine.push_back({label, m, batch, {}, refine ? 0.0 : metric.ops});
  for (uint32_t round = 0; round < o.rounds; ++round) {
    for (size_t m = 0; m < modules.size(); ++m) {
      std::vector<double> ms;
      for (uint32_t i = 0; i < bd.queries.size(); ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        check(run(modules[m], i, &bd.out_d->t, &bd.out_i->t), call);
        const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (i >= 2) ms.push_back(t);  // two warm-ups
      }
      mine[m].ms.push_back(median(ms));
      std::fprintf(stderr, "exact_search_bench: %s batch %u module %zu round %u: %.3f ms\n", label.c_str(), batch, m, round,
                   mine[m].ms.back());
    }
  }
  rows.insert(rows.end(), mine.begin(), mine.end());
}

void print_table(const Options& o, const udf_device_info& info, double fp32_rate, const std::vector<Row>& rows) {
  std::printf("exact_search_bench: %s (%d SMs, %.0f MHz), %lld x %lld f32, k %u, median of %u calls a round\n\n", info.name,
              info.sm_count, fp32_rate / (info.sm_count * 128.0) / 1e6, static_cast<long long>(o.rows),
              static_cast<long long>(o.dim), o.k, o.reps);
  std::printf("| metric | batch | module | ms (each round) | QPS | FP32 issue share |\n|---|---:|---|---|---:|---:|\n");
  for (const Row& r : rows) {
    std::string each;
    for (const double ms : r.ms) {
      char v[32];
      std::snprintf(v, sizeof v, "%.2f", ms);
      each += (each.empty() ? "" : " / ") + std::string(v);
    }
    const double best = median(r.ms);
    char share[32] = "";
    if (r.ops > 0) std::snprintf(share, sizeof share, "%.1f%%", 100.0 * double(r.batch) * o.rows * o.dim * r.ops / (best * 1e-3 * fp32_rate));
    std::printf("| %s | %u | %s | %s | %.0f | %s |\n", r.metric.c_str(), r.batch, o.modules[r.module].c_str(), each.c_str(),
                r.batch / (best * 1e-3), share);
  }
}
}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  udf_runtime* rt = nullptr;
  check(udf_runtime_create(0, &rt), "udf_runtime_create");
  udf_device_info info{};
  check(udf_runtime_device_info(rt, &info), "udf_runtime_device_info");
  const double fp32_rate = double(info.sm_count) * 128.0 * max_sm_clock_hz(info.ordinal);
  std::vector<udf_module*> modules;
  for (const std::string& path : o.modules) {
    modules.push_back(nullptr);
    check(udf_module_load_file(rt, path.c_str(), &modules.back()), "udf_module_load_file(" + path + ")");
  }
  std::vector<MetricArg> metrics = o.metrics;
  if (metrics.empty()) {
    size_t n = 0;
    check(udf_module_metric_count(modules[0], &n), "udf_module_metric_count");
    for (size_t i = 0; i < n; ++i) {
      udf_metric_info mi{};
      check(udf_module_metric_info(modules[0], i, &mi), "udf_module_metric_info");
      metrics.push_back({mi.symbol});
    }
  }

  std::fprintf(stderr, "exact_search_bench: drawing %lld x %lld rows\n", static_cast<long long>(o.rows), static_cast<long long>(o.dim));
  std::vector<float> base = normal_rows(o.rows, o.dim, 1);
  const DeviceArray dataset(rt, base.data(), UDF_DTYPE_F32, o.rows, o.dim);
  std::vector<float> weights(static_cast<size_t>(o.dim));
  {
    std::mt19937_64 gen(2);
    std::uniform_real_distribution<float> u;
    for (float& w : weights) w = 0.5f + 1.5f * u(gen);
  }
  const DeviceArray weights_dev(rt, weights.data(), UDF_DTYPE_F32, 1, o.dim);

  std::vector<Row> rows;
  for (size_t bi = 0; bi < o.batches.size(); ++bi) {
    const BatchData bd(rt, o, o.batches[bi], 100 + bi);
    for (const MetricArg& metric : metrics) {
      const std::vector<udf_capture_binding> caps = metric_captures(modules[0], metric.symbol, &weights_dev.t);
      udf_search_params p;
      udf_search_params_default(&p);
      p.k = o.k;
      p.captures = caps.data();
      p.n_captures = caps.size();
      bench_calls(o, modules, dataset.t, bd, metric, p, false, rows);
      if (o.refine != 0) bench_calls(o, modules, dataset.t, bd, metric, p, true, rows);
    }
  }
  print_table(o, info, fp32_rate, rows);
  for (udf_module* m : modules) udf_module_destroy(m);
  udf_runtime_destroy(rt);
  return 0;
}
