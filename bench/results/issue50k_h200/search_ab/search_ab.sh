#!/bin/bash
# Search benchmark: bench modules linked from 0a2b537's pack (old) and this tree's (fin), the same search_bench and
# runtime, alternated, two rounds: 1M x 128 overlap f32, built-in L2 and the weighted-L2 UDF, k 10, P32.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
for r in 1 2; do for v in old fin; do
  timeout 120 bin/search_bench mod/bench_$v.udfm --rows 1000000 --lists 1024 --data overlap --elem f32 \
    --metrics l2,weighted_l2 --batches 1,100,10000 --probes 32 --ks 10 > $OUT/search_${v}_$r.md 2> $OUT/search_${v}_$r.log
  echo "== $v round $r rc $?"; grep -E "^\|" $OUT/search_${v}_$r.md | head -20
done; done
