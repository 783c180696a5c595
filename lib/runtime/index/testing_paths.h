// Paths that give the same results as the default, chosen by the tests that
// compare them bit for bit (udf_testing_paths, capi/runtime_api.cpp and
// docs/runtime.md).  Process-wide; zero, the default, in normal use.
#pragma once

#include <atomic>
#include <cstdint>

namespace udf::rt {

enum TestingPath : std::uint32_t {
  kTestingPlainScan = 1u << 0,    // a monotone metric's plain scan everywhere (no scan choice)
  kTestingPruningScan = 1u << 1,  // its pruning scan everywhere (no scan choice)
  kTestingNoNearFirst = 1u << 2,  // a pruning scan's list-major schedule keeps the plain order
  kTestingNoTailMerge = 1u << 3,  // direct schedules merge with the merge kernel, not the scan's tail merge
  kTestingNoQueryBound = 1u << 4, // scans get no query bounds
  kTestingRestageRows = 1u << 5,  // a build copies its rows again for the placement, as when they do not fit
  kTestingKeysAssign = 1u << 6,   // a build's nearest lists come from the coarse probe's keys and selection
                                  // (inner product and cosine; L2 compares expanded distances either way)
  kTestingNoPeerReads = 1u << 7,  // a sharded build's placement reads no other device's memory (it stages
                                  // those rows again from the input, as where peer access is refused)
  kTestingNoTile = 1u << 8,       // exact search folds no item as a tile (ivf_flat_v1.h, TILED FOLD)
  kTestingNoCoarseShare = 1u << 9,  // every device of a sharded search probes the whole batch (shards/search.cpp)
  kTestingPlainSelect = 1u << 10,  // a batch's coarse selection by the select kernel only (index/coarse.cpp)
  kTestingNoSharedStaging = 1u << 11,  // each device of a sharded search stages its host queries itself
                                       // (shards/search.cpp)
  kTestingNarrowNearest = 1u << 12,    // a build's nearest lists by the 64-centroid kernel, however many
                                       // lists (index/coarse.cpp, nearest_lists)
};

inline std::atomic<std::uint32_t>& testing_paths_word() {
  static std::atomic<std::uint32_t> word{0};
  return word;
}
/// Whether the tests chose path p.
inline bool testing_path(TestingPath p) { return (testing_paths_word().load(std::memory_order_relaxed) & p) != 0; }

}  // namespace udf::rt
