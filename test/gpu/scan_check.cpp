// GPU check of the IVF-Flat kernel pack: for several variants and UDFs,
// build random lists in the pack's layout, compile the UDF and the entry
// wrapper with NVRTC, link them with the pack with nvJitLink -lto (as
// udf-link does), run scan + merge and compare with a float64 brute force
// over the probed lists.  Then time one large case.
//
//   test/gpu/build_and_run.sh [PACK_DIR]
//   scan_check PACK_DIR INCLUDE_DIR [--no-bench]
//
// Needs only the CUDA toolkit (driver API, NVRTC, nvJitLink) and std C++.
#include <cuda.h>
#include <nvJitLink.h>
#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "udf/kernels/ivf_flat_v1.h"

namespace {

// --- Errors --------------------------------------------------------------------

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

void check_cu(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  fail(std::string(what) + " failed: " + (name ? name : "?") + " (" + std::to_string(static_cast<int>(r)) + ")");
}
#define CU(call) check_cu((call), #call)

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read " + path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// --- Random numbers (deterministic per seed) -----------------------------------

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
};

// --- Element types --------------------------------------------------------------

enum class Elem { F32, F16, I8, U8 };
const char* elem_name(Elem e) {
  switch (e) {
    case Elem::F32: return "f32";
    case Elem::F16: return "f16";
    case Elem::I8: return "i8";
    case Elem::U8: return "u8";
  }
  return "?";
}
unsigned elem_bytes(Elem e) { return e == Elem::F32 ? 4 : e == Elem::F16 ? 2 : 1; }

// An exactly representable half (|v| = m / 1024, m <= 1024) to its bits.
uint16_t half_bits(float v) {
  if (v == 0.0f) return 0;
  uint32_t f;
  std::memcpy(&f, &v, 4);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const int exp = static_cast<int>((f >> 23) & 0xFF) - 127 + 15;
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | ((f >> 13) & 0x3FFu));
}

// A vector store in one element type; values() gives the exact values as double.
struct Values {
  Elem elem;
  std::vector<double> v;  // exact values
  void random(Rng& rng, size_t n) {
    v.resize(n);
    for (auto& x : v) {
      switch (elem) {
        case Elem::F32: x = static_cast<float>(rng.unit() * 2.0 - 1.0); break;
        case Elem::F16: x = (static_cast<int>(rng.below(2049)) - 1024) / 1024.0; break;
        case Elem::I8: x = static_cast<int>(rng.below(256)) - 128; break;
        case Elem::U8: x = rng.below(256); break;
      }
    }
  }
  void store(size_t i, uint8_t* dst) const {  // element i -> dst (elem_bytes bytes)
    switch (elem) {
      case Elem::F32: { const float f = static_cast<float>(v[i]); std::memcpy(dst, &f, 4); break; }
      case Elem::F16: { const uint16_t h = half_bits(static_cast<float>(v[i])); std::memcpy(dst, &h, 2); break; }
      case Elem::I8: { const int8_t c = static_cast<int8_t>(v[i]); std::memcpy(dst, &c, 1); break; }
      case Elem::U8: { const uint8_t c = static_cast<uint8_t>(v[i]); std::memcpy(dst, &c, 1); break; }
    }
  }
};

// --- A test case -----------------------------------------------------------------

struct Case {
  std::string name;
  Elem elem;
  bool acc_i32;
  bool max_order;
  unsigned k, dim, n_vectors, n_lists, n_queries, n_probes;
  std::string udf_source;  // defines extern "C" udf_metric (and udf_finalize when has_finalize)
  bool has_finalize;
  double acc_init;
  bool weights;  // capture 0: a float array of dim weights in [0.5, 1.5)
  // float64 reference of the same UDF
  std::function<double(double x, double y, double acc, unsigned d, const std::vector<double>& w)> metric;
  std::function<double(double acc)> finalize;  // applied when has_finalize
};

unsigned kmax_for(unsigned k) {
  for (unsigned c : {32u, 128u, 256u, 1024u})
    if (k <= c) return c;
  fail("k > 1024");
}

std::string variant_of(const Case& c) {
  return std::string("udf_ivf_scan_v1_") + elem_name(c.elem) + (c.acc_i32 ? "_i32_" : "_f32_") +
         (c.max_order ? "max" : "min") + "_k" + std::to_string(kmax_for(c.k));
}
std::string merge_of(const Case& c) {
  return std::string("udf_ivf_merge_v1_") + (c.max_order ? "max" : "min") + "_k" + std::to_string(kmax_for(c.k));
}
// The pack files (pack 1.7: one a family; docs/kernels.md) holding the case's
// scan variant and its merges.
std::vector<std::string> pack_files_of(const Case& c) {
  const char* order = c.max_order ? "max" : "min";
  return {std::string("scan_v1_") + elem_name(c.elem) + (c.acc_i32 ? "_i32_" : "_f32_") + order + ".ltoir",
          std::string("merge_v1_") + order + ".ltoir"};
}

