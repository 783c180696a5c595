#!/bin/bash
# HEAD's pack against three schedules of the two-group fold (UDF_EXP_ORDER 0, 1, 2).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
timeout 280 bin/exact_search_bench mod/exact_old.udfm,mod/exact_o0.udfm,mod/exact_o1.udfm,mod/exact_o2.udfm --batches 100,10000 --reps 5 --rounds 2 \
  --metrics weighted_l2:3,l1:2,linf:2 > $OUT/ab2.md 2> $OUT/ab2.log; echo "rc $?"
cat $OUT/ab2.md; tail -2 $OUT/ab2.log
