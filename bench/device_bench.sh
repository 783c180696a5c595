#!/usr/bin/env bash
# Both benchmarks on the GPU machine, from what bench/stage_bench.sh put in
# .bench/ (this build's and a baseline build's search_bench, libudf_runtime,
# bench.udfm, udfc, udf-link and kernel pack): the search bench of each build,
# alternately (base, new, base, new: the same GPU, one run beside the other),
# then the toolchain bench's CLI rows on this machine's CPUs for both builds.
#
#   bench/device_bench.sh OUT [search|toolchain|toolchain-new|toolchain-base|all]
#
# Writes OUT/search_{base,new}_{1,2}.json and .txt, OUT/search_ab.md (bench/search_ab.py), OUT/toolchain_bench_gpu_host_{new,base}.{json,md}.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${1:?usage: bench/device_bench.sh OUT [search|toolchain|all]}
what=${2:-all}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nproc
if [[ $what == search || $what == all ]]; then
  # The issue-10 table's workload: 1M x 128 clustered f32, 1024 lists, k 10, the built-in L2 and
  # the weighted-L2 UDF (declared monotone in bench.udfm), batch 1 / 100 / 10k, P32 and P128.
  args=(--data clustered --elem f32 --metrics l2,weighted_l2 --batches 1,100,10000 --probes 32,128 --ks 10)
  for round in 1 2; do
    for b in base new; do
      d=.bench/$b
      echo "=== search $b round $round"
      "$d/bin/search_bench" "$d/modules/bench.udfm" "${args[@]}" --json "$out/search_${b}_$round.json" \
        > "$out/search_${b}_$round.txt" 2>&1 || echo "search_bench $b failed: see $out/search_${b}_$round.txt"
      tail -n 20 "$out/search_${b}_$round.txt"
    done
  done
  python3 bench/search_ab.py "$out" --out "$out/search_ab.md" || echo "search_ab: see above"
fi
# The driver's compute cache would answer repeated links (nvJitLink reuses it where a driver is
# installed): off, so that a cold link is cold.
export CUDA_CACHE_DISABLE=1
if [[ $what == toolchain || $what == all || $what == toolchain-new ]]; then
  echo "=== toolchain bench, this build ($(nproc) CPUs)"
  python3 bench/toolchain_bench.py --build .bench/new --label "this build" --cases cli --skip-warm \
    --reps "${UDF_BENCH_REPS:-3}" --out "$out" --tag gpu_host_new
fi
if [[ $what == toolchain || $what == all || $what == toolchain-base ]]; then
  echo "=== toolchain bench, the baseline build ($(nproc) CPUs)"
  python3 bench/toolchain_bench.py --baseline .bench/base --baseline-label "${UDF_BENCH_BASE_LABEL:-baseline}" --only-baseline \
    --cases cli --skip-warm --reps "${UDF_BENCH_REPS:-3}" --out "$out" --tag gpu_host_base
fi