// --- Host-side index and schedule --------------------------------------------------

struct Index {
  unsigned dim = 0, dim_padded = 0;
  std::vector<uint64_t> list_offsets;
  std::vector<uint32_t> list_sizes;
  std::vector<uint8_t> data;           // interleaved, see ivf_flat_v1.h
  std::vector<long long> ids;          // per slot (-7 for padding slots)
  std::vector<std::vector<uint32_t>> members;  // list -> vector indices
};

Index build_index(const Values& vecs, unsigned dim, unsigned n_lists, Rng& rng) {
  Index ix;
  ix.dim = dim;
  const unsigned eb = elem_bytes(vecs.elem), V = 16 / eb;
  ix.dim_padded = UDF_IVF_V1_DIM_PADDED(dim, eb);
  const size_t n = vecs.v.size() / dim;
  ix.members.resize(n_lists);
  // Skewed list sizes: some lists empty, some large.
  for (size_t i = 0; i < n; ++i) {
    uint32_t l = rng.below(n_lists);
    if (l % 7 == 3) l = (l + 1) % n_lists;  // every 7th list stays (nearly) empty
    if (rng.below(4) == 0) l = l % std::max(1u, n_lists / 8);  // first lists are larger
    ix.members[l].push_back(static_cast<uint32_t>(i));
  }
  uint64_t slots = 0;
  for (unsigned l = 0; l < n_lists; ++l) {
    ix.list_offsets.push_back(slots);
    ix.list_sizes.push_back(static_cast<uint32_t>(ix.members[l].size()));
    slots += (ix.members[l].size() + 31) / 32 * 32;
  }
  ix.data.assign(slots * ix.dim_padded * eb, 0);
  ix.ids.assign(slots, -7);
  for (unsigned l = 0; l < n_lists; ++l) {
    for (size_t j = 0; j < ix.members[l].size(); ++j) {
      const uint64_t s = ix.list_offsets[l] + j;
      const uint32_t vi = ix.members[l][j];
      ix.ids[s] = 1000000000LL + 3LL * vi;
      for (unsigned d = 0; d < dim; ++d) {
        const uint64_t e = (s / 32) * 32 * ix.dim_padded + (d / V) * 32 * V + (s % 32) * V + d % V;
        vecs.store(static_cast<size_t>(vi) * dim + d, &ix.data[e * eb]);
      }
    }
  }
  return ix;
}

struct Schedule {
  std::vector<udf_ivf_work_item_v1> items;
  std::vector<udf_ivf_pair_v1> pairs;
  std::vector<uint32_t> query_rows;  // n_queries + 1
  uint32_t queries_per_item = 1;
  uint64_t tile_bytes = 0;     // bytes of list data the items read (each item once)
  uint64_t per_query_bytes = 0;  // bytes a per-(query, probe) scan would read
};

