#!/bin/bash
# The native GPU suite on this tree's build (per-entry background links; optional pruning scans).
cd "$(dirname "$0")/../../../.."
s=$(date +%s)
tar xJf .bench/dev.tar.xz
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
UDF_TEST_MODULE_DIR=$PWD/.device/modules timeout 200 .device/bin/runtime_gpu_test --gtest_brief=1 --gtest_filter='*OnDemand*:*RuntimeLink*' > $OUT/ondemand.log 2>&1
echo "ondemand rc $? at $(( $(date +%s) - s )) s"; tail -3 $OUT/ondemand.log
timeout 500 bash test/gpu/device_suite.sh --part native > $OUT/device_suite_native.log 2>&1
echo "device_suite rc $? at $(( $(date +%s) - s )) s"
grep -E "^===|passed|FAILED|PASSED|skipped" $OUT/device_suite_native.log | tail -40
