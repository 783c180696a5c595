#!/bin/bash
# Exact search at batch 10k with other tilings of the dataset (a runtime with UDF_EXP_TILES / UDF_EXP_ROUND:
# the tile count, and the multiple of rows a tile is rounded up to), the shipped fold; two passes alternated.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
for pass in 1 2; do
  for cfg in "" "UDF_EXP_ROUND=256" "UDF_EXP_TILES=32 UDF_EXP_ROUND=256" "UDF_EXP_TILES=16 UDF_EXP_ROUND=256" "UDF_EXP_TILES=32"; do
    echo "== pass $pass cfg [$cfg]"
    env $cfg timeout 100 bin/exact_search_bench mod/exact_fin.udfm --batches 10000 --reps 5 --rounds 1 \
      --metrics weighted_l2:3,l1:2,linf:2 2>/dev/null | grep "^| [wl]"
  done
done
