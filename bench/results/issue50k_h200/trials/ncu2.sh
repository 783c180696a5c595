#!/bin/bash
# Nsight Compute source counters (SASS) of the z1 fold: weighted L2 and L1, batch 10k.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
NCU=/usr/local/cuda/bin/ncu
for metric in weighted_l2 l1; do
  rm -f /tmp/rep_$metric*
  timeout 200 $NCU --kernel-name regex:udf_ivf_rows --launch-skip 1 --launch-count 1 \
    --section WarpStateStats --section SchedulerStats --section SourceCounters --section InstructionStats -o /tmp/rep_$metric \
    bin/exact_search_bench mod/exact_z1.udfm --batches 10000 --reps 1 --metrics $metric > $OUT/ncu2_run_$metric.txt 2>&1
  $NCU -i /tmp/rep_$metric.ncu-rep --page details > $OUT/ncu2_$metric.txt 2>&1
  grep -E "Issue Slots Busy|No Eligible|Executed Instructions  |Warp Cycles Per Issued|Eligible Warps" $OUT/ncu2_$metric.txt | head
  $NCU -i /tmp/rep_$metric.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip -9 > $OUT/sass_$metric.csv.gz
done
ls -la $OUT
