#!/bin/bash
# HEAD pack, c0, d0, e1, and the next half's first loads of two queries ahead (e8, e10, e11), of four with one acc init (e9).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
M=mod/exact_old.udfm,mod/exact_c0.udfm,mod/exact_d0.udfm,mod/exact_e1.udfm,mod/exact_e8.udfm,mod/exact_e9.udfm,mod/exact_e10.udfm,mod/exact_e11.udfm
timeout 290 bin/exact_search_bench $M --batches 10000 --reps 5 --rounds 2 \
  --metrics weighted_l2:3,l1:2,linf:2 > $OUT/ab9.md 2> $OUT/ab9.log; echo "rc $?"
cat $OUT/ab9.md; tail -2 $OUT/ab9.log
