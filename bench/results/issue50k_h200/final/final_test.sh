#!/bin/bash
# Issue 50, the two-group tiled fold: runtime_exact_test on this tree's build (its pack in .device/kernels).
cd "$(dirname "$0")/.."
tar xJf .bench/dev.tar.xz  # the exact test, its library, pack, artifacts and builtin.udfm
tmp=$(mktemp -d)
UDF_TEST_MODULE_DIR=$PWD/.device/modules UDF_CACHE_DIR=$tmp/udf-exact-cache timeout 400 .device/bin/runtime_exact_test > $OUT/runtime_exact_test.log 2>&1
echo "runtime_exact_test rc $?"; grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |tests ran" $OUT/runtime_exact_test.log | tail -14
