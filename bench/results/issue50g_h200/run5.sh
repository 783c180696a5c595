#!/bin/bash
# Pack 1.13 (the wheel's own: rows families also for compute_80) against pack 1.12 (compute_75 only), alternated:
# exact search of the weighted L2 and refine at batch 1, 100 and 10k, with each udf row's kernels.
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/udf-site .devpack/wheel/*.whl 2>/dev/null
mkdir -p /tmp/packs && tar xJf .devpack/ab/pack75.tar.xz -C /tmp/packs
export PYTHONPATH=/tmp/udf-site UDF_CACHE_DIR=/tmp/udf-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for r in 1 2; do for v in p112 p113; do
  echo "== $v round $r"
  if [[ $v == p112 ]]; then export UDF_KERNEL_PACK_DIR=/tmp/packs/pack75; else unset UDF_KERNEL_PACK_DIR; fi
  python3 bench/exact_bench.py --metrics ${METRICS:-weighted_l2,refine} --batches 1,100,10000 --reps ${REPS:-5} --profile \
    --out $OUT/${v}_$r > $OUT/${v}_$r.log 2>&1
  grep -E "^\| [a-z]|kernels of one call|udf_ivf_rows|^\s+[0-9.]+ ms" $OUT/${v}_$r.log | cut -c1-160
done; done