// List-major: each probed list's queries in chunks of qpi, each list split into
// tiles of tile_groups groups when there would be too few items for the GPU.
Schedule build_schedule(const Index& ix, const std::vector<std::vector<uint32_t>>& probes, unsigned qpi, unsigned n_sms,
                        unsigned elem_size) {
  Schedule s;
  const size_t nq = probes.size();
  std::vector<std::vector<uint32_t>> by_list(ix.list_sizes.size());
  for (uint32_t q = 0; q < nq; ++q)
    for (uint32_t l : probes[q]) by_list[l].push_back(q);
  size_t base_items = 0;
  uint64_t probed_groups = 0;
  for (size_t l = 0; l < by_list.size(); ++l) {
    base_items += (by_list[l].size() + qpi - 1) / qpi;
    probed_groups += (ix.list_sizes[l] + 31) / 32 * ((by_list[l].size() + qpi - 1) / qpi);
  }
  const uint64_t target = 4ull * n_sms;
  uint32_t tile_groups = 0xFFFFFFFFu;
  if (base_items < target && probed_groups > 0)
    tile_groups = static_cast<uint32_t>(std::max<uint64_t>(4, (probed_groups + target - 1) / target));
  const uint64_t vec_bytes = static_cast<uint64_t>(ix.dim_padded) * elem_size;

  std::vector<uint32_t> rows_of(nq, 0);
  struct Pending { uint32_t query; uint32_t item; };
  std::vector<Pending> pend;
  for (uint32_t l = 0; l < by_list.size(); ++l) {
    const auto& qs = by_list[l];
    const uint32_t groups = (ix.list_sizes[l] + 31) / 32;
    s.per_query_bytes += qs.size() * static_cast<uint64_t>(ix.list_sizes[l]) * vec_bytes;
    for (size_t c = 0; c < qs.size(); c += qpi) {
      const uint32_t cnt = static_cast<uint32_t>(std::min<size_t>(qpi, qs.size() - c));
      uint32_t g = 0;
      do {
        const uint32_t ge = tile_groups == 0xFFFFFFFFu ? 0xFFFFFFFFu : std::min(groups, g + tile_groups);
        udf_ivf_work_item_v1 it{l, g, ge, 0, cnt, 0};
        const uint32_t item = static_cast<uint32_t>(s.items.size());
        s.items.push_back(it);
        for (uint32_t j = 0; j < cnt; ++j) {
          pend.push_back({qs[c + j], item});
          ++rows_of[qs[c + j]];
        }
        s.tile_bytes += static_cast<uint64_t>(std::min(groups, ge) - g) * 32 * vec_bytes;
        g = ge;
      } while (g < groups);
    }
  }
  s.query_rows.assign(nq + 1, 0);
  for (size_t q = 0; q < nq; ++q) s.query_rows[q + 1] = s.query_rows[q] + rows_of[q];
  std::vector<uint32_t> next(s.query_rows.begin(), s.query_rows.end() - 1);
  // pairs of an item are contiguous: pend is already grouped by item.
  for (auto& it : s.items) it.pair_begin = 0xFFFFFFFFu;
  for (const auto& p : pend) {
    auto& it = s.items[p.item];
    if (it.pair_begin == 0xFFFFFFFFu) it.pair_begin = static_cast<uint32_t>(s.pairs.size());
    s.pairs.push_back({p.query, next[p.query]++});
  }
  s.queries_per_item = qpi;
  return s;
}

std::vector<std::vector<uint32_t>> random_probes(Rng& rng, size_t nq, unsigned n_lists, unsigned n_probes) {
  std::vector<std::vector<uint32_t>> p(nq);
  std::vector<uint32_t> perm(n_lists);
  for (auto& row : p) {
    std::iota(perm.begin(), perm.end(), 0u);
    for (unsigned i = 0; i < n_probes; ++i) std::swap(perm[i], perm[i + rng.below(n_lists - i)]);
    row.assign(perm.begin(), perm.begin() + n_probes);
  }
  return p;
}

// --- Compile and link like udf-link -------------------------------------------------

struct Toolchain {
  std::string include_dir, pack_dir;
  int cc_major = 0, cc_minor = 0;
};

std::string nvrtc_ltoir(const Toolchain& tc, const std::string& src, const char* name) {
  const std::string abi = slurp(tc.include_dir + "/udf/abi/metric_v1.h");
  const std::string kern = slurp(tc.include_dir + "/udf/kernels/ivf_flat_v1.h");
  const char* hdrs[] = {abi.c_str(), kern.c_str()};
  const char* names[] = {"udf/abi/metric_v1.h", "udf/kernels/ivf_flat_v1.h"};
  nvrtcProgram p = nullptr;
  if (nvrtcCreateProgram(&p, src.c_str(), name, 2, hdrs, names) != NVRTC_SUCCESS) fail("nvrtcCreateProgram");
  const std::string arch = "-arch=compute_" + std::to_string(tc.cc_major * 10 + tc.cc_minor);
  const std::string include = "--include-path=" + tc.include_dir;  // the headers those two include (filter_v1.h, metric_v2.h)
  const char* opts[] = {arch.c_str(), "-dlto", "-rdc=true", "-std=c++17", include.c_str()};
  const nvrtcResult r = nvrtcCompileProgram(p, 5, opts);
  size_t n = 0;
  nvrtcGetProgramLogSize(p, &n);
  std::string log(n, '\0');
  nvrtcGetProgramLog(p, log.data());
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&p);
    fail(std::string("NVRTC: ") + name + ":\n" + log);
  }
  nvrtcGetLTOIRSize(p, &n);
  std::string out(n, '\0');
  nvrtcGetLTOIR(p, out.data());
  nvrtcDestroyProgram(&p);
  return out;
}

std::string jl_log(nvJitLinkHandle h) {
  size_t n = 0;
  nvJitLinkGetErrorLogSize(h, &n);
  std::string s(n, '\0');
  if (n) nvJitLinkGetErrorLog(h, s.data());
  while (!s.empty() && (s.back() == '\0' || s.back() == '\n')) s.pop_back();
  return s;
}

