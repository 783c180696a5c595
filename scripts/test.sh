#!/usr/bin/env bash
# Sets up, builds and runs every test: the unit, lit, Python, package and
# fault tests (GPU tests skip with a printed reason where no GPU is present).
# Then it runs the unit and lit suites again under ASan + UBSan (the asan
# preset, clang-22; -fno-sanitize-recover) and every fuzz target for a bounded
# time on that build ($UDF_CI_FUZZ_SECONDS each, default 15, two at a time,
# after replaying every fixed defect's input; long runs: scripts/fuzz.sh,
# test/fuzz/README.md).  UDF_TEST_SANITIZERS=0 leaves that half out (about 20
# of CI's minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each part's end, in seconds from the start: where a slow run's time went.
phase() { echo "test.sh: $1 at $SECONDS s"; }
bash scripts/setup.sh
phase "set-up done"
# Without a GPU the GPU tests skip, so their modules are linked for k <= 32
# only (UDF_TEST_MODULES_MAX_K, test/unit/runtime_gpu.cmake): every module
# still links, in about a third of the time.  With a GPU: every k bucket.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  modules_max_k=""
else
  modules_max_k=32
fi
cmake --preset default -DUDF_TEST_MODULES_MAX_K="$modules_max_k"
# The builds link the test modules with udf-link, whose nvJitLink step has a
# 300 s default limit for users; on a busy 2-core machine (the ASan build's
# filters module) a link can pass it without anything being wrong, so the
# builds run without the limit (CI's own time limit still stops a hang).
UDF_COMPILE_TIMEOUT=0 cmake --build --preset default
phase "build done"
# ctest shows a test's output only on failure: say first why the GPU tests
# will skip here (they run, and must pass, where a GPU is present).
if ! (command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1); then
  echo "GPU tests skip on this machine; the reason they print:"
  ctest --preset default -R '^Fixture\.ModuleQuery$' --verbose 2>&1 | grep -A1 ': Skipped$' | tail -n 1 || true
fi
ctest --preset default
phase "tests done"
if [[ ${UDF_TEST_SANITIZERS:-1} == 1 ]]; then
  # The ASan build's test modules come from the default build's link cache
  # (the same nvJitLink makes the same cubins; lit tests still link for real).
  cmake --preset asan -DUDF_TEST_LINK_CACHE_DIR="$PWD/build/link-cache" -DUDF_TEST_MODULES_MAX_K="$modules_max_k"
  UDF_COMPILE_TIMEOUT=0 cmake --build --preset asan
  phase "ASan build done"
  ctest --preset asan
  phase "ASan tests done"
  bash scripts/fuzz.sh --build build-asan --seconds "${UDF_CI_FUZZ_SECONDS:-15}" --jobs 2
  phase "fuzz runs done"
fi
