#!/bin/bash
# HEAD pack, c0, d0, e1 (c0 + next half query loads ahead), e2 (d0, order 2), e6 (d0, order 1), e7 (order 2 + loads ahead).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
M=mod/exact_old.udfm,mod/exact_c0.udfm,mod/exact_d0.udfm,mod/exact_e1.udfm,mod/exact_e2.udfm,mod/exact_e6.udfm,mod/exact_e7.udfm
timeout 290 bin/exact_search_bench $M --batches 10000 --reps 5 --rounds 2 \
  --metrics weighted_l2:3,l1:2,linf:2 > $OUT/ab8.md 2> $OUT/ab8.log; echo "rc $?"
cat $OUT/ab8.md; tail -2 $OUT/ab8.log
