#!/usr/bin/env bash
set -u
cd "$(dirname "$0")/.."
tar xJf .bench/dev.tar.xz
cp .bench/dev2/runtime_shards_test .device/bin/
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl=$(/opt/torch/.venv/bin/python -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[[ -n $nccl ]] && export UDF_NCCL_LIBRARY=$nccl
s=$(date +%s)
UDF_TEST_MODULE_DIR=.device/modules timeout 240 .device/bin/runtime_shards_test --gtest_brief=1 > $OUT/runtime_shards_test.log 2>&1
echo "runtime_shards_test rc $? at $(( $(date +%s) - s )) s"; grep -E "PASSED|FAILED|SKIPPED|ms total" $OUT/runtime_shards_test.log | head -8
B=.device/bin/search_bench M=.device/modules/bench.udfm
h="--rows 10000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 10000 --probes 32 --ks 10 --reps 150"
row() { grep -E "^\| clustered \| f32 \| weighted_l2 \| 10000 " $1 | awk -F'|' '{print $8, "p10", $9, "p90", $10, "coarse", $13, "scan", $15}'; }
for d in 0 1; do CUDA_VISIBLE_DEVICES=$d timeout 120 $B $M $h --json $OUT/alone_$d.json > $OUT/alone_$d.md 2>&1; echo "alone $d rc $?: $(row $OUT/alone_$d.md)"; done
CUDA_VISIBLE_DEVICES=0 timeout 120 $B $M $h --json $OUT/both_0.json > $OUT/both_0.md 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout 120 $B $M $h --json $OUT/both_1.json > $OUT/both_1.md 2>&1 &
wait
for d in 0 1; do echo "concurrent $d: $(row $OUT/both_$d.md)"; done
echo "at $(( $(date +%s) - s )) s"
c="--rows 20000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 10000 --probes 32 --ks 10"
timeout 200 $B $M $c --devices 0,1 --shard-layout vectors --testing-paths 0,2048 --path-rounds 6 --json $OUT/x2_ab.json > $OUT/x2_ab.md 2>&1
echo "x2_ab rc $? at $(( $(date +%s) - s )) s"; grep -E "^\| clustered \| f32 \| weighted_l2 \[" $OUT/x2_ab.md | awk -F'|' '{print $4, $8, $9, $10}'
