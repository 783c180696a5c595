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
MODS="bench" ROUNDS=2 bash .bench/x2_ab.sh 2>&1 | grep -E "==|10000 \| 32|total"
