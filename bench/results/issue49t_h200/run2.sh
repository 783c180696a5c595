#!/bin/bash
# Tried: the flat k-means' first N iterations without the balanced
# assignment (UDF_EXP_FIRST_PLAIN=N in a copy of the runtime, not shipped),
# against the same runtime without it (cur), alternated; overlap and many
# families, 1M and 10M, recall at P16/24/32 (issue 49).
set -u
D=/tmp/ab2; rm -rf $D; mkdir -p $D; tar -C $D -xJf .bench/ab2.tar.xz
export UDF_PROFILE_BUILD=1 LD_LIBRARY_PATH=$D/exp
i=0
run() {  # label plain rows lists data
  i=$((i + 1)); echo "=== $1 $3 $5 ($i)"
  UDF_EXP_FIRST_PLAIN=$2 timeout 150 $D/bin/search_bench $D/modules/bench.udfm --rows $3 --lists $4 --data $5 --elem f32 --metrics l2 \
    --batches 10000 --probes 16,24,32 --ks 10 --reps 3 --json $OUT/$i-$1.json > $OUT/$i-$1.log 2>&1
  grep -E "balance \(host\)|^\| $5 \| f32 \| l2 \| [0-9.]+ \|" $OUT/$i-$1.log | cut -c1-150
  grep -E "^\| $5 \| f32 \| l2 \| 10000 \|" $OUT/$i-$1.log | awk -F'|' '{print "   P" $6 ": " $8 " ms, recall " $12}'
}
for r in 1 2; do run cur 0 10000000 4096 overlap; run plain1 1 10000000 4096 overlap; done
run cur 0 10000000 4096 many; run plain1 1 10000000 4096 many
run cur 0 1000000 1024 overlap; run plain1 1 1000000 1024 overlap
run cur 0 1000000 1024 many; run plain1 1 1000000 1024 many
