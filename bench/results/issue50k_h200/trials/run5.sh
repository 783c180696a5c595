#!/bin/bash
# HEAD pack, q0, q2, and the offer filter by least key (c0, c2), the halves unrolled by two (u0, u2).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
M=mod/exact_old.udfm,mod/exact_q0.udfm,mod/exact_q2.udfm,mod/exact_c0.udfm,mod/exact_c2.udfm,mod/exact_u0.udfm,mod/exact_u2.udfm
timeout 290 bin/exact_search_bench $M --batches 10000,100 --reps 5 --rounds 2 \
  --metrics weighted_l2:3,l1:2,linf:2 > $OUT/ab5.md 2> $OUT/ab5.log; echo "rc $?"
cat $OUT/ab5.md; tail -2 $OUT/ab5.log
