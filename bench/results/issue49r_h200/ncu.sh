#!/bin/bash
# Nsight Compute on the build's nearest-lists kernels: a k-means launch of a
# 1M x 128, 4096-list build (the fourth), wide and narrow (issue 49).
set -u
D=/tmp/dev; [ -d $D/bin ] || { mkdir -p $D; tar -C $D -xJf .bench/dev.tar.xz --strip-components=1; }
export LD_LIBRARY_PATH=$D/lib
M=smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed.sum,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio
for p in ${PATHS:-0 4096}; do
  k=udf_ivf_index_v1_nearest_wide; [ $p = 4096 ] && k=udf_ivf_index_v1_nearest
  timeout 250 ncu --clock-control none --kernel-name $k --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --metrics $M \
    $D/bin/search_bench $D/modules/bench.udfm --rows 1000000 --lists 4096 --data overlap --elem f32 --metrics l2 \
    --batches 100 --probes 32 --ks 10 --reps 2 --testing-paths $p > $OUT/ncu_$p.txt 2>&1
  echo "=== $k"; grep -E "Duration|Issue Slots Busy|stalled|inst_executed|Registers Per|Achieved Occ" $OUT/ncu_$p.txt
done
