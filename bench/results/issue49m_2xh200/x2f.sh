#!/usr/bin/env bash
set -u
cd "$(dirname "$0")/.."
tar xJf .bench/dev.tar.xz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl=$(/opt/torch/.venv/bin/python -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[[ -n $nccl ]] && export UDF_NCCL_LIBRARY=$nccl
s=$(date +%s)
for t in runtime_shards_test runtime_wrapper_shards_test; do
  UDF_TEST_MODULE_DIR=.device/modules timeout 240 .device/bin/$t --gtest_brief=1 > $OUT/$t.log 2>&1
  echo "$t rc $? at $(( $(date +%s) - s )) s"; grep -E "PASSED|FAILED|SKIPPED|ms total|Failure" $OUT/$t.log | head -8
done
B=.device/bin/search_bench M=.device/modules/bench.udfm
c="--rows 20000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 1,10000 --probes 32 --ks 10"
timeout 250 $B $M $c --devices 0,1 --shard-layout vectors --testing-paths 0,4096,6144 --path-rounds 5 --json $OUT/x2_ab.json > $OUT/x2_ab.md 2>&1
echo "x2_ab rc $? at $(( $(date +%s) - s )) s"; grep -E "^\| clustered \| f32 \| weighted_l2 \[" $OUT/x2_ab.md | awk -F'|' '{print $4, $5, $8, $9, $10}'
timeout 200 $B $M $c --json $OUT/x1.json > $OUT/x1.md 2>&1
echo "x1 rc $? at $(( $(date +%s) - s )) s"; grep -E "^\| clustered \| f32 \| weighted_l2 \| " $OUT/x1.md | awk -F'|' '{print $5, $8, $9, $10, "coarse", $13}'
cd $OUT && tar czf logs.tgz *.log *.md *.json && rm -f *.log *.md *.json
