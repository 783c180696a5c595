#!/bin/bash
# x2 call 2: 20M x 128, 4096 lists: one GPU, and two GPUs with the coarse probe shared out (paths 0)
# against each device probing the whole batch (paths 512), alternated in one process.
set -u
cd "$(dirname "$0")/.."
t0=$(date +%s)
[[ -d .device ]] || tar xJf .bench/dev.tar.xz
export NCCL_NVLS_ENABLE=0
nccl=$(/opt/torch/.venv/bin/python -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[[ -n $nccl ]] && export UDF_NCCL_LIBRARY=$nccl
B=.device/bin/search_bench
common="--rows 20000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 1,10000 --probes 32 --ks 10"
run() {
  local name=$1; shift
  local s=$(date +%s)
  $B "$@" --json $OUT/$name.json > $OUT/$name.md 2>&1
  echo "== $name rc $? in $(( $(date +%s) - s )) s"
  grep -E "^\| clustered" $OUT/$name.md
}
for mod in ${MODS:-bench}; do
  run ${mod}_2gpu_ab .device/modules/$mod.udfm $common --devices 0,1 --shard-layout vectors --testing-paths 0,512 --path-rounds ${ROUNDS:-3}
  run ${mod}_1gpu .device/modules/$mod.udfm $common
done
echo "total $(( $(date +%s) - t0 )) s"
