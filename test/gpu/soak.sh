#!/usr/bin/env bash
# The runtime's reliability runs on the GPU machine, from what
# test/gpu/stage_device.sh put in .device/ (docs/reliability.md has the counts):
#   1. the API property test for many seeds: runtime_api_fuzz_test with
#      UDF_FUZZ_SEED = 1 .. $SEEDS (default 50), $TRIALS calls each (default
#      3000), $JOBS seeds at once (default 8);
#   2. the concurrency soak: runtime_stress_test for $SOAK seconds per test
#      (default 600: threads with their own runtimes, then async searches on
#      caller streams), every result against the float64 reference, device
#      memory back at its starting level;
#   3. the same soak under compute-sanitizer memcheck (leak check) for
#      $MEMCHECK seconds per test (default 60).
# Prints one line per step and a summary; exit 1 if anything failed.
#
#   test/gpu/soak.sh [fuzz] [soak] [memcheck]     (default: all three)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
steps=("$@")
((${#steps[@]})) || steps=(fuzz soak memcheck)
export UDF_TEST_MODULE_DIR=$root/.device/modules
tmp=${TMPDIR:-/tmp}
SEEDS=${SEEDS:-50} TRIALS=${TRIALS:-3000} JOBS=${JOBS:-8} SOAK=${SOAK:-600} MEMCHECK=${MEMCHECK:-60}
cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
failed=()
for step in "${steps[@]}"; do
  case $step in
    fuzz)
      start=$SECONDS
      seq 1 "$SEEDS" | xargs -P "$JOBS" -I{} bash -c \
        'UDF_FUZZ_SEED={} UDF_FUZZ_TRIALS='"$TRIALS"' .device/bin/runtime_api_fuzz_test --gtest_brief=1 \
           --gtest_filter=World.RandomSearchCalls >'"$tmp"'/fuzz-seed-{}.log 2>&1 || echo {} >>'"$tmp"'/fuzz-failed'
      bad=$(sort -n "$tmp/fuzz-failed" 2>/dev/null | tr '\n' ' '); rm -f "$tmp/fuzz-failed"
      valid=$(cat "$tmp"/fuzz-seed-*.log | sed -n 's/.* \([0-9]*\) valid calls checked.* \([0-9]*\) invalid calls refused/\1 \2/p' |
              awk '{v+=$1; i+=$2} END {print v" valid, "i" invalid"}')
      if [[ -z $bad ]]; then
        echo "ok    api fuzz: $SEEDS seeds x $TRIALS calls ($valid) in $((SECONDS - start)) s"
      else
        echo "FAIL  api fuzz: seeds $bad failed (logs: $tmp/fuzz-seed-N.log)"; failed+=(fuzz)
        for s in $bad; do grep -m 3 -E "Failure|trial" "$tmp/fuzz-seed-$s.log"; done
      fi ;;
    soak)
      start=$SECONDS
      if UDF_SOAK_SECONDS=$SOAK .device/bin/runtime_stress_test --gtest_brief=1 >"$tmp/soak.log" 2>&1; then
        echo "ok    soak: $SOAK s per test in $((SECONDS - start)) s"
      else
        echo "FAIL  soak (log: $tmp/soak.log)"; failed+=(soak)
      fi
      grep -E "^stress|device memory|Failure" "$tmp/soak.log" | head -20 ;;
    memcheck)
      start=$SECONDS
      if UDF_SOAK_SECONDS=$MEMCHECK "$cs" --tool memcheck --leak-check full --report-api-errors no --error-exitcode 99 \
           --print-limit 20 .device/bin/runtime_stress_test --gtest_brief=1 >"$tmp/soak-memcheck.log" 2>&1; then
        echo "ok    memcheck soak: $MEMCHECK s per test in $((SECONDS - start)) s: $(grep 'ERROR SUMMARY' "$tmp/soak-memcheck.log" | tail -n 1)"
      else
        echo "FAIL  memcheck soak (log: $tmp/soak-memcheck.log)"; failed+=(memcheck)
        grep -m 20 -E "=========|Failure" "$tmp/soak-memcheck.log"
      fi
      grep -E "^stress" "$tmp/soak-memcheck.log" ;;
    *) echo "soak.sh: unknown step '$step' (fuzz, soak, memcheck)" >&2; exit 2 ;;
  esac
done
if ((${#failed[@]})); then echo "FAILED: ${failed[*]}"; exit 1; fi
echo "all soak steps passed"
