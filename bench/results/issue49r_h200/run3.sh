#!/bin/bash
# A (the staged runtime: no first-tile cut) against B (.bench/libB.xz: the
# first tile's offer cut by near_cut), alternated in one device call; both
# nearest_wide (issue 49).
set -u
D=/tmp/dev; rm -rf $D; mkdir -p $D/libB; tar -C $D -xJf .bench/dev.tar.xz --strip-components=1
xz -dc .bench/libB.xz > $D/libB/libudf_runtime.so.3
export UDF_TEST_MODULE_DIR=$D/modules
for L in lib libB; do LD_LIBRARY_PATH=$D/$L $D/bin/runtime_gpu_test --gtest_filter='*OnePassNearest*' 2>&1 | grep -E "^\[  (PASSED|FAILED)"; done
export UDF_PROFILE_BUILD=1
run() {  # lib rows lists
  echo "=== $1 rows $2 lists $3"
  LD_LIBRARY_PATH=$D/$1 timeout 170 $D/bin/search_bench $D/modules/bench.udfm --rows $2 --lists $3 --data overlap --elem f32 --metrics l2 \
    --batches 10000 --probes 32 --ks 10 --reps 3 --json $OUT/$1_$2_$3_$RANDOM.json 2>&1 | grep -E "nearest lists|^\| overlap \| f32 \| l2 \| [0-9.]+ \|" | cut -c1-150
}
for r in 1 2; do run lib 10000000 4096; run libB 10000000 4096; done
