#!/bin/bash
# 0a2b537's pack, the shipped fold (fin = c0), and three more schedules: v5 (query loads a half ahead, halves by XOR),
# v6 (loads ahead, the offer filter row by row), v7 (loads ahead, issued at the top of the next half).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
M=mod/exact_old.udfm,mod/exact_fin.udfm,mod/exact_v5.udfm,mod/exact_v6.udfm,mod/exact_v7.udfm
timeout 290 bin/exact_search_bench $M --batches 10000,100 --reps 5 --rounds 2 \
  --metrics weighted_l2:3,l1:2,linf:2 > $OUT/ab10.md 2> $OUT/ab10.log; echo "rc $?"
cat $OUT/ab10.md; tail -2 $OUT/ab10.log
