#!/bin/bash
# HEAD pack, c0, d0 and d1 (the halves trade places by XOR), batch 10k, three rounds.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
M=mod/exact_old.udfm,mod/exact_c0.udfm,mod/exact_d0.udfm,mod/exact_d1.udfm
timeout 290 bin/exact_search_bench $M --batches 10000 --reps 5 --rounds 3 \
  --metrics weighted_l2:3,l1:2,linf:2 > $OUT/ab7.md 2> $OUT/ab7.log; echo "rc $?"
cat $OUT/ab7.md; tail -2 $OUT/ab7.log
