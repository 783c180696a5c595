// Filter benchmark: what a filter costs inside the scan, through the C API.
//
//   filter_bench MODULE.udfm [--rows N] [--dim D] [--lists L] [--probes P] [--k K] [--reps R] [--json FILE]
//
// MODULE must hold udf_builtin_l2 linked with udf_builtin_bitmap and
// query_group (test/modules/filters.udfm does).  Data: a clustered Gaussian
// mixture, f32, ids 0 .. N-1.  For batches of 100 and 10,000 queries it
// times (wall clock around udf_index_search, host arrays in and out, median
// of R repetitions after a warm-up, a different query batch each
// repetition) the search without a filter, with the bitmap keeping every id,
// keeping 50%, 10% and 1% of the ids at random, and with the per-query
// query_group filter at 10%.  Prints one table (QPS, scan ms from
// udf_index_last_search_stats, ratio to unfiltered) and writes JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <dlfcn.h>

#include "udf/runtime.h"

namespace {

void check(udf_status s, const char* what) {
  if (s != UDF_OK) {
    std::fprintf(stderr, "filter_bench: %s: %s (%s)\n", what, udf_last_error(), udf_status_name(s));
    std::exit(1);
  }
}

udf_tensor host(void* p, udf_dtype t, int64_t rows, int64_t cols) { return udf_tensor{p, UDF_HOST_DEVICE, t, rows, cols, 0}; }

// A device copy of a host buffer, through the driver (dlopen: the bench links
// only libudf_runtime), in the runtime device's primary context.
void* device_copy(const void* src, size_t n) {
  void* cu = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cu) return nullptr;
  using Retain = int (*)(void**, int);
  using SetCurrent = int (*)(void*);
  using Alloc = int (*)(unsigned long long*, size_t);
  using HtoD = int (*)(unsigned long long, const void*, size_t);
  auto retain = reinterpret_cast<Retain>(dlsym(cu, "cuDevicePrimaryCtxRetain"));
  auto set = reinterpret_cast<SetCurrent>(dlsym(cu, "cuCtxSetCurrent"));
  auto alloc = reinterpret_cast<Alloc>(dlsym(cu, "cuMemAlloc_v2"));
  auto htod = reinterpret_cast<HtoD>(dlsym(cu, "cuMemcpyHtoD_v2"));
  void* ctx = nullptr;
  unsigned long long p = 0;
  if (!retain || !set || !alloc || !htod || retain(&ctx, 0) != 0 || set(ctx) != 0 || alloc(&p, n) != 0 || htod(p, src, n) != 0)
    return nullptr;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

struct Row {
  std::string filter;
  uint32_t batch;
  double selectivity;
  double ms, scan_ms, qps;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: filter_bench MODULE.udfm [--rows N] [--dim D] [--lists L] [--probes P] [--k K] [--reps R] [--json FILE]\n");
    return 2;
  }
  std::string module = argv[1], json_path;
  int64_t rows = 1000000, dim = 128;
  uint32_t lists = 1024, probes = 32, k = 10, reps = 9;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "--rows") rows = std::atoll(v);
    else if (a == "--dim") dim = std::atoll(v);
    else if (a == "--lists") lists = std::atoi(v);
    else if (a == "--probes") probes = std::atoi(v);
    else if (a == "--k") k = std::atoi(v);
    else if (a == "--reps") reps = std::atoi(v);
    else if (a == "--json") json_path = v;
    else { std::fprintf(stderr, "filter_bench: unknown option %s\n", a.c_str()); return 2; }
  }

  udf_runtime* rt = nullptr;
  check(udf_runtime_create(0, &rt), "udf_runtime_create");
  udf_device_info di{};
  check(udf_runtime_device_info(rt, &di), "device info");
  int32_t driver = 0;
  udf_driver_version(&driver);
  udf_module* m = nullptr;
  check(udf_module_load_file(rt, module.c_str(), &m), "module load");

  // Clustered data: 1024 centres, unit spread around each.
  std::mt19937_64 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int n_centres = 1024;
  std::vector<float> centres(size_t(n_centres) * dim);
  for (auto& c : centres) c = nd(rng) * 4.0f;
  auto sample = [&](int64_t n, std::vector<float>& out) {
    out.resize(size_t(n) * dim);
    std::uniform_int_distribution<int> pick(0, n_centres - 1);
    for (int64_t r = 0; r < n; ++r) {
      const float* c = &centres[size_t(pick(rng)) * dim];
      for (int64_t j = 0; j < dim; ++j) out[size_t(r) * dim + j] = c[j] + nd(rng);
    }
  };
  std::vector<float> data;
  sample(rows, data);
  udf_index_params ip;
  udf_index_params_default(&ip);
  ip.n_lists = lists;
  udf_tensor dt = host(data.data(), UDF_DTYPE_F32, rows, dim);
  udf_index* ix = nullptr;
  auto t0 = std::chrono::steady_clock::now();
  check(udf_index_build(m, "udf_builtin_l2", &dt, nullptr, &ip, &ix), "index build");
  check(udf_index_set_stage_timing(ix, 1), "stage timing");  // the scan stage is this bench's figure
  const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<float>().swap(data);

  // Bitmaps over ids 0 .. rows-1.
  auto bitmap_with = [&](double sel) {
    std::vector<uint8_t> b((rows + 7) / 8, 0);
    std::bernoulli_distribution take(sel);
    for (int64_t i = 0; i < rows; ++i)
      if (sel >= 1.0 || take(rng)) b[i / 8] |= uint8_t(1u << (i % 8));
    return b;
  };

  std::vector<Row> table;
  for (uint32_t batch : {100u, 10000u}) {
    std::vector<std::vector<float>> qs(reps + 1);
    for (auto& q : qs) sample(batch, q);
    std::vector<float> od(size_t(batch) * k);
    std::vector<int64_t> oi(size_t(batch) * k);
    auto run = [&](const char* filter, const std::vector<udf_capture_binding>& fc, double sel) {
      udf_search_params sp;
      udf_search_params_default(&sp);
      sp.k = k;
      sp.n_probes = probes;
      sp.filter = filter;
      sp.filter_captures = fc.data();
      sp.n_filter_captures = fc.size();
      udf_tensor ot = host(od.data(), UDF_DTYPE_F32, batch, k);
      udf_tensor it = host(oi.data(), UDF_DTYPE_I64, batch, k);
      std::vector<double> ms, scan;
      for (uint32_t r = 0; r <= reps; ++r) {
        udf_tensor qt = host(qs[r].data(), UDF_DTYPE_F32, batch, dim);
        auto a = std::chrono::steady_clock::now();
        check(udf_index_search(ix, &qt, &sp, &ot, &it), "search");
        const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
        udf_search_stats st{};
        check(udf_index_last_search_stats(ix, &st), "stats");
        if (r == 0) continue;  // warm-up
        ms.push_back(t);
        scan.push_back(st.scan_ms);
      }
      std::sort(ms.begin(), ms.end());
      std::sort(scan.begin(), scan.end());
      const double med = ms[ms.size() / 2];
      table.push_back(Row{filter ? filter : "(none)", batch, sel, med, scan[scan.size() / 2], batch / (med / 1e3)});
    };
    run(nullptr, {}, 1.0);
    for (double sel : {1.0, 0.5, 0.1, 0.01}) {
      auto bm = bitmap_with(sel);
      udf_tensor bt = host(bm.data(), UDF_DTYPE_U8, 1, static_cast<int64_t>(bm.size()));
      run("udf_builtin_bitmap", {{"bitmap", &bt, 0, 0}, {"n_ids", nullptr, 0, static_cast<int32_t>(rows)}}, sel);
      if (sel == 1.0) {  // the same bitmap already on the GPU: no copy per search
        if (void* d = device_copy(bm.data(), bm.size())) {
          udf_tensor dbt{d, 0, UDF_DTYPE_U8, 1, static_cast<int64_t>(bm.size()), 0};
          run("udf_builtin_bitmap", {{"bitmap", &dbt, 0, 0}, {"n_ids", nullptr, 0, static_cast<int32_t>(rows)}}, sel);
          table.back().filter = "udf_builtin_bitmap (device array)";
        }
      }
    }
    run("query_group", {{"n_groups", nullptr, 0, 10}}, 0.1);
  }

  std::printf("filter_bench: %s, driver %d, %lld x %lld f32 clustered, %u lists (built in %.1f s), n_probes %u, k %u, median of %u\n",
              di.name, driver, static_cast<long long>(rows), static_cast<long long>(dim), lists, build_s, probes, k, reps);
  std::printf("| batch | filter | kept | ms / batch | scan ms | QPS | vs unfiltered |\n|---|---|---|---|---|---|---|\n");
  for (const Row& r : table) {
    double base = 0;
    for (const Row& b : table)
      if (b.batch == r.batch && b.filter == "(none)") base = b.qps;
    std::printf("| %u | %s | %.0f%% | %.3f | %.3f | %.0f | %.3f |\n", r.batch, r.filter.c_str(), r.selectivity * 100, r.ms,
                r.scan_ms, r.qps, r.qps / base);
  }
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) { std::perror(json_path.c_str()); return 1; }
    std::fprintf(f, "{\"gpu\": \"%s\", \"driver\": %d, \"rows\": %lld, \"dim\": %lld, \"lists\": %u, \"probes\": %u, \"k\": %u, \"rows_table\": [\n",
                 di.name, driver, static_cast<long long>(rows), static_cast<long long>(dim), lists, probes, k);
    for (size_t i = 0; i < table.size(); ++i)
      std::fprintf(f, "  {\"batch\": %u, \"filter\": \"%s\", \"selectivity\": %g, \"ms\": %.4f, \"scan_ms\": %.4f, \"qps\": %.1f}%s\n",
                   table[i].batch, table[i].filter.c_str(), table[i].selectivity, table[i].ms, table[i].scan_ms, table[i].qps,
                   i + 1 < table.size() ? "," : "");
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  udf_index_destroy(ix);
  udf_module_destroy(m);
  udf_runtime_destroy(rt);
  return 0;
}