std::string link_cubin(const Toolchain& tc, const std::vector<std::string>& pack_files,
                       const std::vector<std::string>& kernels, const std::string& udf, const std::string& wrapper) {
  std::vector<std::string> opts = {"-arch=sm_" + std::to_string(tc.cc_major * 10 + tc.cc_minor), "-lto"};
  for (const auto& k : kernels) opts.push_back("-kernels-used=" + k);
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  nvJitLinkHandle h = nullptr;
  if (nvJitLinkCreate(&h, static_cast<uint32_t>(argv.size()), argv.data()) != NVJITLINK_SUCCESS) fail("nvJitLinkCreate");
  std::vector<std::string> packs;
  for (const auto& f : pack_files) packs.push_back(slurp(tc.pack_dir + "/" + f));
  std::vector<std::pair<const char*, const std::string*>> in;
  for (std::size_t i = 0; i < packs.size(); ++i) in.push_back({pack_files[i].c_str(), &packs[i]});
  in.push_back({"udf", &udf});
  in.push_back({"entry", &wrapper});
  for (const auto& [name, data] : in)
    if (nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, data->data(), data->size(), name) != NVJITLINK_SUCCESS) {
      const std::string log = jl_log(h);
      nvJitLinkDestroy(&h);
      fail(std::string("nvJitLinkAddData ") + name + ": " + log);
    }
  const nvJitLinkResult r = nvJitLinkComplete(h);
  const std::string log = jl_log(h);
  size_t n = 0;
  if (r != NVJITLINK_SUCCESS || nvJitLinkGetLinkedCubinSize(h, &n) != NVJITLINK_SUCCESS || n == 0) {
    nvJitLinkDestroy(&h);
    fail("nvJitLink: " + log);
  }
  std::string cubin(n, '\0');
  nvJitLinkGetLinkedCubin(h, cubin.data());
  nvJitLinkDestroy(&h);
  return cubin;
}

std::string wrapper_source(const Case& c, const std::string& entry) {
  const char* acc = c.acc_i32 ? "int32_t" : "float";
  char buf[1024];
  std::string s = "#include <udf/kernels/ivf_flat_v1.h>\n";
  std::snprintf(buf, sizeof buf, "extern \"C\" __device__ %s udf_metric(%s x, %s y, %s acc, const udf_ctx_v1 *ctx);\n", acc,
                acc, acc, acc);
  s += buf;
  if (c.has_finalize) {
    std::snprintf(buf, sizeof buf, "extern \"C\" __device__ float udf_finalize(%s acc, const udf_ctx_v1 *ctx);\n", acc);
    s += buf;
  }
  std::snprintf(buf, sizeof buf,
                "extern \"C\" __global__ void __launch_bounds__(%d) %s(udf_ivf_scan_args_v1 args) { %s(&args, &udf_metric, %s, nullptr); }\n",
                UDF_IVF_V1_BLOCK_THREADS, entry.c_str(), variant_of(c).c_str(), c.has_finalize ? "&udf_finalize" : "nullptr");
  return s + buf;
}

struct Module {
  CUlibrary lib = nullptr;
  CUfunction scan = nullptr, merge = nullptr;
  double link_s = 0;
  ~Module() {
    if (lib) cuLibraryUnload(lib);
  }
};

