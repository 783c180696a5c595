#!/bin/bash
# The shipped fold (fin) against the next pair's rows read a pair ahead (pf), with the default tiling and
# with 32 tiles rounded to 256 rows (UDF_EXP_TILES / UDF_EXP_ROUND); two passes.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
for pass in 1 2; do
  for cfg in "" "UDF_EXP_TILES=32 UDF_EXP_ROUND=256"; do
    echo "== pass $pass cfg [$cfg]"
    env $cfg timeout 150 bin/exact_search_bench mod/exact_fin.udfm,mod/exact_pf.udfm --batches 10000,100 --reps 5 --rounds 2 \
      --metrics weighted_l2:3,l1:2,linf:2 2>/dev/null | grep "^| [wl]"
  done
done
