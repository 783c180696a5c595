#!/bin/bash
set -u
D=/tmp/dev; rm -rf $D; mkdir -p $D; tar -C $D -xJf .devpack/b49/dev.tar.xz
cd $D
echo "=== runtime_shards_test"; UDF_TEST_MODULE_DIR=$D/modules timeout 200 ./bin/runtime_shards_test --gtest_brief=1 2>&1 | grep -E "transport|FAIL|PASSED|tests from" | head -12
echo "=== runtime_wrapper_shards_test"; UDF_TEST_MODULE_DIR=$D/modules timeout 100 ./bin/runtime_wrapper_shards_test --gtest_brief=1 2>&1 | tail -2
export UDF_PROFILE_BUILD=1
for rep in 1 2; do for d in 0,1 none; do
  echo "=== build, devices $d, run $rep"
  args=""; [[ $d != none ]] && args="--devices $d --shard-layout vectors"
  timeout 150 ./bin/search_bench modules/bench.udfm --rows 20000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 1,10000 --probes 32 --ks 10 --reps 20 $args --json $OUT/b_${d/,/_}_$rep.json 2>&1 | grep -E "udf build|^\| clustered|transport" | cut -c1-160
done; done
