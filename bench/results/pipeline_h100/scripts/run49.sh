#!/usr/bin/env bash
# Issue 33: where the fold's limit is: ncu pipe / shared-memory metrics of the k32 weighted-L2 scan, s45base and smemw3 (weights in shared memory).
set -u
rm -rf .device; tar xJf .devpack/dev.tar.xz
export LD_LIBRARY_PATH=$PWD/.device/lib
R=/tmp/r49; mkdir -p $R
common=(--rows 1000000 --lists 1024 --elem f32 --ks 10 --spread 0.92)
NCU=/usr/local/cuda/bin/ncu
M=l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_uniform.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__lsuin_requests.sum,l1tex__f_wavefronts.sum
for v in s45base smemw3; do
timeout 200 $NCU --kernel-name regex:udf_ivf_scan_v1 --launch-skip 4 --launch-count 1 \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section SpeedOfLight --section Occupancy \
  --metrics $M -o $R/$v -f .device/bin/search_bench .device/v/$v/plain.udfm "${common[@]}" --data overlap --metrics weighted_l2 --batches 10000 --probes 32 --reps 5 > $R/ncu_run_$v.txt 2>&1
echo "ncu $v rc=$? $SECONDS"
$NCU -i $R/$v.ncu-rep --page details > $R/${v}_details.txt 2>&1
$NCU -i $R/$v.ncu-rep --page raw --csv > $R/${v}_raw.csv 2>&1
rm -f $R/$v.ncu-rep
done
tar cf - -C /tmp r49 | xz -1 > $OUT/r49.tar.xz
