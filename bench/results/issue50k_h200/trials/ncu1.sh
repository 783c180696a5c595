#!/bin/bash
# Nsight Compute of the rows scan, HEAD's pack (old) against the two-group fold (new): L1 and weighted L2, batch 10k.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
echo "ncu: $NCU"
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sector_op_read_hit_rate.pct,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio
for metric in l1 weighted_l2; do for v in old new; do
  echo "== $metric $v"
  timeout 120 $NCU --kernel-name regex:udf_ivf_rows --launch-skip 1 --launch-count 1 --metrics $M \
    bin/exact_search_bench mod/exact_$v.udfm --batches 10000 --reps 1 --metrics $metric > $OUT/ncu_${metric}_$v.txt 2>&1
  grep -E "^\s+(gpu__|dram__|lts__|smsp__|l1tex__)" $OUT/ncu_${metric}_$v.txt | sed 's/  */ /g'
done; done
