#!/usr/bin/env bash
# Device call: ENTRY FLAGS (every scan entry copies its arguments and sets
# entry_flags, a constant the scan folds): search_bench with 5cc6eb6's
# runtime, search_bench and bench.udfm (.bench/old.tar.xz) against this
# tree's (.bench/dev.tar.xz), alternated, on the same data, every table in
# $OUT/ab.md; then (without --no-tests) scan_check and the runtime's
# GoogleTest suites, whose on-demand tests load the direct twins.
set -uo pipefail
rounds=${ROUNDS:-2}
[[ -d .device ]] || tar -xJf .bench/dev.tar.xz
[[ -d .bench/old ]] || tar -xJf .bench/old.tar.xz -C .bench
mkdir -p "$OUT"
common=(--rows 1000000 --dim 128 --lists 1024 --data overlap --probes 32 --ks 10 --reps 50)
for round in $(seq "$rounds"); do
  for who in old new; do
    bin=.device/bin/search_bench mod=.device/modules/bench.udfm
    [[ $who == old ]] && bin=.bench/old/bin/search_bench mod=.bench/old/modules/bench.udfm
    echo "## $who, round $round"
    timeout 100 "$bin" "$mod" "${common[@]}" --elem f32 --metrics l2,weighted_l2 --batches 1,100,10000 2>&1 | grep -E '^\| overlap' \
      || echo "search_bench $who $round: rc $?"
    timeout 60 "$bin" "$mod" "${common[@]}" --elem i8 --metrics l2 --batches 10000 2>&1 | grep -E '^\| overlap .* 10000 ' \
      || echo "search_bench i8 $who $round: rc $?"
  done
done > "$OUT/ab.md"
[[ ${1:-} == --no-tests ]] && exit 0
export UDF_TEST_MODULE_DIR=$PWD/.device/modules
{ test/gpu/build_and_run.sh .device/kernels --no-bench 2>&1 | tail -3
  for t in runtime_gpu_test runtime_gpu_v2_test runtime_exact_test; do
    echo "=== $t"; timeout 150 .device/bin/$t 2>&1 | grep -E "FAILED|PASSED|SKIPPED \]|tests ran" | tail -5
  done; } 2>&1 | tee "$OUT/native.log"
