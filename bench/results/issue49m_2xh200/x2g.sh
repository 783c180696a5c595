#!/usr/bin/env bash
# Own slices first (this tree) against 3388e30's in-order hand-on, alternated processes; each
# process also times bit 2048 (each device stages all) as its own baseline.
set -u
cd "$(dirname "$0")/.."
rm -rf .device; tar xJf .bench/dev.tar.xz
mkdir -p .bench/lib_new && cp .device/lib/libudf_runtime.so.3 .bench/lib_new/
xz -dkf .bench/lib_prev/libudf_runtime.so.3.xz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl=$(/opt/torch/.venv/bin/python -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[[ -n $nccl ]] && export UDF_NCCL_LIBRARY=$nccl
s=$(date +%s)
UDF_TEST_MODULE_DIR=.device/modules timeout 200 .device/bin/runtime_shards_test --gtest_brief=1 > $OUT/runtime_shards_test.log 2>&1
echo "runtime_shards_test rc $? at $(( $(date +%s) - s )) s"; grep -E "PASSED|FAILED|Failure" $OUT/runtime_shards_test.log | head -5
B=.device/bin/search_bench M=.device/modules/bench.udfm
c="--rows 20000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 10000 --probes 32 --ks 10 --devices 0,1 --shard-layout vectors --testing-paths 0,2048 --path-rounds 3"
for r in 1 2; do for v in prev new; do
  LD_LIBRARY_PATH=$PWD/.bench/lib_$v timeout 150 $B $M $c --json $OUT/${v}_$r.json > $OUT/${v}_$r.md 2>&1
  echo "== $v $r rc $? at $(( $(date +%s) - s )) s"; grep -E "^\| clustered \| f32 \| weighted_l2 \[" $OUT/${v}_$r.md | awk -F'|' '{print $4, $8}' | tr '\n' ' '; echo
done; done
