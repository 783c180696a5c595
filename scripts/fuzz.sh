#!/usr/bin/env bash
# Runs the libFuzzer targets (test/fuzz/): every target, or the ones named,
# for N seconds each on a copy of its seed corpus (test/fuzz/corpus/TARGET),
# after replaying the inputs of fixed defects (test/fuzz/regressions/TARGET).
# Prints one row per target and exits 1 when a target crashed, leaked, timed
# out or ran out of memory, naming the reproducer.  See test/fuzz/README.md.
#
#   scripts/fuzz.sh [--seconds N] [--build DIR] [--jobs J] [--work DIR] [--merge]
#                   [--configure] [--list] [TARGET...]
#
#   --seconds N   fuzzing time per target (default 60; 0: replay the corpus and regressions only)
#   --build DIR   build folder of the fuzz or asan preset (default build-fuzz, else build-asan)
#   --jobs J      targets run at the same time (default 1)
#   --work DIR    where corpus copies, logs and reproducers go (default: a new folder in $TMPDIR)
#   --merge       add the new inputs that raise coverage to test/fuzz/corpus/TARGET (libFuzzer -merge=1)
#   --configure   first configure and build the fuzz preset's targets (cmake --preset fuzz)
#   --list        print the targets and exit
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

seconds=60
build=""
jobs=1
work=""
merge=0
configure=0
list=0
targets=()
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
    --seconds=*) seconds=${1#*=}; shift ;;
    --build) build=${2:?--build needs a value}; shift 2 ;;
    --build=*) build=${1#*=}; shift ;;
    --jobs) jobs=${2:?--jobs needs a value}; shift 2 ;;
    --jobs=*) jobs=${1#*=}; shift ;;
    --work) work=${2:?--work needs a value}; shift 2 ;;
    --work=*) work=${1#*=}; shift ;;
    --merge) merge=1; shift ;;
    --configure) configure=1; shift ;;
    --list) list=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    *) targets+=("${1%_fuzzer}"); shift ;;
  esac
done
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --seconds takes a whole number, not '$seconds'" >&2; exit 2; }
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --jobs takes a positive number, not '$jobs'" >&2; exit 2; }

all_targets=()
for src in test/fuzz/*_fuzzer.cpp; do
  name=$(basename "$src" _fuzzer.cpp)
  all_targets+=("$name")
done
if [[ $list == 1 ]]; then
  printf '%s\n' "${all_targets[@]}"
  exit 0
fi
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ -f test/fuzz/${t}_fuzzer.cpp ]] || { echo "fuzz.sh: no target '$t' (see --list)" >&2; exit 2; }
done

if [[ $configure == 1 ]]; then
  cmake --preset fuzz
  cmake --build --preset fuzz --target fuzzers
  build=${build:-build-fuzz}
fi
if [[ -z $build ]]; then
  if [[ -d build-fuzz/bin/fuzz ]]; then build=build-fuzz; else build=build-asan; fi
fi
bindir=$build/bin/fuzz
for t in "${targets[@]}"; do
  [[ -x $bindir/${t}_fuzzer ]] || {
    echo "fuzz.sh: $bindir/${t}_fuzzer is not built: cmake --preset fuzz && cmake --build --preset fuzz" \
         "(or --configure)" >&2
    exit 2
  }
done

if [[ -z $work ]]; then work=$(mktemp -d "${TMPDIR:-/tmp}/udf-fuzz.XXXXXX"); fi
mkdir -p "$work"
work=$(cd "$work" && pwd)

# ASan and UBSan stop at the first error; leaks count as failures.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:halt_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Leaks inside LLVM's libraries (not ours) are listed in test/fuzz/lsan.supp.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/test/fuzz/lsan.supp:print_suppressions=0}

# One target: replay its regressions, then fuzz a copy of its corpus.
# Writes $work/T/result: "executions exec/s new_units status reproducer".
run_target() {
  local t=$1 dir=$work/$1 bin=$ROOT/$bindir/${1}_fuzzer
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  if [[ -d test/fuzz/corpus/$t ]]; then cp -R "test/fuzz/corpus/$t/." "$dir/corpus/"; fi
  local opts=(-rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=25 -print_final_stats=1 "-artifact_prefix=$dir/artifacts/")
  [[ -f test/fuzz/$t.dict ]] && opts+=("-dict=$ROOT/test/fuzz/$t.dict")
  # The inputs of fixed defects first: each must run clean.
  local regs=()
  if [[ -d test/fuzz/regressions/$t ]]; then
    while IFS= read -r -d '' f; do regs+=("$f"); done < <(find "test/fuzz/regressions/$t" -type f -print0 | sort -z)
  fi
  local f
  for f in "${regs[@]}"; do
    if ! "$bin" -rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=25 "$f" >> "$dir/regressions.log" 2>&1; then
      echo "0 0 0 regression $ROOT/$f" > "$dir/result"
      return
    fi
  done
  local rc=0
  if [[ $seconds -eq 0 ]]; then
    "$bin" "${opts[@]}" -runs=0 "$dir/corpus" > "$dir/log" 2>&1 || rc=$?
  else
    "$bin" "${opts[@]}" -max_total_time="$seconds" "$dir/corpus" > "$dir/log" 2>&1 || rc=$?
  fi
  local execs rate units
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -n 1)
  units=$(sed -n 's/^stat::new_units_added: *//p' "$dir/log" | tail -n 1)
  local repro status=ok
  # libFuzzer names its reproducers crash-*, leak-*, timeout-*, oom-* (slow-unit-* are no failure).
  repro=$(find "$dir/artifacts" -type f ! -name 'slow-unit-*' -print -quit)
  if [[ -n $repro ]]; then
    status=$(basename "$repro" | sed 's/-.*//')
  elif [[ $rc -ne 0 ]]; then
    status=failed
    repro="$dir/log"
  fi
  echo "${execs:-0} ${rate:-0} ${units:-0} $status ${repro:-}" > "$dir/result"
}

echo "fuzzing ${#targets[@]} target(s) from $bindir for ${seconds}s each, $jobs at a time; work folder $work"
running=0
for t in "${targets[@]}"; do
  run_target "$t" &
  running=$((running + 1))
  if [[ $running -ge $jobs ]]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

failed=0
printf '%-20s %14s %10s %10s %8s\n' target executions exec/s new_units crashes
for t in "${targets[@]}"; do
  read -r execs rate units status repro < "$work/$t/result" || { execs=0; rate=0; units=0; status=failed; repro="$work/$t"; }
  crashes=0
  [[ $status == ok ]] || crashes=1
  printf '%-20s %14s %10s %10s %8s\n' "$t" "$execs" "$rate" "$units" "$crashes"
  if [[ $status != ok ]]; then
    failed=1
    echo "  $t: $status; reproduce with: $bindir/${t}_fuzzer $repro" >&2
    echo "  log: $work/$t/log" >&2
  fi
done

if [[ $merge == 1 ]]; then
  for t in "${targets[@]}"; do
    mkdir -p "test/fuzz/corpus/$t"
    "$ROOT/$bindir/${t}_fuzzer" -merge=1 -rss_limit_mb=2048 "test/fuzz/corpus/$t" "$work/$t/corpus" \
      > "$work/$t/merge.log" 2>&1 || { echo "fuzz.sh: merging $t failed: $work/$t/merge.log" >&2; failed=1; }
  done
  echo "merged the new coverage into test/fuzz/corpus/"
fi
exit $failed
