#!/usr/bin/env bash
# Issue 33: the GPU timeline of batch 10k (P32, P128), lib with the host copy pool: nsys cuda trace.
set -u
rm -rf .device; tar xJf .devpack/dev.tar.xz
R=/tmp/r52; mkdir -p $R
NSYS=$(ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1); echo "nsys: $NSYS"
c=(--rows 1000000 --lists 1024 --elem f32 --ks 10 --spread 0.92 --batches 10000 --reps 5)
for p in 32 128; do
LD_LIBRARY_PATH=$PWD/.device/lib timeout 200 $NSYS profile -t cuda,osrt --cuda-memory-usage=false -o $R/p$p -f true .device/bin/search_bench .device/v/s45base/plain.udfm "${c[@]}" --probes $p --data overlap --metrics weighted_l2 > $R/run_p$p.txt 2>&1; echo "nsys p$p rc=$? $SECONDS"
$NSYS stats --report cuda_gpu_trace --format csv -o $R/p$p $R/p$p.nsys-rep > /dev/null 2>&1; echo "stats rc=$?"
$NSYS stats --report cuda_api_trace --format csv -o $R/p$p $R/p$p.nsys-rep > /dev/null 2>&1
rm -f $R/p$p.nsys-rep $R/p$p.sqlite
done
ls -la $R
tar cf - -C /tmp r52 | xz -1 > $OUT/r52.tar.xz
