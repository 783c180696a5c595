#!/usr/bin/env bash
# Stages into .device/ (git-ignored) what the GPU machine needs to run the GPU
# tests without this project's build dependencies (no LLVM, no package
# registry there): the runtime GPU test binaries with this build's
# libudf_runtime, the test modules, the kernel pack, and a wheel of the Python
# package for the GPU machine's Python.
#
#   test/gpu/stage_device.sh [WHEEL | --no-wheel]   (then run test/gpu/device_suite.sh
#                                                   or test/gpu/sanitize.sh there, carrying .device)
#
# WHEEL defaults to the newest dist/udf-*-cp312-*.whl (make it with:
# scripts/build_wheels.py --python python3.12).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# The GPU test modules must hold every k bucket (not a CI build's k <= 32).
source test/gpu/require_full_modules.sh stage_device.sh
wheel=${1:-$(ls -t dist/udf-*-cp312-*.whl 2>/dev/null | head -n 1)}
[[ -f $wheel || $wheel == --no-wheel ]] || { echo "stage_device: no cp312 wheel (see the header of this script)" >&2; exit 2; }
rm -rf .device
mkdir -p .device/bin .device/lib .device/modules .device/wheel
cp build/test/runtime_gpu_test build/test/runtime_gpu_v2_test build/test/runtime_api_fuzz_test build/test/runtime_stress_test build/test/runtime_fault_test \
   build/test/runtime_shards_test build/test/runtime_wrapper_shards_test build/test/runtime_device_array_test \
   build/test/runtime_exact_test build/test/runtime_faiss_test build/test/runtime_cuvs_test \
   build/test/interop_test build/test/filter_bench \
   build/test/search_bench .device/bin/
# The tools, for the demo (scripts/demo-steps.sh with UDF_BUILD_DIR=.device):
# udf-link finds the kernel pack at bin/../share/udf/kernels.
cp build/bin/udfc build/bin/udf-link build/bin/udf-run .device/bin/
cp -L build/lib/libudf_runtime.so.[0-9]* .device/lib/   # found through the test binaries' RUNPATH $ORIGIN/../lib
# (.device/kernels for scan_check: the same files, hard links, which tar stores once)
mkdir -p .device/share/udf && cp -r build/share/udf/kernels .device/share/udf/
rm -rf .device/kernels && cp -rl .device/share/udf/kernels .device/kernels
cp build/test/modules/*.udfm .device/modules/
# The artifacts the run-time link tests link on the GPU machine (udf_module_link_ex).
mkdir -p .device/artifacts/prune
cp build/test/runtime_artifacts/*.udfa .device/artifacts/
cp build/test/runtime_artifacts/prune/*.udfa .device/artifacts/prune/
# runtime_exact_test links modules on demand from these (and the built-in ones).
mkdir -p .device/artifacts/v2 .device/artifacts/filters .device/artifacts/builtin
cp build/test/runtime_artifacts/v2/*.udfa .device/artifacts/v2/
cp build/test/runtime_artifacts/filters/*.udfa .device/artifacts/filters/
cp build/share/udf/metrics/*.udfa build/share/udf/filters/*.udfa .device/artifacts/builtin/
# lit, FileCheck, not and split-file (with the libraries the GPU machine may
# lack), for test/lit's tests that need a GPU (test/gpu/lit_gpu.sh).
mkdir -p .device/lit/bin .device/lit/lib .device/lit/python
llvm_tools=$(sed -n 's/^config.llvm_tools_dir = "\(.*\)"$/\1/p' build/test/lit/lit.site.cfg.py)
cp "$llvm_tools/FileCheck" "$llvm_tools/not" "$llvm_tools/split-file" .device/lit/bin/
for lib in $(ldd "$llvm_tools/FileCheck" "$llvm_tools/not" "$llvm_tools/split-file" | awk '/libz3|libzstd|libLLVM/ {print $3}' | sort -u); do
  cp -L "$lib" .device/lit/lib/
done
cp -r "$(python3 -c 'import lit, os; print(os.path.dirname(lit.__file__))')" .device/lit/python/
[[ $wheel == --no-wheel ]] || cp "$wheel" .device/wheel/
du -sh .device
