// A property test of the runtime's C API on the GPU: random valid and invalid
// calls of udf_index_search (and udf_index_build / udf_index_add), made by
// mutating a valid call with 0..3 faults from a catalogue (bad k / n_probes,
// NULL pointers, wrong dims, dtypes, shapes and strides, host memory claimed
// as device memory, another device's ordinal, missing / unknown / doubled /
// mistyped / short captures, ...).  Every call must either
//   - fail with one of the statuses its faults call for, a non-empty
//     udf_last_error() and the output buffers untouched, or
//   - (no fault) succeed with results equal to the float64 exhaustive
//     reference (every list probed) or, with fewer probes, distinct ids that
//     carry their own reference distances, best first;
// never crash and never give a wrong answer.  Host and device memory,
// padded row strides, several queries per work item and small internal
// batches are mixed into the valid calls.  The seed is random and printed;
// $UDF_FUZZ_SEED replays one, $UDF_FUZZ_TRIALS sets the number of search
// calls (default 400).
#include "runtime_test_support.h"

#include <array>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <numeric>
#include <memory>
#include <set>

namespace {

// One index under test, with what a valid search needs.
struct Target {
  std::string name;      // the metric's symbol
  udf_module* mod = nullptr;
  udf_dtype elem = UDF_DTYPE_F32;
  bool max_order = false;
  int64_t dim = 16;
  uint32_t n_lists = 8;
  Data base;
  udf_index* ix = nullptr;
  // captures: weighted_l2 has `weights` (f32[]); scaled_ip has `scale` (f32 scalar)
  bool has_array = false, has_scalar = false;
  double scale = 1.0;
  std::vector<float> weights;
  double ref(const double* x, const double* y) const {
    if (name == "weighted_l2") {
      double s = 0;
      for (int64_t i = 0; i < dim; ++i) s += double(weights[i]) * (x[i] - y[i]) * (x[i] - y[i]);
      return s;
    }
    if (name == "u8_l1") return l1(x, y, dim);
    if (name == "scaled_ip") return double(float(scale)) * ip(x, y, dim);
    return l2(x, y, dim);
  }
};

// Every fault the catalogue can inject, and the status it must produce.
enum Fault {
  kK0, kKBig, kProbes0, kProbesBig, kQpiBig, kParamsNull, kIndexNull, kQueriesNull, kQueriesDim, kQueriesDtype,
  kQueriesRows0, kQueriesDataNull, kQueriesStride, kQueriesHostAsDevice, kQueriesOtherDevice, kDistNull,
  kDistDtype, kDistRows, kDistCols, kIdsDtype, kIdsDataNull, kCapsNullArray, kCapMissing, kCapUnknown,
  kCapTwice, kCapNameNull, kCapArrayDtype, kCapArrayLength, kCapArrayNoTensor, kCapScalarTensorDtype, kNumFaults
};
const char* kFaultNames[kNumFaults] = {
    "k=0", "k>max_k", "n_probes=0", "n_probes>n_lists", "queries_per_item>64", "params NULL", "index NULL",
    "queries NULL", "queries dim", "queries dtype", "queries 0 rows", "queries data NULL", "queries stride<cols",
    "host memory as device", "another device", "out_distances NULL", "out_distances dtype", "out_distances rows",
    "out_distances cols", "out_ids dtype", "out_ids data NULL", "captures NULL, n>0", "capture missing",
    "capture unknown", "capture twice", "capture name NULL", "array capture dtype", "array capture length",
    "array capture no tensor", "scalar capture tensor dtype"};
udf_status expected_status(Fault f) {
  return f >= kCapMissing ? UDF_ERROR_CAPTURE : UDF_ERROR_INVALID_ARGUMENT;
}
bool needs_array_capture(Fault f) { return f == kCapArrayDtype || f == kCapArrayLength || f == kCapArrayNoTensor; }

// Whether a capture list is wrong for a target, judged from the list alone
// (the rules of docs/runtime.md: every capture bound exactly once by name, an
// array by an F32 tensor of dim elements (1 x dim or dim x 1), a scalar by
// value or by a 1 x 1 F32 tensor).
bool captures_invalid(const Target& t, const std::vector<udf_capture_binding>& caps) {
  std::map<std::string, int> seen;
  for (const auto& c : caps) {
    if (!c.name) return true;
    const std::string n = c.name;
    if (++seen[n] > 1) return true;
    if (n == "weights" && t.has_array) {
      const udf_tensor* w = c.tensor;
      if (!w || w->dtype != UDF_DTYPE_F32 || std::min(w->rows, w->cols) != 1 || std::max(w->rows, w->cols) != t.dim)
        return true;
    } else if (n == "scale" && t.has_scalar) {
      if (c.tensor && (c.tensor->dtype != UDF_DTYPE_F32 || c.tensor->rows != 1 || c.tensor->cols != 1)) return true;
    } else {
      return true;  // not a capture of this metric
    }
  }
  return seen.count("weights") != static_cast<size_t>(t.has_array) || seen.count("scale") != static_cast<size_t>(t.has_scalar);
}

struct World : ::testing::Test {
  udf_module* builtin = nullptr;
  udf_module* udfs = nullptr;
  std::vector<std::unique_ptr<Target>> targets;
  std::mt19937_64 rng;
  uint64_t seed = 0;

