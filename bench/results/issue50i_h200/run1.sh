#!/bin/bash
# A/B of the shipped pack 1.14 (the wheel's) against the new rows files (tileR), then the bit check.
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/udf-site .devpack/wheel/*.whl 2>&1 | tail -2
rm -rf /tmp/packs; mkdir -p /tmp/packs && tar xJf .devpack/tile2/packs.tar.xz -C /tmp/packs
export PYTHONPATH=/tmp/udf-site UDF_CACHE_DIR=/tmp/udf-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
(while true; do nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader; sleep 0.5; done) > $OUT/clocks.txt 2>&1 &
CL=$!
for r in 1 2; do for v in ${PACKS:-p114 tileR}; do
  echo "== $v round $r"
  if [[ $v == p114 ]]; then unset UDF_KERNEL_PACK_DIR; else export UDF_KERNEL_PACK_DIR=/tmp/packs/$v; fi
  timeout 120 python3 bench/exact_bench.py --metrics weighted_l2,l1,chebyshev --batches 100,10000 --reps 5 \
    --out $OUT/${v}_$r > $OUT/${v}_$r.log 2>&1
  grep -E "^\| [a-z]" $OUT/${v}_$r.log | cut -c1-130
done; done
kill $CL
export UDF_KERNEL_PACK_DIR=/tmp/packs/${CHECK_PACK:-tileR}
timeout 200 python3 .devpack/tile2/check.py > $OUT/check.log 2>&1; echo "check rc $?"
grep -E "FAIL|check:" $OUT/check.log | head -20; tail -3 $OUT/check.log
sort $OUT/clocks.txt | uniq -c | sort -rn | head -5
