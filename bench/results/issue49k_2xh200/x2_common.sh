# Sourced by the x2_*.sh scripts (run from the repository root on the 2 x H200 machine, .bench/
# carried with dev.tar.xz = test/gpu/stage_device.sh --no-wheel's .device/, tarred).
[[ -d .device ]] || tar xJf .bench/dev.tar.xz
export NCCL_NVLS_ENABLE=0
nccl=$(/opt/torch/.venv/bin/python -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[[ -n $nccl ]] && export UDF_NCCL_LIBRARY=$nccl
B=.device/bin/search_bench
r() { local n=$1; shift; "$@" --json $OUT/$n.json > $OUT/$n.md 2>&1; echo "== $n rc $?"; grep -E "^\| clustered" $OUT/$n.md; }