void load_module(const Toolchain& tc, const Case& c, Module& m) {
  const std::string entry = "udf_entry";
  const auto t0 = std::chrono::steady_clock::now();
  const std::string udf = nvrtc_ltoir(tc, "#include <udf/abi/metric_v1.h>\n" + c.udf_source, "udf.cu");
  const std::string wrap = nvrtc_ltoir(tc, wrapper_source(c, entry), "entry.cu");
  const std::string cubin = link_cubin(tc, pack_files_of(c), {entry, merge_of(c)}, udf, wrap);
  m.link_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CU(cuLibraryLoadData(&m.lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel ks = nullptr, km = nullptr;
  CU(cuLibraryGetKernel(&ks, m.lib, entry.c_str()));
  CU(cuLibraryGetKernel(&km, m.lib, merge_of(c).c_str()));
  CU(cuKernelGetFunction(&m.scan, ks));
  CU(cuKernelGetFunction(&m.merge, km));
}

// --- Device buffers ----------------------------------------------------------------

struct DevBuf {
  CUdeviceptr p = 0;
  size_t n = 0;
  DevBuf() = default;
  explicit DevBuf(size_t bytes) : n(bytes) { CU(cuMemAlloc(&p, std::max<size_t>(bytes, 16))); }
  template <class T> static DevBuf of(const std::vector<T>& v) {
    DevBuf b(v.size() * sizeof(T));
    if (!v.empty()) CU(cuMemcpyHtoD(b.p, v.data(), v.size() * sizeof(T)));
    return b;
  }
  DevBuf(DevBuf&& o) noexcept : p(o.p), n(o.n) { o.p = 0; }
  DevBuf& operator=(DevBuf&& o) noexcept {
    std::swap(p, o.p);
    std::swap(n, o.n);
    return *this;
  }
  ~DevBuf() {
    if (p) cuMemFree(p);
  }
  void poison() const { CU(cuMemsetD8(p, 0xFF, std::max<size_t>(n, 16))); }
  void* ptr() const { return reinterpret_cast<void*>(p); }
};

struct Run {
  std::vector<float> dists;
  std::vector<long long> ids;
  float ms = 0;
};

struct Device {
  CUdevice dev = 0;
  int n_sms = 0, smem_optin = 0;
};

// Uploads one index + queries + schedule, runs scan + merge `reps` times.
Run run_search(const Device& d, const Module& m, const Case& c, const Index& ix, const Values& queries,
               const Schedule& s, const std::vector<float>& weights, int reps) {
  const unsigned eb = elem_bytes(c.elem);
  std::vector<uint8_t> qbytes(queries.v.size() * eb);
  for (size_t i = 0; i < queries.v.size(); ++i) queries.store(i, &qbytes[i * eb]);
  const size_t nq = s.query_rows.size() - 1;
  const size_t n_rows = s.query_rows.back();
  DevBuf data = DevBuf::of(ix.data), offs = DevBuf::of(ix.list_offsets), sizes = DevBuf::of(ix.list_sizes),
         ids = DevBuf::of(ix.ids), qd = DevBuf::of(qbytes), items = DevBuf::of(s.items), pairs = DevBuf::of(s.pairs),
         rows = DevBuf::of(s.query_rows), w = DevBuf::of(weights);
  DevBuf cd(n_rows * c.k * 4), cs(n_rows * c.k * 4), od(nq * c.k * 4), oi(nq * c.k * 8);
  cd.poison();
  cs.poison();
  od.poison();
  oi.poison();

  udf_ivf_scan_args_v1 a;
  std::memset(&a, 0, sizeof a);
  a.list_data = data.ptr();
  a.list_offsets = reinterpret_cast<const uint64_t*>(offs.p);
  a.list_sizes = reinterpret_cast<const uint32_t*>(sizes.p);
  a.queries = qd.ptr();
  a.items = reinterpret_cast<const udf_ivf_work_item_v1*>(items.p);
  a.pairs = reinterpret_cast<const udf_ivf_pair_v1*>(pairs.p);
  a.cand_dists = reinterpret_cast<float*>(cd.p);
  a.cand_slots = reinterpret_cast<uint32_t*>(cs.p);
  a.query_stride = c.dim;
  a.n_items = static_cast<uint32_t>(s.items.size());
  a.dim = c.dim;
  a.dim_padded = ix.dim_padded;
  a.k = c.k;
  a.queries_per_item = s.queries_per_item;
  if (c.acc_i32) {
    const int32_t v = static_cast<int32_t>(c.acc_init);
    std::memcpy(&a.acc_init, &v, 4);
  } else {
    const float v = static_cast<float>(c.acc_init);
    std::memcpy(&a.acc_init, &v, 4);
  }
  a.n_captures = c.weights ? 1 : 0;
  if (c.weights) a.captures[0].ptr = w.ptr();

  udf_ivf_merge_args_v1 ma;
  std::memset(&ma, 0, sizeof ma);
  ma.cand_dists = a.cand_dists;
  ma.cand_slots = a.cand_slots;
  ma.query_rows = reinterpret_cast<const uint32_t*>(rows.p);
  ma.ids = reinterpret_cast<const long long*>(ids.p);
  ma.out_dists = reinterpret_cast<float*>(od.p);
  ma.out_ids = reinterpret_cast<long long*>(oi.p);
  ma.n_queries = static_cast<uint32_t>(nq);
  ma.k = c.k;

  const unsigned S = UDF_IVF_V1_SORT_CAPACITY(kmax_for(c.k));
  const unsigned smem = UDF_IVF_SCAN_V1_SMEM_BYTES(s.queries_per_item, S, ix.dim_padded);
  const unsigned msmem = UDF_IVF_MERGE_V1_SMEM_BYTES(S);
  if (smem > static_cast<unsigned>(d.smem_optin)) fail("scan needs " + std::to_string(smem) + " bytes of shared memory");
  CU(cuFuncSetAttribute(m.scan, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(smem)));
  CU(cuFuncSetAttribute(m.merge, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(msmem)));

  CUevent e0, e1;
  CU(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  void* sp[] = {&a};
  void* mp[] = {&ma};
  auto launch = [&] {
    if (!s.items.empty()) CU(cuLaunchKernel(m.scan, a.n_items, 1, 1, UDF_IVF_V1_BLOCK_THREADS, 1, 1, smem, nullptr, sp, nullptr));
    CU(cuLaunchKernel(m.merge, static_cast<unsigned>(nq), 1, 1, UDF_IVF_V1_BLOCK_THREADS, 1, 1, msmem, nullptr, mp, nullptr));
  };
  launch();  // checked run (outputs were poisoned)
  CU(cuCtxSynchronize());
  Run r;
  r.dists.resize(nq * c.k);
  r.ids.resize(nq * c.k);
  CU(cuMemcpyDtoH(r.dists.data(), od.p, r.dists.size() * 4));
  CU(cuMemcpyDtoH(r.ids.data(), oi.p, r.ids.size() * 8));
  if (reps > 0) {
    CU(cuEventRecord(e0, nullptr));
    for (int i = 0; i < reps; ++i) launch();
    CU(cuEventRecord(e1, nullptr));
    CU(cuEventSynchronize(e1));
    CU(cuEventElapsedTime(&r.ms, e0, e1));
    r.ms /= static_cast<float>(reps);
  }
  cuEventDestroy(e0);
  cuEventDestroy(e1);
  return r;
}

// --- Reference and comparison ----------------------------------------------------------

// Returns "" when the GPU result matches the float64 brute force over the probed lists.
std::string compare(const Case& c, const Index& ix, const Values& vecs, const Values& queries,
                    const std::vector<std::vector<uint32_t>>& probes, const std::vector<double>& w, const Run& r,
                    size_t check_queries) {
  const bool mx = c.max_order;
  const double worst = mx ? -INFINITY : INFINITY;
  for (size_t q = 0; q < check_queries; ++q) {
    std::map<long long, double> ref;  // id -> distance
    for (uint32_t l : probes[q])
      for (uint32_t vi : ix.members[l]) {
        double acc = c.acc_init;
        for (unsigned d = 0; d < c.dim; ++d)
          acc = c.metric(vecs.v[static_cast<size_t>(vi) * c.dim + d], queries.v[q * c.dim + d], acc, d, w);
        ref[1000000000LL + 3LL * vi] = c.has_finalize ? c.finalize(acc) : acc;
      }
    std::vector<double> sorted;
    for (const auto& [id, dist] : ref) sorted.push_back(dist);
    std::sort(sorted.begin(), sorted.end(), [&](double x, double y) { return mx ? x > y : x < y; });
    const size_t expect = std::min<size_t>(c.k, sorted.size());
    const double kth = expect ? sorted[expect - 1] : worst;
    auto tol = [](double v) { return 2e-4 * (1.0 + std::fabs(v)); };
    std::vector<long long> seen;
    for (size_t i = 0; i < c.k; ++i) {
      const long long id = r.ids[q * c.k + i];
      const double got = r.dists[q * c.k + i];
      char msg[256];
      if (i >= expect) {
        if (id != -1 || got != worst) {
          std::snprintf(msg, sizeof msg, "query %zu rank %zu: expected empty (-1), got id %lld dist %g", q, i, id, got);
          return msg;
        }
        continue;
      }
      auto it = ref.find(id);
      if (it == ref.end()) {
        std::snprintf(msg, sizeof msg, "query %zu rank %zu: id %lld is not a vector of a probed list", q, i, id);
        return msg;
      }
      if (std::fabs(it->second - got) > tol(it->second)) {
        std::snprintf(msg, sizeof msg, "query %zu rank %zu: id %lld distance %.9g, reference %.9g", q, i, id, got, it->second);
        return msg;
      }
      if (std::fabs(sorted[i] - got) > tol(sorted[i])) {
        std::snprintf(msg, sizeof msg, "query %zu rank %zu: distance %.9g, reference rank distance %.9g", q, i, got, sorted[i]);
        return msg;
      }
      if (mx ? it->second < kth - tol(kth) : it->second > kth + tol(kth)) {
        std::snprintf(msg, sizeof msg, "query %zu rank %zu: id %lld (%.9g) is not in the top %u (k-th %.9g)", q, i, id, got, c.k, kth);
        return msg;
      }
      seen.push_back(id);
    }
    std::sort(seen.begin(), seen.end());
    if (std::adjacent_find(seen.begin(), seen.end()) != seen.end()) return "query " + std::to_string(q) + ": duplicate id";
  }
  return "";
}

// --- The cases ---------------------------------------------------------------------------

std::vector<Case> cases() {
  std::vector<Case> v;
  auto l2 = [](double x, double y, double acc, unsigned, const std::vector<double>&) { return acc + (x - y) * (x - y); };
  auto ip = [](double x, double y, double acc, unsigned, const std::vector<double>&) { return acc + x * y; };
  const std::string l2f = R"(extern "C" __device__ float udf_metric(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y; return acc + d * d; })";
  const std::string ipf = R"(extern "C" __device__ float udf_metric(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  return acc + x * y; })";
  const std::string l2i = R"(extern "C" __device__ int32_t udf_metric(int32_t x, int32_t y, int32_t acc, const udf_ctx_v1 *ctx) {
  int32_t d = x - y; return acc + d * d; })";
  const std::string ipi = R"(extern "C" __device__ int32_t udf_metric(int32_t x, int32_t y, int32_t acc, const udf_ctx_v1 *ctx) {
  return acc + x * y; })";
  const std::string wl2 = R"(extern "C" __device__ float udf_metric(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y; return acc + ((const float *)ctx->captures[0].ptr)[ctx->dim] * d * d; })";
  const std::string l1 = R"(extern "C" __device__ float udf_metric(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  return acc + fabsf(x - y); })";
  const std::string sqrt_fin = R"(
