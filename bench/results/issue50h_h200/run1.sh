#!/bin/bash
# Exact search with the tiled fold: pack 1.13 (no tile) against the new pack (tile, ptxas's registers)
# and the new pack with min_blocks_per_sm 6 on the v1 f32 rows entries (tile6), one wheel (this tree's runtime).
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/udf-site .devpack/wheel/*.whl 2>&1 | tail -2
mkdir -p /tmp/packs && tar xJf .devpack/tile/packs.tar.xz -C /tmp/packs
export PYTHONPATH=/tmp/udf-site UDF_CACHE_DIR=/tmp/udf-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for r in ${ROUNDS:-1}; do for v in ${PACKS:-p113 tile tile6}; do
  echo "== $v round $r"
  export UDF_KERNEL_PACK_DIR=/tmp/packs/$v
  timeout 200 python3 bench/exact_bench.py --metrics ${METRICS:-weighted_l2,l1,refine} --batches ${BATCHES:-1,100,10000} --reps ${REPS:-5} --profile \
    --out $OUT/${v}_$r > $OUT/${v}_$r.log 2>&1
  grep -E "^\| [a-z]|udf_ivf_rows|^\s+[0-9.]+ ms" $OUT/${v}_$r.log | cut -c1-170
done; done
