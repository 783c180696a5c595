#!/bin/bash
# 0a2b537's pack, the shipped fold (fin), and the pair as 4 rows x 8 queries a lane (x1).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
M=mod/exact_old.udfm,mod/exact_fin.udfm,mod/exact_x1.udfm
timeout 290 bin/exact_search_bench $M --batches 10000,100 --reps 5 --rounds 3 \
  --metrics weighted_l2:3,l1:2,linf:2 > $OUT/ab12.md 2> $OUT/ab12.log; echo "rc $?"
cat $OUT/ab12.md; tail -2 $OUT/ab12.log
