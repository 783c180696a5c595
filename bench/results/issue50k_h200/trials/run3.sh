#!/bin/bash
# HEAD pack, o2, and the loop without per-half branches (z0: order 2, z1: order 0, z2: order 1).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
timeout 280 bin/exact_search_bench mod/exact_old.udfm,mod/exact_o2.udfm,mod/exact_z0.udfm,mod/exact_z1.udfm,mod/exact_z2.udfm --batches 100,10000 --reps 5 --rounds 2 \
  --metrics weighted_l2:3,l1:2,linf:2 > $OUT/ab3.md 2> $OUT/ab3.log; echo "rc $?"
cat $OUT/ab3.md; tail -2 $OUT/ab3.log
