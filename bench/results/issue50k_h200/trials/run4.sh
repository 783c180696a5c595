#!/bin/bash
# HEAD pack, z1, z2 and the query-map / order variants (batch 10k, then 100).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
M=mod/exact_old.udfm,mod/exact_z1.udfm,mod/exact_z2.udfm,mod/exact_q0.udfm,mod/exact_q1.udfm,mod/exact_q2.udfm,mod/exact_z3.udfm,mod/exact_q3.udfm
timeout 290 bin/exact_search_bench $M --batches 10000,100 --reps 5 --rounds 2 \
  --metrics weighted_l2:3,l1:2,linf:2 > $OUT/ab4.md 2> $OUT/ab4.log; echo "rc $?"
cat $OUT/ab4.md; tail -2 $OUT/ab4.log
