#!/bin/bash
# The k-means sample drawn with its swaps' targets prefetched (new) against
# the plain partial shuffle (base), alternated, 10M x 128 overlap flat, and
# one build by a copy of `new` that times the host's balanced assignment and
# the k-means update in parts (instr; not shipped) (issue 49).
set -u
D=/tmp/ab; rm -rf $D; mkdir -p $D; tar -C $D -xJf .bench/ab.tar.xz
nproc; lscpu | grep -E "Model name|^CPU\(s\)"
export UDF_PROFILE_BUILD=1
i=0
run() {  # variant
  i=$((i + 1)); echo "=== $1 ($i)"
  LD_LIBRARY_PATH=$D/$1 timeout 150 $D/bin/search_bench $D/modules/bench.udfm --rows 10000000 --lists 4096 --data overlap --elem f32 --metrics l2 \
    --batches 10000 --probes 32 --ks 10 --reps 3 --json $OUT/$i-$1.json > $OUT/$i-$1.log 2>&1
  grep -E "udf build|^\| overlap \| f32 \| l2 \| [0-9.]+ \|" $OUT/$i-$1.log | cut -c1-150
}
run base; run new; run base; run new; run instr
grep -E "^(SMP|BAL|UPD|BLB)" $OUT/5-instr.log | head -100 | cut -c1-150
