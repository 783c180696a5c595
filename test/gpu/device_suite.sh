#!/usr/bin/env bash
# The GPU tests on the GPU machine, from what test/gpu/stage_device.sh put in
# .device/ (and, optionally, Python packages the machine lacks in .whl/): the
# runtime's GoogleTest suites, test/lit's GPU tests, the Python package's GPU tests (the staged wheel
# installed into a scratch folder; the Python quickstart among them), the seed
# demo with both back ends, the scan kernel check and the demo.  Prints a summary line per step; exit 1 if any failed.
#
#   test/gpu/device_suite.sh [--part native|python] [PYTHON]
#                                        (PYTHON: an interpreter with numpy,
#                                         pytest and, optionally, cupy, torch,
#                                         numba-cuda; default /opt/torch/.venv/bin/python)
#
# Python packages the machine lacks travel in .whl/: *.whl are installed
# (--no-deps) and *.tar.xz (an unpacked wheel, e.g. numba-cuda-mlir, whose wheel
# is too large to carry as is) unpacked into $TMPDIR/udf-extra, which goes first
# on PYTHONPATH.  When .whl/ and .device/ together are too large for one call,
# carry .whl first with `test/gpu/device_suite.sh --extras-only` and .device in
# the next call (right away, while the machine is warm: /tmp is kept).
# test/gpu/fetch_extras.sh puts dask and distributed there (udf.dask's GPU
# tests skip, saying why, without them).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
extras_only=0 part=all
if [[ ${1:-} == --extras-only ]]; then extras_only=1; shift; fi
# --part native: the GoogleTest suites and scan_check only; --part python: the
# wheel, pytest -m gpu and the seed demo only (each fits one 600 s device
# call where the whole suite, with the Python tests' cold caches, did not).
if [[ ${1:-} == --part ]]; then part=${2:?--part native|python}; shift 2; fi
[[ $part == all || $part == native || $part == python ]] || { echo "device_suite: --part native|python" >&2; exit 2; }
native() { [[ $part != python ]]; }
python_part() { [[ $part != native ]]; }
py=${1:-/opt/torch/.venv/bin/python}
tmp=${TMPDIR:-/tmp}
site=$tmp/udf-site extra=$tmp/udf-extra
failed=()
step() {  # step NAME COMMAND...
  local name=$1; shift
  echo "=== $name"
  if "$@"; then echo "=== $name: ok"; else echo "=== $name: FAILED"; failed+=("$name"); fi
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# NCCL for the sharded indexes' tests on several GPUs: the interpreter's
# nvidia-nccl wheel, unless the caller names a library.
if [[ -z ${UDF_NCCL_LIBRARY:-} ]]; then
  nccl_lib=$("$py" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  if [[ -n $nccl_lib && -f $nccl_lib ]]; then export UDF_NCCL_LIBRARY=$nccl_lib; echo "NCCL: $nccl_lib"; fi
fi
stamp=$(ls -l .whl 2>/dev/null | md5sum | cut -c1-32)
if compgen -G ".whl/*" >/dev/null && [[ $(cat "$extra/.stamp" 2>/dev/null) != "$stamp" ]]; then
  rm -rf "$extra"
  mkdir -p "$extra"
  if compgen -G ".whl/*.whl" >/dev/null; then
    step "install carried wheels" "$py" -m pip install -q --no-deps --no-index --no-compile --target "$extra" .whl/*.whl
  fi
  for t in .whl/*.tar.xz; do
    [[ -f $t ]] && step "unpack $(basename "$t")" tar -xJf "$t" -C "$extra"
  done
  ((${#failed[@]})) || echo "$stamp" >"$extra/.stamp"
fi
if ((extras_only)); then
  ls "$extra"
  if ((${#failed[@]})); then exit 1; fi
  exit 0
fi
[[ -d $extra ]] && export PYTHONPATH=$extra${PYTHONPATH:+:$PYTHONPATH}
rm -rf "$site"
"$py" -c 'import importlib.metadata as m
for p in ("numpy", "cupy-cuda13x", "torch", "numba", "numba-cuda", "numba-cuda-mlir"):
    try: print(f"  {p} {m.version(p)}")
    except m.PackageNotFoundError: print(f"  {p}: not installed")'
python_part && step "install udf wheel" "$py" -m pip install -q --no-deps --no-index --target "$site" .device/wheel/*.whl
if native; then
step "runtime_gpu_test" env UDF_TEST_MODULE_DIR="$root/.device/modules" .device/bin/runtime_gpu_test --gtest_brief=1
step "runtime_gpu_v2_test" env UDF_TEST_MODULE_DIR="$root/.device/modules" .device/bin/runtime_gpu_v2_test --gtest_brief=1
step "runtime_api_fuzz_test" env UDF_TEST_MODULE_DIR="$root/.device/modules" UDF_FUZZ_TRIALS=2000 \
  .device/bin/runtime_api_fuzz_test --gtest_brief=1
step "runtime_stress_test" env UDF_TEST_MODULE_DIR="$root/.device/modules" UDF_SOAK_SECONDS=${UDF_SOAK_SECONDS:-20} \
  .device/bin/runtime_stress_test --gtest_brief=1
step "runtime_fault_test" env UDF_TEST_MODULE_DIR="$root/.device/modules" .device/bin/runtime_fault_test --gtest_brief=1
# Sharded indexes: shards on GPU 0 ({0,0}, {0,0,0}); {0,1} too where there is a second GPU.
step "runtime_shards_test" env UDF_TEST_MODULE_DIR="$root/.device/modules" .device/bin/runtime_shards_test --gtest_brief=1
step "runtime_wrapper_shards_test" env UDF_TEST_MODULE_DIR="$root/.device/modules" .device/bin/runtime_wrapper_shards_test --gtest_brief=1
step "runtime_device_array_test" .device/bin/runtime_device_array_test --gtest_brief=1
# Exact search and refine (modules linked on demand from .device/artifacts); FAISS files.
step "runtime_exact_test" env UDF_TEST_MODULE_DIR="$root/.device/modules" UDF_CACHE_DIR="$tmp/udf-exact-cache" \
  .device/bin/runtime_exact_test --gtest_brief=1
step "runtime_faiss_test" env UDF_TEST_MODULE_DIR="$root/.device/modules" UDF_TEST_SOURCE_DIR="$root" .device/bin/runtime_faiss_test --gtest_brief=1
step "runtime_cuvs_test" env UDF_TEST_MODULE_DIR="$root/.device/modules" UDF_TEST_SOURCE_DIR="$root" .device/bin/runtime_cuvs_test --gtest_brief=1
step "interop_test" .device/bin/interop_test --gtest_brief=1
fi
export UDF_PYTHON_DIR=$site UDF_CACHE_DIR=$tmp/udf-cache
unset UDF_BIN_DIR
# The GPU tests (the CPU tests run in CI; the IR front end's libLLVM is not on this machine).
if python_part; then
  step "pytest -m gpu" bash -c "cd '$tmp' && '$py' -m pytest '$root/python/tests' -m gpu -q -rs -p no:cacheprovider"
  step "seed demo" env PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" "$py" examples/python/seed_demo.py --require-gpu
fi
native && step "scan_check" test/gpu/build_and_run.sh .device/kernels --no-bench
# test/lit's GPU tests (udf-run with a GPU), with the staged tools and lit.
native && step "lit (GPU tests)" test/gpu/lit_gpu.sh "$py"
# The demo (README's command-line quickstart) with the staged tools: it must search and print recall.
native && step "demo" env UDF_CACHE_DIR="$tmp/udf-demo-cache" "$py" test/tools/run-demo.py "$root" "$root/.device" --require-gpu
if ((${#failed[@]})); then echo "FAILED: ${failed[*]}"; exit 1; fi
echo "all GPU steps passed"
