#!/bin/bash
# 0a2b537's pack, the shipped fold (fin), the halves loop with the partial half inside (w0), and two halves an iteration (w1).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
M=mod/exact_old.udfm,mod/exact_fin.udfm,mod/exact_w0.udfm,mod/exact_w1.udfm
timeout 290 bin/exact_search_bench $M --batches 10000,100 --reps 5 --rounds 3 \
  --metrics weighted_l2:3,l1:2,linf:2 > $OUT/ab11.md 2> $OUT/ab11.log; echo "rc $?"
cat $OUT/ab11.md; tail -2 $OUT/ab11.log