extern "C" __device__ float udf_finalize(float acc, const udf_ctx_v1 *ctx) { return sqrtf(acc); })";
  const std::string sqrt_fin_i = R"(
extern "C" __device__ float udf_finalize(int32_t acc, const udf_ctx_v1 *ctx) { return sqrtf((float)acc); })";
  auto sq = [](double a) { return std::sqrt(a); };

  //        name                                  elem       i32    max    k   dim  nvec  lists nq probes
  v.push_back({"f32 L2 min k=10 dim=100", Elem::F32, false, false, 10, 100, 20000, 64, 20, 8, l2f, false, 0, false, l2, {}});
  v.push_back({"f32 IP max k=100 dim=129", Elem::F32, false, true, 100, 129, 20000, 64, 20, 8, ipf, false, 0, false, ip, {}});
  v.push_back({"f32 L2 min k=1024 dim=3 (fewer than k)", Elem::F32, false, false, 1024, 3, 3000, 64, 10, 8, l2f, false, 0, false, l2, {}});
  v.push_back({"f16 L2+sqrt min k=32 dim=3", Elem::F16, false, false, 32, 3, 20000, 64, 20, 8, l2f + sqrt_fin, true, 0, false, l2, sq});
  v.push_back({"f16 IP max k=200 dim=129", Elem::F16, false, true, 200, 129, 20000, 32, 12, 6, ipf, false, 0, false, ip, {}});
  v.push_back({"i8/i32 L2+sqrt min k=50 dim=100 (ties)", Elem::I8, true, false, 50, 100, 20000, 64, 20, 8, l2i + sqrt_fin_i, true, 0, false, l2, sq});
  v.push_back({"i8/i32 IP max k=10 dim=3 (ties)", Elem::I8, true, true, 10, 3, 20000, 64, 20, 8, ipi, false, 0, false, ip, {}});
  v.push_back({"i8/f32 L1 init=1 min k=128 dim=17", Elem::I8, false, false, 128, 17, 20000, 64, 20, 8, l1, false, 1.0, false,
               [](double x, double y, double acc, unsigned, const std::vector<double>&) { return acc + std::fabs(x - y); }, {}});
  v.push_back({"u8/i32 L2 min k=256 dim=64", Elem::U8, true, false, 256, 64, 20000, 64, 20, 8, l2i, false, 0, false, l2, {}});
  v.push_back({"u8/f32 weighted L2 (capture) min k=1024 dim=129", Elem::U8, false, false, 1024, 129, 30000, 32, 8, 8, wl2, false, 0, true,
               [](double x, double y, double acc, unsigned d, const std::vector<double>& w) { return acc + w[d] * (x - y) * (x - y); }, {}});
  v.push_back({"u8/f32 weighted L2 (capture) max k=1000 dim=3", Elem::U8, false, true, 1000, 3, 30000, 32, 8, 8, wl2, false, 0, true,
               [](double x, double y, double acc, unsigned d, const std::vector<double>& w) { return acc + w[d] * (x - y) * (x - y); }, {}});
  return v;
}

