#!/usr/bin/env bash
# Where a half-size list's scan loses: 10M and 20M rows over the same 4096 lists, the monotone
# weighted L2 (pruning scan) and the undeclared one (plain scan), one H200, batch 10k, P32.
set -u
cd "$(dirname "$0")/.."
rm -rf .device; tar xJf .bench/dev.tar.xz
s=$(date +%s)
B=.device/bin/search_bench
for mod in bench bench_plain; do for rows in 10000000 20000000; do
  timeout 120 $B .device/modules/$mod.udfm --rows $rows --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 10000 --probes 32 --ks 10 --reps 20 --json $OUT/${mod}_$rows.json > $OUT/${mod}_$rows.md 2>&1
  echo "== $mod $rows rc $? at $(( $(date +%s) - s )) s: $(grep -E '^\| clustered \| f32 \| weighted_l2 \| 10000' $OUT/${mod}_$rows.md | awk -F'|' '{print "median", $8, "coarse", $13, "sched", $14, "scan", $15, "merge", $16, "scored/q", $17}')"
done; done
