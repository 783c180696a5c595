#!/bin/bash
# A version that grouped a round's pending rows through group_by_label, then
# turned places into rows in one more pass (not shipped), against
# 8d58136 (base), alternated, 10M x 128 overlap flat, three rounds (issue 49).
set -u
D=/tmp/ab; rm -rf $D; mkdir -p $D; tar -C $D -xJf .bench/ab.tar.xz
export UDF_PROFILE_BUILD=1
i=0
run() {  # variant
  i=$((i + 1)); echo "=== $1 ($i)"
  LD_LIBRARY_PATH=$D/$1 timeout 150 $D/bin/search_bench $D/modules/bench.udfm --rows 10000000 --lists 4096 --data overlap --elem f32 --metrics l2 \
    --batches 10000 --probes 32 --ks 10 --reps 3 --json $OUT/$i-$1.json > $OUT/$i-$1.log 2>&1
  grep -E "balance|^\| overlap \| f32 \| l2 \| [0-9.]+ \|" $OUT/$i-$1.log | cut -c1-150
}
for r in 1 2 3; do run new; run base; done
