#!/bin/bash
# The shipped change (new: the sample's swaps prefetched; a balance round's
# grouping and hand-on on the host pool, the rows out of candidates through a
# heap) against 8d58136 (base), alternated: 10M x 128 overlap flat (three
# rounds), 10M in two levels and 1M flat (one round each) (issue 49).
set -u
D=/tmp/ab; rm -rf $D; mkdir -p $D; tar -C $D -xJf .bench/ab.tar.xz
export UDF_PROFILE_BUILD=1
i=0
run() {  # variant rows lists mesoclusters
  i=$((i + 1)); echo "=== $1 $2 x $3 m$4 ($i)"
  LD_LIBRARY_PATH=$D/$1 timeout 150 $D/bin/search_bench $D/modules/bench.udfm --rows $2 --lists $3 --data overlap --elem f32 --metrics l2 \
    --batches 10000 --probes 32 --ks 10 --reps 3 $([[ $4 != 0 ]] && echo --mesoclusters $4) --json $OUT/$i-$1.json > $OUT/$i-$1.log 2>&1
  grep -E "udf build|^\| overlap \| f32 \| l2 \| [0-9.]+ \|" $OUT/$i-$1.log | cut -c1-150
}
for r in 1 2 3; do run base 10000000 4096 0; run new 10000000 4096 0; done
run new 10000000 4096 64; run base 10000000 4096 64
run base 1000000 1024 0; run new 1000000 1024 0
