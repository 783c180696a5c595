#!/bin/bash
# Confirmation: the shipped fold (fin) against y1 at batch 10k, three rounds, alternated in one process.
cd "$(dirname "$0")"
LD_LIBRARY_PATH=$PWD/lib timeout 120 bin/exact_search_bench mod/exact_fin.udfm,mod/exact_y1.udfm \
  --batches 10000 --reps 5 --rounds 3 --metrics weighted_l2:3,l1:2,linf:2 > $OUT/ab24.md 2> $OUT/ab24.log
echo "rc $?"; grep "^| " $OUT/ab24.md