int run_cases(const Toolchain& tc, const Device& dev, int& passed, int& failed) {
  for (const Case& c : cases()) {
    try {
      Module m;
      load_module(tc, c, m);
      for (uint64_t seed : {1u, 2u}) {
        for (unsigned qpi : {1u, 8u}) {
          Rng rng(seed * 1000 + c.dim * 7 + c.k);
          Values vecs{c.elem, {}}, queries{c.elem, {}};
          vecs.random(rng, static_cast<size_t>(c.n_vectors) * c.dim);
          queries.random(rng, static_cast<size_t>(c.n_queries) * c.dim);
          std::vector<double> w;
          std::vector<float> wf;
          for (unsigned d = 0; d < c.dim; ++d) {
            wf.push_back(static_cast<float>(0.5 + rng.unit()));
            w.push_back(wf.back());
          }
          const Index ix = build_index(vecs, c.dim, c.n_lists, rng);
          const auto probes = random_probes(rng, c.n_queries, c.n_lists, c.n_probes);
          const unsigned kmax = kmax_for(c.k);
          const unsigned q = std::min(qpi, static_cast<unsigned>(kmax <= 256 ? 8 : 2));
          const Schedule s = build_schedule(ix, probes, q, dev.n_sms, elem_bytes(c.elem));
          const Run r = run_search(dev, m, c, ix, queries, s, wf, 0);
          const std::string why = compare(c, ix, vecs, queries, probes, w, r, c.n_queries);
          std::printf("%s: %s [%s, seed %llu, %u queries/item, %zu items] (link %.2f s)%s%s\n", why.empty() ? "PASS" : "FAIL",
                      c.name.c_str(), variant_of(c).c_str(), static_cast<unsigned long long>(seed), q, s.items.size(), m.link_s,
                      why.empty() ? "" : ": ", why.c_str());
          (why.empty() ? passed : failed)++;
        }
      }
    } catch (const std::exception& e) {
      std::printf("FAIL: %s: %s\n", c.name.c_str(), e.what());
      ++failed;
    }
  }
  return failed;
}

