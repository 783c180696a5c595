#!/usr/bin/env bash
# Downloads into .whl/ (git-ignored) the wheels of Python packages that the GPU
# machine lacks and the GPU suites use, for test/gpu/device_suite.sh to install
# there: dask and distributed with their dependencies (udf.dask's GPU tests,
# python/tests/test_dask_gpu.py, and bench/dask_bench.py), for the machine's
# CPython 3.12 on x86-64 Linux.  About 5 MB; run it where there is a package
# registry (this machine, not the GPU machine).  Idempotent.
#
#   test/gpu/fetch_extras.sh [PYTHON_VERSION]   (default 3.12)
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${1:-3.12}
mkdir -p .whl
python3 -m pip download -q --dest .whl --only-binary=:all: --python-version "$py" \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  "dask>=2024.1" "distributed>=2024.1"
ls .whl
