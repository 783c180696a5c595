#!/bin/bash
# Sharded build on the one-GPU build's paths: GPU tests and build times (issue 49).
set -u
D=/tmp/dev; rm -rf $D; mkdir -p $D; tar -C $D -xJf .devpack/b49/dev.tar.xz
cd $D
nvidia-smi --query-gpu=index,name --format=csv,noheader
echo "=== runtime_shards_test"; UDF_TEST_MODULE_DIR=$D/modules timeout 200 ./bin/runtime_shards_test --gtest_brief=1 2>&1 | grep -v "^\[   INFO" | tail -25
echo "=== runtime_wrapper_shards_test"; UDF_TEST_MODULE_DIR=$D/modules timeout 100 ./bin/runtime_wrapper_shards_test --gtest_brief=1 2>&1 | tail -4
export UDF_PROFILE_BUILD=1
for d in none 0 0,1; do
  echo "=== build, devices $d"
  args=""; [[ $d != none ]] && args="--devices $d --shard-layout vectors"
  timeout 150 ./bin/search_bench modules/bench.udfm --rows 20000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 10000 --probes 32 --ks 10 --reps 20 $args --json $OUT/build_$d.json 2>&1 | grep -E "udf build|^\| clustered" | cut -c1-200
done
