#!/bin/bash
# Exact search tiles experiment + HEAD pack against this tree's kernels (merged offer loop).
set -u
cd "$(dirname "$0")/.."
tar xf .devpy/dev.tar
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/udf-site .device/wheel/*.whl 2>&1 | tail -2
rm -rf /tmp/packs; mkdir -p /tmp/packs && tar xJf .devpy/pb019.tar.xz -C /tmp/packs
export PYTHONPATH=/tmp/udf-site UDF_CACHE_DIR=/tmp/udf-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for r in 1 2; do for v in b019 new; do
  if [[ $v == b019 ]]; then export UDF_KERNEL_PACK_DIR=/tmp/packs/b019; else unset UDF_KERNEL_PACK_DIR; fi
  timeout 120 python3 .devpy/tiles.py $v 64 10000 > $OUT/ab_${v}_$r.log 2>&1; echo "$v $r rc $?"
  grep -E '"ms"|DIFF|check' $OUT/ab_${v}_$r.log | cut -c1-160
done; done
unset UDF_KERNEL_PACK_DIR
timeout 300 python3 .devpy/tiles.py new 8,16,32,64 10000,2000 --profile > $OUT/tiles.log 2>&1; echo "tiles rc $?"
grep -E '"ms"|DIFF|check' $OUT/tiles.log | cut -c1-160
grep -A12 "tiles 16\|tiles 64" $OUT/tiles.log | cut -c1-150 | head -60
