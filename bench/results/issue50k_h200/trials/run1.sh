#!/bin/bash
# A/B: HEAD's pack (old) against the two-group tiled fold (new), then the reverse order.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
(while true; do nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader; sleep 0.5; done) > $OUT/clocks.txt 2>&1 &
CL=$!
export LD_LIBRARY_PATH=$PWD/lib
timeout 280 bin/exact_search_bench mod/exact_old.udfm,mod/exact_new.udfm --batches 100,10000 --reps 5 --rounds 2 \
  --metrics weighted_l2:3,l1:2,linf:2 > $OUT/ab1.md 2> $OUT/ab1.log; echo "rc $?"
cat $OUT/ab1.md; tail -3 $OUT/ab1.log
kill $CL; sort $OUT/clocks.txt | uniq -c | sort -rn | head -4
