#!/usr/bin/env bash
# Device call: runtime_gpu_test's coarse-weights test with single-query
# searches (the direct schedule), from .bench/small2.tar.xz.
set -uo pipefail
tar -xJf .bench/small2.tar.xz
export UDF_TEST_MODULE_DIR=$PWD/.device/modules
mkdir -p "$OUT"
.device/bin/runtime_gpu_test --gtest_filter='*CoarseWeights*:*TinyBatches*:*DirectSchedule*' 2>&1 | tail -6 | tee "$OUT/check4.log"