void bench(const Toolchain& tc, const Device& dev, int& passed, int& failed) {
  Case c{"bench f32 L2 min k=10 dim=128", Elem::F32, false, false, 10, 128, 1000000, 1024, 0, 32, "", false, 0, false,
         [](double x, double y, double acc, unsigned, const std::vector<double>&) { return acc + (x - y) * (x - y); }, {}};
  c.udf_source = R"(extern "C" __device__ float udf_metric(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y; return acc + d * d; })";
  Module m;
  load_module(tc, c, m);
  Rng rng(42);
  Values vecs{c.elem, {}};
  vecs.random(rng, static_cast<size_t>(c.n_vectors) * c.dim);
  const Index ix = build_index(vecs, c.dim, c.n_lists, rng);
  std::printf("bench: 1M x 128 f32, 1024 lists, 32 probes, k=10; link %.2f s\n", m.link_s);
  for (unsigned batch : {1u, 100u, 10000u}) {
    c.n_queries = batch;
    Values queries{c.elem, {}};
    queries.random(rng, static_cast<size_t>(batch) * c.dim);
    const auto probes = random_probes(rng, batch, c.n_lists, c.n_probes);
    for (unsigned qpi : {1u, 8u}) {
      const auto t0 = std::chrono::steady_clock::now();
      const Schedule s = build_schedule(ix, probes, qpi, dev.n_sms, 4);
      const double sched_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const Run r = run_search(dev, m, c, ix, queries, s, {}, batch >= 10000 ? 5 : 50);
      const std::string why = compare(c, ix, vecs, queries, probes, {}, r, std::min<size_t>(batch, 3));
      std::printf("%s: bench batch %5u, %u queries/item: %9.3f ms (scan+merge), %6zu items; per-query bytes %8.2f GB -> %7.1f GB/s; "
                  "tile bytes %7.2f GB -> %7.1f GB/s; %.0f QPS; host schedule %.1f ms%s%s\n",
                  why.empty() ? "PASS" : "FAIL", batch, qpi, r.ms, s.items.size(), s.per_query_bytes / 1e9,
                  s.per_query_bytes / 1e6 / r.ms, s.tile_bytes / 1e9, s.tile_bytes / 1e6 / r.ms, batch / (r.ms / 1e3), sched_ms,
                  why.empty() ? "" : ": ", why.c_str());
      (why.empty() ? passed : failed)++;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: scan_check PACK_DIR INCLUDE_DIR [--no-bench]\n");
    return 2;
  }
  int passed = 0, failed = 0;
  try {
    Toolchain tc;
    tc.pack_dir = argv[1];
    tc.include_dir = argv[2];
    const bool do_bench = !(argc > 3 && std::strcmp(argv[3], "--no-bench") == 0);
    CU(cuInit(0));
    Device dev;
    CU(cuDeviceGet(&dev.dev, 0));
    CUcontext ctx = nullptr;
    CU(cuDevicePrimaryCtxRetain(&ctx, dev.dev));
    CU(cuCtxSetCurrent(ctx));
    CU(cuDeviceGetAttribute(&tc.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev.dev));
    CU(cuDeviceGetAttribute(&tc.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev.dev));
    CU(cuDeviceGetAttribute(&dev.n_sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev.dev));
    CU(cuDeviceGetAttribute(&dev.smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev.dev));
    char name[256] = {};
    cuDeviceGetName(name, sizeof name, dev.dev);
    std::printf("device: %s, sm_%d%d, %d SMs\n", name, tc.cc_major, tc.cc_minor, dev.n_sms);
    run_cases(tc, dev, passed, failed);
    if (do_bench) bench(tc, dev, passed, failed);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    ++failed;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
