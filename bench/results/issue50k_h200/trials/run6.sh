#!/bin/bash
# HEAD pack, c0, and one acc init (d0), the next half's first query loads ahead (p0, p2).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
M=mod/exact_old.udfm,mod/exact_c0.udfm,mod/exact_d0.udfm,mod/exact_p0.udfm,mod/exact_p2.udfm
timeout 290 bin/exact_search_bench $M --batches 10000,100 --reps 5 --rounds 2 \
  --metrics weighted_l2:3,l1:2,linf:2 > $OUT/ab6.md 2> $OUT/ab6.log; echo "rc $?"
cat $OUT/ab6.md; tail -2 $OUT/ab6.log
