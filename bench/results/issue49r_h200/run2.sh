#!/bin/bash
# The build's nearest lists: nearest_wide against the 64-centroid kernel
# (--testing-paths 4096), alternated in one device call (issue 49).  Run
# from the repository root on the GPU machine, .bench/dev.tar.xz carried
# (test/gpu/stage_device.sh --no-wheel, then tar + xz of .device).
set -u
D=/tmp/dev; rm -rf $D; mkdir -p $D; tar -C $D -xJf .bench/dev.tar.xz --strip-components=1
export LD_LIBRARY_PATH=$D/lib UDF_TEST_MODULE_DIR=$D/modules
$D/bin/runtime_gpu_test --gtest_filter='*OnePassNearest*:*DeviceLists*' 2>&1 | grep -E "^\[  (PASSED|FAILED|  OK|SKIPPED)|Failure|error" | head -30
export UDF_PROFILE_BUILD=1
run() {  # label paths rows lists mesoclusters
  echo "=== $1 rows $3 lists $4 mesoclusters $5"
  timeout 170 $D/bin/search_bench $D/modules/bench.udfm --rows $3 --lists $4 --data overlap --elem f32 --metrics l2 \
    --batches 10000 --probes 32 --ks 10 --reps 5 --testing-paths $2 $([[ $5 != 0 ]] && echo --mesoclusters $5) \
    --json $OUT/$1_$3_$4_m$5_$RANDOM.json 2>&1 | grep -E "udf build|^\| overlap|balance" | cut -c1-150
}
run wide 0 1000000 1024 0; run narrow 4096 1000000 1024 0; run wide 0 1000000 4096 0
run narrow 4096 10000000 4096 0; run wide 0 10000000 4096 0
run wide 0 10000000 4096 64; run narrow 4096 10000000 4096 64
run narrow 4096 10000000 4096 0; run wide 0 10000000 4096 0
PATHS=0 bash bench/results/issue49r_h200/ncu.sh
