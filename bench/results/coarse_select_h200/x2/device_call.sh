#!/usr/bin/env bash
set -u
cd "$(dirname "$0")/.."
tar xJf .bench/dev.tar.xz
mkdir -p .bench/lib_new && cp .device/lib/libudf_runtime.so.3 .bench/lib_new/
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl=$(/opt/torch/.venv/bin/python -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[[ -n $nccl ]] && export UDF_NCCL_LIBRARY=$nccl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s=$(date +%s)
for t in runtime_shards_test runtime_wrapper_shards_test; do
  UDF_TEST_MODULE_DIR=.device/modules timeout 200 .device/bin/$t --gtest_brief=1 > $OUT/$t.log 2>&1
  echo "$t rc $? in $(( $(date +%s) - s )) s"; grep -E "PASSED|FAILED|SKIPPED|ms total" $OUT/$t.log
done
B=.device/bin/search_bench M=.device/modules/bench.udfm
A=(--rows 20000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 1,10000 --probes 32 --ks 10)
for v in head new; do
  for d in one two; do
    extra=(); [[ $d == two ]] && extra=(--devices 0,1 --shard-layout vectors)
    LD_LIBRARY_PATH=$PWD/.bench/lib_$v timeout 150 $B $M "${A[@]}" "${extra[@]}" --json $OUT/x2_${v}_$d.json > $OUT/x2_${v}_$d.md 2>&1
    echo "== $v $d rc $? at $(( $(date +%s) - s )) s"; grep -E "^\| clustered \| f32 \| weighted_l2 \| (1|10000) " $OUT/x2_${v}_$d.md
  done
done
