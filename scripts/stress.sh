#!/usr/bin/env bash
# Runs the CPU unit suite (the GoogleTest binaries: every ctest but lit, the
# Python, package and wheel tests, the demo, the cache faults and the kernel
# pack's links) ROUNDS times on an existing build while BURNERS busy loops
# hold the CPUs, so that tests which assume a scheduling order fail here
# rather than on a loaded CI machine.  Prints one line per failed round and
# a summary; exits 1 when any round failed.  The logs stay in --logs.
#
#   scripts/stress.sh [--rounds 20] [--burners N (default: nproc)] [--preset default] [--logs DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=20 burners=$(nproc) preset=default logs=${TMPDIR:-/tmp}/udf-stress
while (($#)); do
  case $1 in
    --rounds) rounds=${2:?--rounds N}; shift 2 ;;
    --burners) burners=${2:?--burners N}; shift 2 ;;
    --preset) preset=${2:?--preset NAME}; shift 2 ;;
    --logs) logs=${2:?--logs DIR}; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "stress.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ && $burners =~ ^[0-9]+$ ]] || { echo "stress.sh: --rounds >= 1, --burners >= 0" >&2; exit 2; }
mkdir -p "$logs"
pids=()
stop() { ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null; }
trap stop EXIT
for ((i = 0; i < burners; ++i)); do
  sh -c 'while :; do :; done' &
  pids+=($!)
done
exclude='^(lit|python_tests|python_wheel|package_.*|demo|readme_quickstarts|cache_faults|code_shape|c_api_ctypes_layout)$|^kernel_pack\.'
failed=0
for ((r = 1; r <= rounds; ++r)); do
  if ! ctest --preset "$preset" -j "$(nproc)" -E "$exclude" >"$logs/round$r.log" 2>&1; then
    failed=$((failed + 1))
    echo "round $r failed: $(grep -A20 'tests FAILED' "$logs/round$r.log" | grep -E '^[[:space:]]+[0-9]+ - ' | tr -s ' ' | paste -sd';')"
  fi
done
echo "stress.sh: $rounds rounds with $burners busy loops, $failed failed ($(grep -h 'tests passed' "$logs/round$rounds.log"))"
((failed == 0))
