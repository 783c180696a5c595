#!/usr/bin/env bash
# Builds test/gpu/scan_check.cpp with g++ against the CUDA toolkit (driver
# API, NVRTC, nvJitLink; nothing else) and runs it on GPU 0.
#
#   test/gpu/build_and_run.sh [PACK_DIR] [--no-bench]
#
# PACK_DIR defaults to build/share/udf/kernels (the built kernel pack).
# CUDA_HOME defaults to /usr/local/cuda.  Exit status: scan_check's.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
pack=${1:-$root/build/share/udf/kernels}
shift || true
cuda=${CUDA_HOME:-/usr/local/cuda}
out=${SCAN_CHECK_BIN:-${TMPDIR:-/tmp}/udf_scan_check}

if [[ ! -f $pack/ivf_flat_v1.json ]]; then
  echo "scan_check: no kernel pack in $pack (build the udf_kernel_pack target first)" >&2
  exit 2
fi
# libcuda: the driver's libcuda.so.1 (no -dev symlink needed), else the toolkit's stub.
cudalib=()
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/wsl/lib "$cuda/lib64/stubs" "$cuda/targets/x86_64-linux/lib/stubs"; do
  if [[ -e $d/libcuda.so.1 ]]; then cudalib=("$d/libcuda.so.1"); break; fi
  if [[ -e $d/libcuda.so ]]; then cudalib=("$d/libcuda.so"); break; fi
done
if [[ ${#cudalib[@]} -eq 0 ]]; then echo "scan_check: libcuda not found" >&2; exit 2; fi

g++ -std=c++20 -O2 -Wall -Wextra -Werror -o "$out" "$root/test/gpu/scan_check.cpp" \
  -I"$root/include" -I"$cuda/include" \
  -L"$cuda/lib64" -lnvrtc -lnvJitLink "${cudalib[@]}" -Wl,-rpath,"$cuda/lib64"
exec "$out" "$pack" "$root/include" "$@"
