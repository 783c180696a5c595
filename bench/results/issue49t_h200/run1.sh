#!/bin/bash
# The k-means' start (sample draw, pinned host buffers) on a thread of its
# own while the rows go up, against fada0dc's runtime (base), alternated:
# 10M x 128 overlap flat (three rounds) and 1M flat (issue 49).  Then the
# build and shard GPU tests on the new runtime.
set -u
D=/tmp/ab; rm -rf $D; mkdir -p $D; tar -C $D -xJf .bench/ab.tar.xz
export UDF_PROFILE_BUILD=1 UDF_TEST_MODULE_DIR=$D/modules
i=0
run() {  # variant rows lists
  i=$((i + 1)); echo "=== $1 $2 ($i)"
  LD_LIBRARY_PATH=$D/$1 timeout 150 $D/bin/search_bench $D/modules/bench.udfm --rows $2 --lists $3 --data overlap --elem f32 --metrics l2 \
    --batches 10000 --probes 32 --ks 10 --reps 3 --json $OUT/$i-$1.json > $OUT/$i-$1.log 2>&1
  grep -E "sample|stage the rows|^\| overlap \| f32 \| l2 \| [0-9.]+ \|" $OUT/$i-$1.log | cut -c1-150
}
for r in 1 2 3; do run new 10000000 4096; run base 10000000 4096; done
for r in 1 2; do run new 1000000 1024; run base 1000000 1024; done
unset UDF_PROFILE_BUILD
export LD_LIBRARY_PATH=$D/new
for t in runtime_gpu_test runtime_shards_test runtime_device_array_test; do
  echo "=== $t"; timeout 200 $D/bin/$t --gtest_brief=1 2>&1 | tail -4
done
