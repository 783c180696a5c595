#!/bin/bash
# x2 call 1: the native GPU suite (shards on {0,1} too), then the shared-coarse A/B on 20M.
set -u
cd "$(dirname "$0")/.."
t0=$(date +%s)
tar xJf .bench/dev.tar.xz
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
timeout 420 bash test/gpu/device_suite.sh --part native > $OUT/device_suite_native.log 2>&1
echo "suite rc $? after $(( $(date +%s) - t0 )) s"
grep -E "^=== .*: (ok|FAILED)|PASSED|FAILED|SKIPPED|passed|failed" $OUT/device_suite_native.log | tail -60
