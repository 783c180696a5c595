#!/usr/bin/env bash
# Device call: the grouped-fold guard hoisted out of the query loop (the
# commit after 8ef22ac's fix): search_bench with 5cc6eb6's runtime, search_bench
# and bench.udfm (.bench/old.tar.xz) and this tree's (.bench/dev.tar.xz),
# alternated, on the same data; then scan_check and the index GoogleTest suites.
set -uo pipefail
tar -xJf .bench/dev.tar.xz && rm -rf .bench/old && tar -xJf .bench/old.tar.xz -C .bench
mkdir -p "$OUT"
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
export UDF_TEST_MODULE_DIR=$PWD/.device/modules
{ test/gpu/build_and_run.sh .device/kernels --no-bench 2>&1 | tail -3
  for t in runtime_gpu_test runtime_gpu_v2_test runtime_exact_test; do
    echo "=== $t"; timeout 150 .device/bin/$t 2>&1 | grep -E "FAILED|PASSED|SKIPPED \]|tests ran" | tail -5
  done; } 2>&1 | tee "$OUT/native2.log"
