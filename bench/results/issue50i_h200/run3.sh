#!/bin/bash
# Nsight Compute (warp states, source counters) of tileT's exact scan at batch 2000.
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/udf-site .devpack/wheel/*.whl 2>&1 | tail -2
rm -rf /tmp/packs; mkdir -p /tmp/packs && tar xJf .devpack/tile2/packs.tar.xz -C /tmp/packs
export PYTHONPATH=/tmp/udf-site UDF_CACHE_DIR=/tmp/udf-cache PYTHONUNBUFFERED=1
export UDF_KERNEL_PACK_DIR=/tmp/packs/${NCU_PACK:-tileT}
NCU=/usr/local/cuda/bin/ncu
rm -f /tmp/rep5*
timeout 300 $NCU --kernel-name regex:rows_v1 --launch-skip 1 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
  --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis --section InstructionStats -o /tmp/rep5 \
  python3 .devpack/tile2/one_exact.py > $OUT/ncu_run.txt 2>&1
tail -3 $OUT/ncu_run.txt
$NCU -i /tmp/rep5.ncu-rep --page details > $OUT/ncu_tileT.txt 2>&1
grep -E "Duration|Issue Slots Busy|Registers Per|No Eligible|Executed Instructions  |Warp Cycles Per Issued" $OUT/ncu_tileT.txt | head
$NCU -i /tmp/rep5.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip -9 > $OUT/sass.csv.gz
ls -la $OUT
