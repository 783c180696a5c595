#!/bin/bash
# Batch 10k only: tileR, tileS, tileT alternated, two rounds.
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/udf-site .devpack/wheel/*.whl 2>&1 | tail -2
rm -rf /tmp/packs; mkdir -p /tmp/packs && tar xJf .devpack/tile2/packs.tar.xz -C /tmp/packs
export PYTHONPATH=/tmp/udf-site UDF_CACHE_DIR=/tmp/udf-cache PYTHONUNBUFFERED=1
for r in 1 2; do for v in ${PACKS:-tileT tileU}; do
  export UDF_KERNEL_PACK_DIR=/tmp/packs/$v
  timeout 100 python3 bench/exact_bench.py --metrics weighted_l2,l1,chebyshev --batches 10000 --reps 3 --cdist-queries 100 \
    --out $OUT/${v}_$r > $OUT/${v}_$r.log 2>&1
  echo "$v $r: $(grep -E '^\| [a-z]' $OUT/${v}_$r.log | grep -v metric | awk -F'|' '{printf "%s %s %s; ", $2, $4, $8}')"
done; done
export UDF_KERNEL_PACK_DIR=/tmp/packs/${CHECK_PACK:-tileU}
timeout 200 python3 .devpack/tile2/check.py > $OUT/check.log 2>&1; echo "check rc $?"
grep -E "FAIL|check:" $OUT/check.log | head -20
