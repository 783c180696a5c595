#!/bin/bash
# Refine (256 random candidates a query) and exact search with the weighted L2: 0a2b537's pack against the shipped fold.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
timeout 200 bin/exact_search_bench mod/exact_old.udfm,mod/exact_fin.udfm --batches 100,10000 --reps 5 --rounds 3 \
  --metrics weighted_l2:3 --refine 256 > $OUT/ab13.md 2> $OUT/ab13.log; echo "rc $?"
cat $OUT/ab13.md; tail -2 $OUT/ab13.log
