#!/usr/bin/env bash
# Device call: the native GPU suite on this tree's .device (carried as
# .bench/dev.tar.xz), then search_bench with 5cc6eb6's runtime, search_bench
# and bench.udfm (.bench/old.tar.xz: the kernels and runtime before the
# direct twins) and this tree's, alternated, on the same data.
set -uo pipefail
tar -xJf .bench/dev.tar.xz && rm -rf .bench/old && tar -xJf .bench/old.tar.xz -C .bench
mkdir -p "$OUT"
bash test/gpu/device_suite.sh --part native 2>&1 | tee "$OUT/native_suite.log" | grep -E "^=== |passed|FAILED|tests ran" | tail -40
args=(--rows 1000000 --dim 128 --lists 1024 --data overlap --elem f32 --metrics l2,weighted_l2 --batches 1,100,10000
      --probes 32 --ks 10 --reps 50)
for round in 1 2; do
  for who in old new; do
    bin=.device/bin/search_bench mod=.device/modules/bench.udfm
    [[ $who == old ]] && bin=.bench/old/bin/search_bench mod=.bench/old/modules/bench.udfm
    timeout 100 "$bin" "$mod" "${args[@]}" --json "$OUT/search_${who}_$round.json" \
      > "$OUT/search_${who}_$round.txt" 2>&1 || echo "search_bench $who $round: rc $?"
  done
done
grep -h "| overlap" "$OUT"/search_*_*.txt | head -40
