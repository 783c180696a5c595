set -u
cd "$(dirname "$0")/.."
rm -rf .device; tar xJf .bench/dev.tar.xz
export NCCL_NVLS_ENABLE=0
nccl=$(/opt/torch/.venv/bin/python -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[[ -n $nccl ]] && export UDF_NCCL_LIBRARY=$nccl
B=.device/bin/search_bench
c="--rows 20000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 10000 --probes 32 --ks 10 --reps 10"
LD_LIBRARY_PATH=$PWD/.bench/tr/lib UDF_TRACE_SHARDS=1 $B .device/modules/bench.udfm $c --devices 0,1 > $OUT/trace_2gpu.md 2> $OUT/trace_2gpu.err
echo "rc $?"; grep -E "^\| clustered.*10000" $OUT/trace_2gpu.md; grep TRACE $OUT/trace_2gpu.err | tail -14
