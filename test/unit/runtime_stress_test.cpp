// The runtime under concurrent use and for a long time, on the GPU: what the
// C API promises (runtime.h: a runtime and what it made is used by one thread
// at a time; searches of one index run one after the other on the GPU,
// whatever their streams) checked under load, with every result against the
// float64 reference and the device memory back at its starting level after.
//
//   ThreadsWithTheirOwnRuntimes  several threads, each with its own runtime,
//                                modules and indexes on one GPU: builds, adds,
//                                saves, loads, rebinds and searches
//                                interleaved at random
//   AsyncSearchesOnCallerStreams one thread queueing udf_index_search_async
//                                on several caller streams over several
//                                indexes, results checked after the streams
//                                drain
//
// Each runs for $UDF_SOAK_SECONDS (default 20) and prints what it did; the
// soak on the GPU machine sets it to 600 (test/gpu/soak.sh).  The seed is
// printed; $UDF_FUZZ_SEED replays the random choices (not the interleaving).
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "runtime_test_support.h"

namespace {

using Clock = std::chrono::steady_clock;

double soak_seconds() {
  const char* e = std::getenv("UDF_SOAK_SECONDS");
  return e && *e ? std::strtod(e, nullptr) : 20.0;
}

// The free device memory, in the device's primary context.
size_t free_bytes() {
  Cu::I().use();
  size_t free = 0, total = 0;
  EXPECT_EQ(Cu::I().mem_info(&free, &total), CUDA_SUCCESS);
  return free;
}

// Device memory may differ this much from its starting level after a test
// (the driver's own allocations for a context's streams and modules come in
// 2 MiB pages); a leak of anything a search or a build allocates, repeated
// for the whole soak, is far above it.
constexpr size_t kMemorySlack = size_t{32} << 20;

// Waits for the device's memory to settle (a destroyed runtime's frees are
// asynchronous to nothing, but the driver may return pages lazily) and
// returns how much more is used than at `start`.
int64_t memory_growth(size_t start) {
  int64_t grown = 0;
  for (int i = 0; i < 20; ++i) {
    grown = static_cast<int64_t>(start) - static_cast<int64_t>(free_bytes());
    if (grown <= static_cast<int64_t>(kMemorySlack)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return grown;
}

// What one worker did.
struct Counts {
  std::atomic<uint64_t> builds{0}, adds{0}, saves{0}, rebinds{0}, searches{0}, queries{0};
  void print(const char* what) const {
    std::printf("%s: %" PRIu64 " builds, %" PRIu64 " adds, %" PRIu64 " save+load, %" PRIu64 " rebinds, %" PRIu64
                " searches (%" PRIu64 " queries), every result equal to the float64 reference\n",
                what, builds.load(), adds.load(), saves.load(), rebinds.load(), searches.load(), queries.load());
  }
};

// One metric a worker can use, with its reference.
struct Metric {
  const char* module;  // builtin.udfm or udfs.udfm
  const char* symbol;
  udf_dtype elem;
  bool max_order;
  RefFn ref;
  double tol;
};
const std::vector<Metric>& metrics() {
  static const std::vector<Metric> m = {
      {"builtin.udfm", "udf_builtin_l2", UDF_DTYPE_F32, false, l2, 2e-4},
      {"builtin.udfm", "udf_builtin_inner_product", UDF_DTYPE_F32, true, ip, 2e-4},
      {"udfs.udfm", "u8_l1", UDF_DTYPE_U8, false, l1, 0.0},
      {"udfs.udfm", "f16_l2", UDF_DTYPE_F16, false, l2, 2e-3},
  };
  return m;
}

// An index with the data it holds (all of it: the reference needs every row).
struct Live {
  const Metric* metric = nullptr;
  udf_index* ix = nullptr;
  Data data;
  uint32_t n_lists = 0;
};

// One random search over every list (so the answer is exact) checked against
// the reference; host or device queries and outputs.
bool search_and_check(const Live& l, std::mt19937_64& rng, Counts& c, const std::string& what) {
  const int64_t nq = 1 + static_cast<int64_t>(rng() % 24);
  const uint32_t k = 1 + static_cast<uint32_t>(rng() % std::min<int64_t>(64, l.data.rows));
  const Data q = make_data(rng, l.metric->elem, nq, l.data.dim);
  Result r;
  const udf_status s = search(l.ix, q, k, l.n_lists, r, {}, rng() % 3 == 0 ? 1 + static_cast<uint32_t>(rng() % nq) : 0);
  EXPECT_EQ(s, UDF_OK) << what << ": " << udf_last_error();
  if (s != UDF_OK) return false;
  SCOPED_TRACE(what + ", " + l.metric->symbol + ", k " + std::to_string(k));
  expect_exact(l.data, q, r, k, l.metric->max_order, l.metric->ref, l.metric->tol);
  ++c.searches;
  c.queries += static_cast<uint64_t>(nq);
  return !::testing::Test::HasFailure();
}

// One thread's life: its own runtime and modules, then random operations on
// a few indexes until the deadline.
void worker(int id, uint64_t seed, Clock::time_point deadline, Counts& c, const std::string& tmp) {
  std::mt19937_64 rng(seed);
  const std::string who = "thread " + std::to_string(id);
  udf_runtime* rt = nullptr;
  ASSERT_EQ(udf_runtime_create(0, &rt), UDF_OK) << who << ": " << udf_last_error();
  std::map<std::string, udf_module*> mods;
  for (const char* name : {"builtin.udfm", "udfs.udfm"})
    ASSERT_EQ(udf_module_load_file(rt, (module_dir() + "/" + name).c_str(), &mods[name]), UDF_OK)
        << who << ": " << udf_last_error();
  std::vector<Live> live;
  auto build = [&](const Metric& m) {
    Live l;
    l.metric = &m;
    const int64_t dim = 8 + static_cast<int64_t>(rng() % 41);
    l.data = make_data(rng, m.elem, 200 + static_cast<int64_t>(rng() % 2800), dim);
    l.n_lists = 1 + static_cast<uint32_t>(rng() % 16);
    udf_index_params p;
    udf_index_params_default(&p);
    p.n_lists = l.n_lists;
    p.kmeans_iters = static_cast<uint32_t>(rng() % 6);
    p.seed = rng();
    udf_tensor t = l.data.tensor();
    EXPECT_EQ(udf_index_build(mods[m.module], m.symbol, &t, nullptr, &p, &l.ix), UDF_OK) << who << ": " << udf_last_error();
    ++c.builds;
    return l;
  };
  for (uint64_t step = 0; Clock::now() < deadline && !::testing::Test::HasFailure(); ++step) {
    const unsigned op = static_cast<unsigned>(rng() % 10);
    if (live.size() < 2 || (op == 0 && live.size() < 4)) {
      Live l = build(metrics()[rng() % metrics().size()]);
      if (!l.ix) break;
      live.push_back(std::move(l));
      continue;
    }
    Live& l = live[rng() % live.size()];
    const std::string what = who + " step " + std::to_string(step);
    if (op == 1) {  // add rows (ids continue), then the reference holds them too
      const Data more = make_data(rng, l.metric->elem, 1 + static_cast<int64_t>(rng() % 300), l.data.dim);
      udf_tensor t = more.tensor();
      ASSERT_EQ(udf_index_add(l.ix, &t, nullptr), UDF_OK) << what << ": " << udf_last_error();
      l.data.bytes.insert(l.data.bytes.end(), more.bytes.begin(), more.bytes.end());
      l.data.v.insert(l.data.v.end(), more.v.begin(), more.v.end());
      l.data.rows += more.rows;
      ++c.adds;
    } else if (op == 2) {  // save, load into a new index, drop the old one
      const std::string path = tmp + "/t" + std::to_string(id) + ".udfi";
      ASSERT_EQ(udf_index_save(l.ix, path.c_str()), UDF_OK) << what << ": " << udf_last_error();
      udf_index* back = nullptr;
      ASSERT_EQ(udf_index_load(mods[l.metric->module], path.c_str(), &back), UDF_OK) << what << ": " << udf_last_error();
      udf_index_destroy(l.ix);
      l.ix = back;
      ++c.saves;
    } else if (op == 3 && std::string(l.metric->symbol) == "udf_builtin_l2") {
      // rebinding: the same lists scanned by a copy of the index
      udf_index* copy = nullptr;
      ASSERT_EQ(udf_index_with_metric(l.ix, mods["builtin.udfm"], "udf_builtin_l2", &copy), UDF_OK)
          << what << ": " << udf_last_error();
      udf_index_destroy(l.ix);
      l.ix = copy;
      ++c.rebinds;
    } else if (op == 4 && live.size() > 2) {  // drop one
      udf_index_destroy(l.ix);
      std::swap(l, live.back());
      live.pop_back();
    } else if (!search_and_check(l, rng, c, what)) {
      break;
    }
  }
  for (auto& l : live) udf_index_destroy(l.ix);
  for (auto& [name, m] : mods) udf_module_destroy(m);
  udf_runtime_destroy(rt);
}

TEST(Stress, ThreadsWithTheirOwnRuntimes) {
  REQUIRE_GPU();
  const uint64_t seed = env_u64("UDF_FUZZ_SEED", fresh_seed());
  const int threads = 4;
  const double seconds = soak_seconds();
  std::printf("stress: seed %" PRIu64 " (UDF_FUZZ_SEED replays the choices), %d threads, %.0f s\n", seed, threads,
              seconds);
  const size_t start = free_bytes();
  const std::string tmp = std::filesystem::temp_directory_path() / ("udf-stress-" + std::to_string(getpid()));
  std::filesystem::create_directories(tmp);
  Counts c;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t, seed + 7919 * t, deadline, std::ref(c), tmp);
  for (auto& t : pool) t.join();
  std::filesystem::remove_all(tmp);
  c.print("stress, threads");
  EXPECT_GT(c.searches.load(), 0u);
  const int64_t grown = memory_growth(start);
  std::printf("device memory: %+.1f MiB against the start\n", grown / 1048576.0);
  EXPECT_LE(grown, static_cast<int64_t>(kMemorySlack)) << "device memory did not return to its starting level";
}

TEST(Stress, AsyncSearchesOnCallerStreams) {
  REQUIRE_GPU();
  const uint64_t seed = env_u64("UDF_FUZZ_SEED", fresh_seed());
  std::mt19937_64 rng(seed);
  const double seconds = soak_seconds();
  std::printf("stress async: seed %" PRIu64 ", %.0f s\n", seed, seconds);
  const size_t start = free_bytes();
  Counts c;
  {
    udf_runtime* rt = nullptr;
    ASSERT_EQ(udf_runtime_create(0, &rt), UDF_OK) << udf_last_error();
    udf_module* mod = nullptr;
    ASSERT_EQ(udf_module_load_file(rt, (module_dir() + "/builtin.udfm").c_str(), &mod), UDF_OK) << udf_last_error();
    // three indexes, four caller streams
    std::vector<Live> live(3);
    for (auto& l : live) {
      l.metric = &metrics()[0];
      l.data = make_data(rng, UDF_DTYPE_F32, 500 + static_cast<int64_t>(rng() % 2500), 8 + static_cast<int64_t>(rng() % 41));
      l.n_lists = 1 + static_cast<uint32_t>(rng() % 16);
      udf_index_params p;
      udf_index_params_default(&p);
      p.n_lists = l.n_lists;
      p.kmeans_iters = 3;
      p.seed = rng();
      udf_tensor t = l.data.tensor();
      ASSERT_EQ(udf_index_build(mod, "udf_builtin_l2", &t, nullptr, &p, &l.ix), UDF_OK) << udf_last_error();
      ++c.builds;
    }
    Cu::I().use();
    std::vector<CUstream> streams(4);
    for (auto& s : streams) ASSERT_EQ(Cu::I().stream_create(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    // A round: up to 16 searches queued at once, host queries reused at once
    // (the call copies them), device outputs; then every stream drained and
    // every result checked.
    struct Pending {
      Live* l;
      Data q;
      uint32_t k;
      std::unique_ptr<DevMem> dist, ids;
    };
    for (uint64_t round = 0; Clock::now() < deadline && !::testing::Test::HasFailure(); ++round) {
      std::vector<Pending> pending;
      const int n = 1 + static_cast<int>(rng() % 16);
      for (int i = 0; i < n; ++i) {
        Pending p;
        p.l = &live[rng() % live.size()];
        const int64_t nq = 1 + static_cast<int64_t>(rng() % 40);
        p.k = 1 + static_cast<uint32_t>(rng() % 64);
        p.q = make_data(rng, UDF_DTYPE_F32, nq, p.l->data.dim);
        p.dist = std::make_unique<DevMem>(static_cast<size_t>(nq) * p.k * 4);
        p.ids = std::make_unique<DevMem>(static_cast<size_t>(nq) * p.k * 8);
        udf_search_params sp;
        udf_search_params_default(&sp);
        sp.k = p.k;
        sp.n_probes = p.l->n_lists;
        udf_tensor qt = p.q.tensor();
        udf_tensor od{p.dist->ptr(), 0, UDF_DTYPE_F32, nq, static_cast<int64_t>(p.k), 0};
        udf_tensor oi{p.ids->ptr(), 0, UDF_DTYPE_I64, nq, static_cast<int64_t>(p.k), 0};
        CUstream s = streams[rng() % streams.size()];
        ASSERT_EQ(udf_index_search_async(p.l->ix, &qt, &sp, &od, &oi, s), UDF_OK) << udf_last_error();
        std::fill(p.q.bytes.begin(), p.q.bytes.end(), 0xFF);  // the caller may reuse host queries at once
        pending.push_back(std::move(p));
      }
      Cu::I().use();
      for (auto& s : streams) ASSERT_EQ(Cu::I().stream_sync(s), CUDA_SUCCESS);
      for (auto& p : pending) {
        Result r;
        r.dist.resize(static_cast<size_t>(p.q.rows) * p.k);
        r.ids.resize(r.dist.size());
        ASSERT_EQ(Cu::I().dtoh(r.dist.data(), p.dist->p, r.dist.size() * 4), CUDA_SUCCESS);
        ASSERT_EQ(Cu::I().dtoh(r.ids.data(), p.ids->p, r.ids.size() * 8), CUDA_SUCCESS);
        SCOPED_TRACE("round " + std::to_string(round));
        expect_exact(p.l->data, p.q, r, p.k, false, l2, 2e-4);
        ++c.searches;
        c.queries += static_cast<uint64_t>(p.q.rows);
      }
    }
    for (auto& s : streams) Cu::I().stream_destroy(s);
    for (auto& l : live) udf_index_destroy(l.ix);
    udf_module_destroy(mod);
    udf_runtime_destroy(rt);
  }
  c.print("stress, async streams");
  EXPECT_GT(c.searches.load(), 0u);
  const int64_t grown = memory_growth(start);
  std::printf("device memory: %+.1f MiB against the start\n", grown / 1048576.0);
  EXPECT_LE(grown, static_cast<int64_t>(kMemorySlack)) << "device memory did not return to its starting level";
}

}  // namespace
