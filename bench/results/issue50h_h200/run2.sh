#!/bin/bash
# Timing of tile (j loop not unrolled) against tileU (unrolled), then Nsight Compute on tileU's exact scan at batch 2000.
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/udf-site .devpack/wheel/*.whl 2>&1 | tail -2
rm -rf /tmp/packs; mkdir -p /tmp/packs && tar xJf .devpack/tile/packs.tar.xz -C /tmp/packs
export PYTHONPATH=/tmp/udf-site UDF_CACHE_DIR=/tmp/udf-cache PYTHONUNBUFFERED=1
for v in tileU tile; do
  echo "== $v"
  export UDF_KERNEL_PACK_DIR=/tmp/packs/$v
  timeout 150 python3 bench/exact_bench.py --metrics weighted_l2,l1 --batches 100,10000 --reps 5 --profile \
    --out $OUT/${v}_2 > $OUT/${v}_2.log 2>&1
  grep -E "^\| [a-z]" $OUT/${v}_2.log | cut -c1-120
done
export UDF_KERNEL_PACK_DIR=/tmp/packs/${NCU_PACK:-tileU}
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
echo "ncu: $NCU"
timeout 240 $NCU --kernel-name regex:rows_v1 --launch-skip 1 --launch-count 1 --set full \
  python3 .devpack/tile/one_exact.py > $OUT/ncu_tile.txt 2>&1
grep -E "Duration|Issue Slots Busy|Executed Ipc A|Registers Per|Achieved Occupancy|Theoretical Occ|Block Limit|Stall|L2 Cache Throughput|L1/TEX Cache Throughput|DRAM Throughput|Compute \(SM\)|Warp Cycles Per Issued|One or More|No Eligible|Bank" $OUT/ncu_tile.txt | head -60
