#!/bin/bash
# The committed build (the loads through row_chunk / centroid_chunk): the
# build and shard tests, then 10M x 128 overlap builds, wide against the
# 64-centroid kernel (--testing-paths 4096), alternated (issue 49).
set -u
D=/tmp/dev; rm -rf $D; mkdir -p $D; tar -C $D -xJf .bench/dev.tar.xz --strip-components=1
export LD_LIBRARY_PATH=$D/lib UDF_TEST_MODULE_DIR=$D/modules
$D/bin/runtime_gpu_test --gtest_brief=1 2>&1 | tail -3
$D/bin/runtime_shards_test --gtest_brief=1 2>&1 | tail -3
export UDF_PROFILE_BUILD=1
run() {  # label paths
  echo "=== $1"
  timeout 170 $D/bin/search_bench $D/modules/bench.udfm --rows 10000000 --lists 4096 --data overlap --elem f32 --metrics l2 \
    --batches 10000 --probes 32 --ks 10 --reps 3 --testing-paths $2 --json $OUT/$1_$RANDOM.json 2>&1 \
    | grep -E "nearest lists|^\| overlap \| f32 \| l2 \| [0-9.]+ \|" | cut -c1-150
}
run wide 0; run narrow 4096; run wide 0; run narrow 4096
