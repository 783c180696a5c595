#!/usr/bin/env bash
# Stages into .device/ (git-ignored) what the GPU machine needs to run the GPU
# tests without this project's build dependencies (no LLVM, no package
# registry there): the runtime GPU test binaries, the test modules, and a
# wheel of the Python package for the GPU machine's Python (which also
# provides libudf_runtime.so.1 to the test binaries).
#
#   test/gpu/stage_device.sh [WHEEL]     (then run test/gpu/device_suite.sh there,
#                                         carrying .device)
#
# WHEEL defaults to the newest dist/udf-*-cp312-*.whl under build/wheel-dist
# (make it with: python3.12 -m pip wheel . --no-build-isolation --no-deps -w build/wheel-dist).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
wheel=${1:-$(ls -t build/wheel-dist/udf-*-cp312-*.whl 2>/dev/null | head -n 1)}
[[ -f $wheel ]] || { echo "stage_device: no cp312 wheel (see the header of this script)" >&2; exit 2; }
rm -rf .device
mkdir -p .device/bin .device/modules .device/wheel
cp build/test/runtime_gpu_test build/test/interop_test .device/bin/   # they run against the wheel's runtime
cp build/test/modules/*.udfm .device/modules/
cp "$wheel" .device/wheel/
du -sh .device
