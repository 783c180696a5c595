#!/bin/bash
# The shipped fold (fin) against: lanes paired for 2-wavefront row loads (m1), the same with the offer
# threshold the least of the block's warps' k-th keys (m1t), and that threshold alone (t0).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
(while true; do nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader; sleep 0.5; done) > $OUT/clocks14.txt 2>&1 &
CL=$!
M=mod/exact_fin.udfm,mod/exact_m1.udfm,mod/exact_m1t.udfm,mod/exact_t0.udfm
timeout 400 bin/exact_search_bench $M --batches 10000,100 --reps 5 --rounds 3 \
  --metrics weighted_l2:3,l1:2,linf:2 > $OUT/ab14.md 2> $OUT/ab14.log; echo "rc $?"
kill $CL
cat $OUT/ab14.md; tail -3 $OUT/ab14.log
sort $OUT/clocks14.txt | uniq -c | sort -rn | head -4
