#!/bin/bash
# This tree's wheel (its own pack) against HEAD b01993d's pack (UDF_KERNEL_PACK_DIR), one round;
# then the tile bit check and test_exact.py with the wheel.
set -u
cd "$(dirname "$0")/.."
tar xf .devpy/dev.tar
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/udf-site .device/wheel/*.whl 2>&1 | tail -2
rm -rf /tmp/packs; mkdir -p /tmp/packs && tar xJf .devpy/pb019.tar.xz -C /tmp/packs
export PYTHONPATH=/tmp/udf-site UDF_CACHE_DIR=/tmp/udf-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for r in 1; do for v in b019 new; do
  echo "== $v round $r"
  if [[ $v == b019 ]]; then export UDF_KERNEL_PACK_DIR=/tmp/packs/b019; else unset UDF_KERNEL_PACK_DIR; fi
  timeout 150 python3 bench/exact_bench.py --metrics weighted_l2,l1,chebyshev,refine --batches 1,100,10000 --reps 5 \
    --out $OUT/${v}_$r > $OUT/${v}_$r.log 2>&1
  grep -E "^\| (weighted|l1|cheb|refine)" $OUT/${v}_$r.log | cut -c1-120
done; done
unset UDF_KERNEL_PACK_DIR
timeout 120 python3 .devpy/check.py > $OUT/check.log 2>&1; echo "check rc $?"
grep -E "FAIL|check:" $OUT/check.log | head
py=/opt/torch/.venv/bin/python
rm -rf /tmp/udf-site2 && $py -m pip install -q --no-deps --no-index --no-compile --target /tmp/udf-site2 .device/wheel/*.whl 2>&1 | tail -2
ROOTDIR=$PWD
(cd /tmp && UDF_PYTHON_DIR=/tmp/udf-site2 PYTHONPATH=/tmp/udf-site2 UDF_CACHE_DIR=/tmp/udf-cache2 timeout 200 $py -m pytest "$ROOTDIR"/python/tests/test_exact.py -m gpu -q -rs -p no:cacheprovider > $OUT/pytest_exact.log 2>&1; echo "pytest rc $?")
tail -4 $OUT/pytest_exact.log
