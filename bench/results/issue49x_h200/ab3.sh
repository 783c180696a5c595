#!/usr/bin/env bash
# Device call: ENTRY FLAGS (every scan entry copies its arguments and sets
# entry_flags, a constant): search_bench with 5cc6eb6's runtime and an l2 +
# weighted_l2 module (k <= 32, sm_90) of 5cc6eb6's udf-link and pack, against
# this tree's (.bench/ab3.tar.xz), alternated, on the same data.
set -uo pipefail
tar -xJf .bench/ab3.tar.xz -C .bench
mkdir -p "$OUT"
args=(--rows 1000000 --dim 128 --lists 1024 --data overlap --elem f32 --metrics l2,weighted_l2 --batches 1,100,10000
      --probes 32 --ks 10 --reps 40)
for round in 1 2; do
  for who in old new; do
    timeout 60 .bench/ab3/$who/bin/search_bench .bench/ab3/$who/ab_$who.udfm "${args[@]}" --json "$OUT/ab3_${who}_$round.json" \
      > "$OUT/ab3_${who}_$round.txt" 2>&1 || echo "search_bench $who $round: rc $?"
  done
done
