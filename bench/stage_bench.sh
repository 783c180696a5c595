#!/usr/bin/env bash
# Stages into .bench/ (git-ignored) what bench/device_bench.sh runs on the GPU
# machine: for this build (build/) and a baseline build (BASE_BUILD, a build
# folder of an older commit), search_bench with its libudf_runtime and
# bench.udfm, and udfc, udf-link and the kernel pack.
#
#   bench/stage_bench.sh BASE_BUILD      (then run bench/device_bench.sh there, carrying .bench)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The GPU test modules must hold every k bucket (not a CI build's k <= 32).
source test/gpu/require_full_modules.sh stage_bench.sh
base=${1:?usage: bench/stage_bench.sh BASE_BUILD}
rm -rf .bench
for pair in "new:build" "base:$base"; do
  name=${pair%%:*} src=${pair#*:}
  d=.bench/$name
  mkdir -p "$d/bin" "$d/lib" "$d/modules" "$d/share/udf"
  cp "$src/test/search_bench" "$src/bin/udfc" "$src/bin/udf-link" "$d/bin/"
  cp -L "$src"/lib/libudf_runtime.so.[0-9]* "$d/lib/"
  cp "$src/test/modules/bench.udfm" "$d/modules/"
  cp -r "$src/share/udf/kernels" "$d/share/udf/kernels"
done
du -sh .bench