  void SetUp() override {
    if (!gpu().rt) return;
    seed = env_u64("UDF_FUZZ_SEED", fresh_seed());
    std::printf("runtime API fuzz: seed %" PRIu64 " (UDF_FUZZ_SEED=%" PRIu64 " replays it)\n", seed, seed);
    rng.seed(seed);
    ASSERT_EQ(udf_module_load_file(gpu().rt, (module_dir() + "/builtin.udfm").c_str(), &builtin), UDF_OK)
        << udf_last_error();
    ASSERT_EQ(udf_module_load_file(gpu().rt, (module_dir() + "/udfs.udfm").c_str(), &udfs), UDF_OK) << udf_last_error();
    add("udf_builtin_l2", builtin, UDF_DTYPE_F32, false);
    add("weighted_l2", udfs, UDF_DTYPE_F32, false);
    add("u8_l1", udfs, UDF_DTYPE_U8, false);
    add("scaled_ip", udfs, UDF_DTYPE_F32, true);
  }
  void TearDown() override {
    for (auto& t : targets) udf_index_destroy(t->ix);
    udf_module_destroy(builtin);
    udf_module_destroy(udfs);
  }
  void add(const char* name, udf_module* m, udf_dtype elem, bool max_order) {
    auto t = std::make_unique<Target>();
    t->name = name;
    t->mod = m;
    t->elem = elem;
    t->max_order = max_order;
    t->dim = 8 + static_cast<int64_t>(rng() % 25);
    t->n_lists = 1 + static_cast<uint32_t>(rng() % 12);
    t->base = make_data(rng, elem, 300 + static_cast<int64_t>(rng() % 500), t->dim);
    t->has_array = t->name == "weighted_l2";
    t->has_scalar = t->name == "scaled_ip";
    std::uniform_real_distribution<float> w(0.25f, 2.0f);
    for (int64_t i = 0; i < t->dim; ++i) t->weights.push_back(w(rng));
    t->scale = std::uniform_real_distribution<double>(0.5, 3.0)(rng);
    udf_index_params p;
    udf_index_params_default(&p);
    p.n_lists = t->n_lists;
    p.kmeans_iters = 5;
    p.seed = rng();
    udf_tensor bt = t->base.tensor();
    ASSERT_EQ(udf_index_build(m, name, &bt, nullptr, &p, &t->ix), UDF_OK) << name << ": " << udf_last_error();
    targets.push_back(std::move(t));
  }
};

// Checks a successful search's results (host copies) against the reference.
void check_results(const Target& t, const Data& q, uint32_t k, uint32_t probes, const std::vector<float>& dist,
                   const std::vector<int64_t>& ids, const std::string& what) {
  const bool exact = probes == t.n_lists;
  const double tol_rel = t.elem == UDF_DTYPE_U8 ? 0.0 : 2e-4;
  int bad = 0;
  for (int64_t qi = 0; qi < q.rows && bad == 0; ++qi) {
    std::vector<double> all(t.base.rows);
    for (int64_t i = 0; i < t.base.rows; ++i) all[i] = t.ref(&t.base.v[i * t.dim], &q.v[qi * t.dim]);
    std::vector<double> sorted = all;
    if (t.max_order)
      std::sort(sorted.begin(), sorted.end(), std::greater<>());
    else
      std::sort(sorted.begin(), sorted.end());
    std::set<int64_t> seen;
    float prev = t.max_order ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
    bool padded = false;
    for (uint32_t r = 0; r < k; ++r) {
      const float d = dist[qi * k + r];
      const int64_t id = ids[qi * k + r];
      if (id == -1) {  // padding: only after the real results, with the worst distance
        const float worst = t.max_order ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
        if (d != worst || (exact && r < t.base.rows)) {
          ADD_FAILURE() << what << ": query " << qi << " rank " << r << ": padding (" << d << ") where a result is due";
          ++bad;
        }
        padded = true;
        continue;
      }
      const double tol = tol_rel * (1.0 + std::fabs(all[std::clamp<int64_t>(id, 0, t.base.rows - 1)]));
      if (padded || id < 0 || id >= t.base.rows || !seen.insert(id).second || !(std::fabs(all[id] - d) <= tol) ||
          (t.max_order ? d > prev + tol : d < prev - tol) || (exact && !(std::fabs(sorted[r] - d) <= tol))) {
        ADD_FAILURE() << what << ": query " << qi << " rank " << r << ": got (" << d << ", id " << id << ")"
                      << (exact ? ", want distance " + std::to_string(sorted[r]) : std::string());
        ++bad;
        break;
      }
      prev = d;
    }
  }
}

TEST_F(World, RandomSearchCalls) {
  REQUIRE_GPU();
  const uint64_t trials = env_u64("UDF_FUZZ_TRIALS", 400);
  std::map<std::string, int> fault_count;
  int ok_calls = 0, failed_calls = 0;
  for (uint64_t trial = 0; trial < trials && !HasFailure(); ++trial) {
    Target& t = *targets[rng() % targets.size()];
    const bool exact = rng() % 2;
    uint32_t k = 1 + static_cast<uint32_t>(rng() % 40);
    if (rng() % 8 == 0) k = static_cast<uint32_t>(t.base.rows) + 1 + static_cast<uint32_t>(rng() % 50);  // padding
    uint32_t probes = exact ? t.n_lists : 1 + static_cast<uint32_t>(rng() % t.n_lists);
    const int64_t nq = 1 + static_cast<int64_t>(rng() % 40);
    const Data q = make_data(rng, t.elem, nq, t.dim);

    // Faults (0..3), compatible with this target.
    std::vector<Fault> faults;
    const int n_faults = std::array<int, 8>{0, 0, 0, 0, 1, 1, 2, 3}[rng() % 8];
    while (static_cast<int>(faults.size()) < n_faults) {
      Fault f = static_cast<Fault>(rng() % kNumFaults);
      if ((needs_array_capture(f) && !t.has_array) || (f == kCapScalarTensorDtype && !t.has_scalar) ||
          (f == kCapMissing && !t.has_array && !t.has_scalar))
        continue;
      if (f == kQueriesOtherDevice && !faults.empty()) continue;
      faults.push_back(f);
    }
    auto has = [&](Fault f) { return std::find(faults.begin(), faults.end(), f) != faults.end(); };

    // Queries: host or device, maybe with a padded row stride.
    const int64_t qcols = has(kQueriesDim) ? t.dim + 1 : t.dim;
    const int64_t qstride = rng() % 3 == 0 ? qcols + 1 + static_cast<int64_t>(rng() % 5) : qcols;
    const udf_dtype qtype = has(kQueriesDtype) ? (t.elem == UDF_DTYPE_F32 ? UDF_DTYPE_F16 : UDF_DTYPE_F32) : t.elem;
    const size_t es = udf_dtype_size(qtype);
    std::vector<uint8_t> qhost(static_cast<size_t>(nq * qstride) * es, 0);
    for (int64_t r = 0; r < nq; ++r)
      std::memcpy(&qhost[static_cast<size_t>(r * qstride) * es], &q.bytes[static_cast<size_t>(r * t.dim) * udf_dtype_size(t.elem)],
                  static_cast<size_t>(std::min(qcols, t.dim)) * std::min(es, udf_dtype_size(t.elem)));
    const bool q_on_device = rng() % 2;
    std::unique_ptr<DevMem> qdev;
    if (q_on_device) qdev = std::make_unique<DevMem>(qhost.data(), qhost.size());
    udf_tensor qt{q_on_device ? qdev->ptr() : qhost.data(), q_on_device ? 0 : UDF_HOST_DEVICE, qtype, nq, qcols,
                  qstride == qcols ? 0 : qstride};
    if (has(kQueriesRows0)) qt.rows = 0;
    if (has(kQueriesDataNull)) qt.data = nullptr;
    if (has(kQueriesStride)) qt.row_stride = qcols - 1;
    if (has(kQueriesHostAsDevice)) {
      qt.data = qhost.data();
      qt.device = 0;
    }
    if (has(kQueriesOtherDevice)) qt.device = 1 + static_cast<int32_t>(rng() % 3);

    // Outputs: host or device, maybe strided; poisoned.
    const int64_t ostride = rng() % 3 == 0 ? k + 3 : k;
    const size_t n_out = static_cast<size_t>(nq * ostride);
    std::vector<float> dist(n_out, std::numeric_limits<float>::quiet_NaN());
    std::vector<int64_t> ids(n_out, 0x5A5A5A5A5A5A5A5A);
    const std::vector<float> dist0 = dist;
    const std::vector<int64_t> ids0 = ids;
    const bool out_on_device = rng() % 2;
    std::unique_ptr<DevMem> ddev, idev;
    if (out_on_device) {
      ddev = std::make_unique<DevMem>(dist.data(), n_out * 4);
      idev = std::make_unique<DevMem>(ids.data(), n_out * 8);
    }
    udf_tensor od{out_on_device ? ddev->ptr() : dist.data(), out_on_device ? 0 : UDF_HOST_DEVICE, UDF_DTYPE_F32, nq,
                  static_cast<int64_t>(k), ostride == k ? 0 : ostride};
    udf_tensor oi{out_on_device ? idev->ptr() : ids.data(), out_on_device ? 0 : UDF_HOST_DEVICE, UDF_DTYPE_I64, nq,
                  static_cast<int64_t>(k), ostride == k ? 0 : ostride};
    if (has(kDistDtype)) od.dtype = UDF_DTYPE_I32;
    if (has(kDistRows)) od.rows = nq + 1;
    if (has(kDistCols)) od.cols = k + 1;
    if (has(kIdsDtype)) oi.dtype = UDF_DTYPE_I32;
    if (has(kIdsDataNull)) oi.data = nullptr;

    // Captures.
    std::vector<float> wts = t.weights;
    std::unique_ptr<DevMem> wdev;
    const bool caps_on_device = rng() % 2;
    if (caps_on_device) wdev = std::make_unique<DevMem>(wts.data(), wts.size() * 4);
    udf_tensor wt{caps_on_device ? wdev->ptr() : wts.data(), caps_on_device ? 0 : UDF_HOST_DEVICE, UDF_DTYPE_F32, 1,
                  t.dim, 0};
    if (rng() % 2) std::swap(wt.rows, wt.cols);  // dim x 1 is a vector too
    if (has(kCapArrayDtype)) wt.dtype = UDF_DTYPE_F16;
    if (has(kCapArrayLength)) (wt.rows == 1 ? wt.cols : wt.rows) = t.dim - 1;
    const float scale_f = static_cast<float>(t.scale);
    int32_t scale_bits_i32 = 0;
    std::memcpy(&scale_bits_i32, &scale_f, 4);
    udf_tensor st{const_cast<float*>(&scale_f), UDF_HOST_DEVICE, UDF_DTYPE_F32, 1, 1, 0};
    if (has(kCapScalarTensorDtype)) st = udf_tensor{&scale_bits_i32, UDF_HOST_DEVICE, UDF_DTYPE_I32, 1, 1, 0};
    std::vector<udf_capture_binding> caps;
    if (t.has_array && !has(kCapMissing)) caps.push_back({"weights", has(kCapArrayNoTensor) ? nullptr : &wt, 0, 0});
    if (t.has_scalar && !has(kCapMissing)) {
      const bool as_tensor = has(kCapScalarTensorDtype) || rng() % 2;
      caps.push_back({"scale", as_tensor ? &st : nullptr, scale_f, 0});
    }
    if (has(kCapUnknown)) caps.push_back({"no_such_capture", &wt, 1.0f, 0});
    // "Twice" doubles a binding the call already has, or -- where "missing"
    // left none -- adds one binding twice: adding it once would bind exactly
    // what "missing" took away and make a valid call (seeds 11, 16, 18).
    if (has(kCapTwice)) {
      const udf_capture_binding b = !caps.empty() ? caps.front()
                                    : t.has_scalar ? udf_capture_binding{"scale", nullptr, scale_f, 0}
                                                   : udf_capture_binding{"weights", &wt, 0, 0};
      if (caps.empty()) caps.push_back(b);
      caps.push_back(b);
    }
    if (has(kCapNameNull)) caps.push_back({nullptr, &wt, 0, 0});
    std::shuffle(caps.begin(), caps.end(), rng);

    // The generator's own check: the capture list it built is invalid
    // exactly when it injected a capture fault (which the runtime must then
    // refuse), so no combination of faults cancels out into a valid call.
    const bool cap_fault = std::any_of(faults.begin(), faults.end(), [](Fault f) { return f >= kCapMissing; });
    ASSERT_EQ(captures_invalid(t, caps), cap_fault) << "generator: trial " << trial << " builds a capture list that "
                                                    << (cap_fault ? "is valid despite its faults" : "is invalid");

    udf_search_params p;
    udf_search_params_default(&p);
    p.k = has(kK0) ? 0 : has(kKBig) ? 1025 : k;
    p.n_probes = has(kProbes0) ? 0 : has(kProbesBig) ? t.n_lists + 1 : probes;
    p.queries_per_item = has(kQpiBig) ? 65 : static_cast<uint32_t>(rng() % 9);
    p.max_batch = rng() % 3 == 0 ? 1 + static_cast<uint32_t>(rng() % nq) : 0;
    p.captures = has(kCapsNullArray) ? nullptr : caps.data();
    p.n_captures = has(kCapsNullArray) ? 1 + caps.size() : caps.size();

    std::string what = "trial " + std::to_string(trial) + " (" + t.name + ", k " + std::to_string(k) + ", probes " +
                       std::to_string(probes) + "/" + std::to_string(t.n_lists) + ", " + std::to_string(nq) +
                       " queries" + (q_on_device ? " on the device" : "") + (out_on_device ? ", device outputs" : "") +
                       "; faults:";
    for (Fault f : faults) what += std::string(" ") + kFaultNames[f];
    what += ")";
    const udf_status s = udf_index_search(has(kIndexNull) ? nullptr : t.ix, has(kQueriesNull) ? nullptr : &qt,
                                          has(kParamsNull) ? nullptr : &p, has(kDistNull) ? nullptr : &od, &oi);
    if (out_on_device) {
      ASSERT_EQ(Cu::I().dtoh(dist.data(), ddev->p, n_out * 4), CUDA_SUCCESS);
      ASSERT_EQ(Cu::I().dtoh(ids.data(), idev->p, n_out * 8), CUDA_SUCCESS);
    }
    if (!faults.empty()) {
      std::set<udf_status> allowed;
      for (Fault f : faults) allowed.insert(expected_status(f));
      EXPECT_TRUE(allowed.count(s)) << what << ": status " << udf_status_name(s) << ": " << udf_last_error();
      EXPECT_NE(std::string(udf_last_error()), "") << what;
      EXPECT_TRUE(std::equal(ids.begin(), ids.end(), ids0.begin())) << what << ": ids written by a failing call";
      EXPECT_TRUE(std::memcmp(dist.data(), dist0.data(), n_out * 4) == 0) << what << ": distances written by a failing call";
      for (Fault f : faults) ++fault_count[kFaultNames[f]];
      ++failed_calls;
      continue;
    }
    ASSERT_EQ(s, UDF_OK) << what << ": " << udf_last_error();
    ++ok_calls;
    std::vector<float> d(nq * k);
    std::vector<int64_t> id(nq * k);
    for (int64_t r = 0; r < nq; ++r)
      for (uint32_t c = 0; c < k; ++c) {
        d[r * k + c] = dist[r * ostride + c];
        id[r * k + c] = ids[r * ostride + c];
      }
    for (int64_t r = 0; r < nq; ++r)  // the padding columns of a strided output stay untouched
      for (int64_t c = k; c < ostride; ++c) ASSERT_EQ(ids[r * ostride + c], ids0[r * ostride + c]) << what;
    check_results(t, q, k, probes, d, id, what);
  }
  std::printf("runtime API fuzz: %d valid calls checked against the reference, %d invalid calls refused\n", ok_calls,
              failed_calls);
  for (const auto& [name, n] : fault_count) std::printf("  %-28s %d\n", name.c_str(), n);
  EXPECT_GT(ok_calls, 0);
  EXPECT_GT(failed_calls, 0);
}

TEST_F(World, RandomBuildAndAddCalls) {
  REQUIRE_GPU();
  for (int trial = 0; trial < 60 && !HasFailure(); ++trial) {
    Target& t = *targets[rng() % targets.size()];
    const int64_t rows = 20 + static_cast<int64_t>(rng() % 200);
    const Data d = make_data(rng, t.elem, rows, t.dim);
    std::vector<int64_t> idv(rows);
    std::iota(idv.begin(), idv.end(), 1000);
    udf_tensor dt = d.tensor(), it{idv.data(), UDF_HOST_DEVICE, UDF_DTYPE_I64, 1, rows, 0};
    udf_index_params p;
    udf_index_params_default(&p);
    p.n_lists = 1 + static_cast<uint32_t>(rng() % 8);
    p.kmeans_iters = static_cast<uint32_t>(rng() % 4);
    std::string fault = "none";
    switch (rng() % 10) {
      case 0: p.n_lists = 0; fault = "n_lists 0"; break;
      case 1: p.n_lists = static_cast<uint32_t>(rows) + 1; fault = "n_lists > rows"; break;
      case 2: dt.dtype = t.elem == UDF_DTYPE_F32 ? UDF_DTYPE_U8 : UDF_DTYPE_F32; fault = "data dtype"; break;
      case 3: it.cols = rows - 1; fault = "ids length"; break;
      case 4: it.dtype = UDF_DTYPE_I32; fault = "ids dtype"; break;
      case 5: dt.data = nullptr; fault = "data NULL"; break;
      default: break;
    }
    udf_index* ix = nullptr;
    const bool with_ids = fault.rfind("ids", 0) == 0 || rng() % 2;
    const udf_status s = udf_index_build(t.mod, t.name.c_str(), &dt, with_ids ? &it : nullptr, &p, &ix);
    const std::string what = "build trial " + std::to_string(trial) + " (" + t.name + ", fault " + fault + ")";
    if (fault != "none") {
      EXPECT_EQ(s, UDF_ERROR_INVALID_ARGUMENT) << what << ": " << udf_last_error();
      EXPECT_EQ(ix, nullptr) << what;
      continue;
    }
    ASSERT_EQ(s, UDF_OK) << what << ": " << udf_last_error();
    // add: valid, or with a wrong dim (refused, the index unchanged)
    const Data more = make_data(rng, t.elem, 10, t.dim + (rng() % 3 == 0 ? 1 : 0));
    udf_tensor mt = more.tensor();
    const udf_status sa = udf_index_add(ix, &mt, nullptr);
    udf_index_info info{};
    ASSERT_EQ(udf_index_info_get(ix, &info), UDF_OK);
    if (more.dim != t.dim) {
      EXPECT_EQ(sa, UDF_ERROR_INVALID_ARGUMENT) << what;
      EXPECT_EQ(info.size, rows) << what;
    } else {
      EXPECT_EQ(sa, UDF_OK) << what << ": " << udf_last_error();
      EXPECT_EQ(info.size, rows + 10) << what;
    }
    udf_index_destroy(ix);
  }
}

// A module (and a runtime) destroyed while an index made from it lives is
// released with the index: the index stays usable until then.
TEST(RuntimeLifetime, IndexOutlivesItsModuleAndRuntime) {
  REQUIRE_GPU();
  udf_runtime* rt = nullptr;
  ASSERT_EQ(udf_runtime_create(0, &rt), UDF_OK) << udf_last_error();
  udf_module* m = nullptr;
  ASSERT_EQ(udf_module_load_file(rt, (module_dir() + "/builtin.udfm").c_str(), &m), UDF_OK) << udf_last_error();
  std::mt19937_64 rng(fresh_seed());
  const Data base = make_data(rng, UDF_DTYPE_F32, 400, 12);
  udf_index* ix = build_index(m, "udf_builtin_l2", base, 4);
  ASSERT_NE(ix, nullptr);
  udf_module_destroy(m);
  udf_runtime_destroy(rt);
  const Data q = make_data(rng, UDF_DTYPE_F32, 5, 12);
  Result r;
  ASSERT_EQ(search(ix, q, 7, 4, r), UDF_OK) << udf_last_error();
  expect_exact(base, q, r, 7, false, l2, 1e-4);
  udf_index_destroy(ix);  // frees the module, then the runtime
}

}  // namespace
