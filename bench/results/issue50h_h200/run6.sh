#!/bin/bash
# The final pack (this tree's wheel) against pack 1.13, alternated, two rounds; then runtime_shards_test.
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/udf-site .devpack/wheel/*.whl 2>&1 | tail -2
rm -rf /tmp/packs; mkdir -p /tmp/packs && tar xJf .devpack/tile/packs.tar.xz -C /tmp/packs
export PYTHONPATH=/tmp/udf-site UDF_CACHE_DIR=/tmp/udf-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
for r in 1 2; do for v in p113 p114; do
  echo "== $v round $r"
  if [[ $v == p113 ]]; then export UDF_KERNEL_PACK_DIR=/tmp/packs/p113; else unset UDF_KERNEL_PACK_DIR; fi
  timeout 150 python3 bench/exact_bench.py --metrics weighted_l2,l1,chebyshev,refine --batches 1,100,10000 --reps 5 --profile \
    --out $OUT/${v}_$r > $OUT/${v}_$r.log 2>&1
  grep -E "^\| [a-z]" $OUT/${v}_$r.log | cut -c1-150
done; done
unset UDF_KERNEL_PACK_DIR
tar xJf .devpack/shards.tar.xz
env UDF_TEST_MODULE_DIR=$PWD/.device/modules .device/bin/runtime_shards_test --gtest_brief=1 > $OUT/runtime_shards_test.log 2>&1
tail -3 $OUT/runtime_shards_test.log
