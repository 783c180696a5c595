#!/bin/bash
set -u
cd "$(dirname "$0")/.."
tar xf .devpy/dev.tar
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/udf-site .device/wheel/*.whl 2>&1 | tail -2
rm -rf /tmp/packs; mkdir -p /tmp/packs && tar xJf .devpy/packs2.tar.xz -C /tmp/packs
export PYTHONPATH=/tmp/udf-site UDF_CACHE_DIR=/tmp/udf-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
export UDF_KERNEL_PACK_DIR=/tmp/packs/mb5
timeout 200 python3 .devpy/tl.py mb5 0,1 100,1000,10000,2000 10000,2000 > $OUT/mb5_1.log 2>&1; echo "mb5 rc $?"
grep -E '"ms"|DIFF|check' $OUT/mb5_1.log | cut -c1-160
export UDF_KERNEL_PACK_DIR=/tmp/packs/b019
timeout 100 python3 .devpy/tl.py b019 0 10000,2000 > $OUT/b019_1.log 2>&1; echo "b019 rc $?"
grep -E '"ms"|DIFF|check' $OUT/b019_1.log | cut -c1-160
export UDF_KERNEL_PACK_DIR=/tmp/packs/mb5
timeout 100 python3 .devpy/tl.py mb5 1 10000,2000 > $OUT/mb5_2.log 2>&1; echo "mb5 rc $?"
grep -E '"ms"|DIFF|check' $OUT/mb5_2.log | cut -c1-160
export UDF_EXP_TILED_LAUNCH=1
timeout 150 python3 .devpy/check.py > $OUT/check.log 2>&1; echo "check rc $?"
grep -E "FAIL|check:" $OUT/check.log | head
