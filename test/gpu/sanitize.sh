#!/usr/bin/env bash
# The GPU tests under compute-sanitizer's four tools (memcheck with leak
# checking, racecheck, initcheck, synccheck), on the GPU machine, from what
# test/gpu/stage_device.sh put in .device/: the runtime's GoogleTest suites
# (runtime_gpu_test, runtime_api_fuzz_test, interop_test, runtime_stress_test for
# $UDF_SANITIZE_SOAK_SECONDS each, default 20) and the scan kernel
# check.  One line per (tool, program) and a final `N passed, N failed` line;
# exit 1 if any run reported an error.
#
#   test/gpu/sanitize.sh [TOOL...]     (default: memcheck racecheck initcheck synccheck)
#
# Failing CUDA API calls that the tests provoke on purpose (a module without
# code for the GPU, cuPointerGetAttribute on host memory) are not reported
# (--report-api-errors no); memory, race, initialisation and synchronisation
# errors are, and fail the run (--error-exitcode).  The throughput test of
# runtime_gpu_test (100k queries) is left out: it checks nothing the others
# do not, and takes hours under racecheck.  The API fuzz test makes fewer
# calls than in CI-sized runs ($UDF_FUZZ_TRIALS, default 80 here).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
tools=("$@")
((${#tools[@]})) || tools=(memcheck racecheck initcheck synccheck)
cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
tmp=${TMPDIR:-/tmp}
export UDF_TEST_MODULE_DIR=$root/.device/modules UDF_FUZZ_TRIALS=${UDF_FUZZ_TRIALS:-80}
pack=$root/.device/kernels
# scan_check, built once (build_and_run.sh builds and runs it; here only built)
SCAN_CHECK_BIN=$tmp/udf_scan_check bash test/gpu/build_and_run.sh "$pack" --no-bench >/dev/null 2>&1 ||
  echo "sanitize: building scan_check failed (run test/gpu/build_and_run.sh to see why)"
programs=(
  "runtime_gpu_test|.device/bin/runtime_gpu_test --gtest_brief=1 --gtest_filter=-*Throughput*"
  "runtime_api_fuzz_test|.device/bin/runtime_api_fuzz_test --gtest_brief=1"
  "interop_test|.device/bin/interop_test --gtest_brief=1"
  "runtime_fault_test|.device/bin/runtime_fault_test --gtest_brief=1 --gtest_filter=-*LargerThanTheGpu*"
  "runtime_stress_test|env UDF_SOAK_SECONDS=${UDF_SANITIZE_SOAK_SECONDS:-20} .device/bin/runtime_stress_test --gtest_brief=1"
  "scan_check|$tmp/udf_scan_check $pack $root/include --no-bench"
)
passed=0 failed=0
for tool in "${tools[@]}"; do
  extra=()
  [[ $tool == memcheck ]] && extra=(--leak-check full)
  [[ $tool == racecheck ]] && extra=(--racecheck-report hazard)
  for entry in "${programs[@]}"; do
    name=${entry%%|*} cmd=${entry#*|}
    log=$tmp/sanitize-$tool-$name.log
    start=$SECONDS
    # shellcheck disable=SC2086
    "$cs" --tool "$tool" "${extra[@]}" --report-api-errors no --error-exitcode 99 --print-limit 20 $cmd >"$log" 2>&1
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -n 1)
    if ((rc == 0)); then
      echo "ok    $tool $name ($((SECONDS - start)) s): ${summary:-no summary}"
      ((passed++))
    else
      echo "FAIL  $tool $name (exit $rc, $((SECONDS - start)) s): ${summary:-no summary}; log $log"
      grep -E "=========|FAILED|Error|error" "$log" | head -n 30
      ((failed++))
    fi
  done
done
echo "$passed passed, $failed failed"
((failed == 0))
