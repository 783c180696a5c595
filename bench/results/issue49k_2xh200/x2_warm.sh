set -u
cd "$(dirname "$0")/.."
rm -rf .device; tar xJf .bench/dev.tar.xz
export NCCL_NVLS_ENABLE=0
nccl=$(/opt/torch/.venv/bin/python -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[[ -n $nccl ]] && export UDF_NCCL_LIBRARY=$nccl
s=$(date +%s)
for t in runtime_shards_test runtime_wrapper_shards_test; do
  UDF_TEST_MODULE_DIR=.device/modules timeout 200 .device/bin/$t --gtest_brief=1 > $OUT/$t.log 2>&1
  echo "$t rc $? in $(( $(date +%s) - s )) s"; grep -E "PASSED|FAILED|SKIPPED|ms total" $OUT/$t.log
done
B=.device/bin/search_bench
c="--rows 20000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 1,10000 --probes 32 --ks 10"
r() { local n=$1; shift; "$@" --json $OUT/$n.json > $OUT/$n.md 2>&1; echo "== $n rc $?"; grep -E "^\| clustered.*\| (1|10000) \| 32" $OUT/$n.md; }
for round in 1 2; do
  LD_LIBRARY_PATH=$PWD/.bench/base_lib r base_2gpu_$round $B .device/modules/bench.udfm $c --devices 0,1
  r new_2gpu_$round $B .device/modules/bench.udfm $c --devices 0,1
done
r new_1gpu $B .device/modules/bench.udfm $c
