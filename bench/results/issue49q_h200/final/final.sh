# Pack 1.16 (filtered scans prune): the native GPU suite on this tree's build.
cd "$(dirname "$0")/../../../.."
s=$(date +%s)
[[ -d .device/bin ]] || tar xJf .bench/dev.tar.xz
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 560 bash test/gpu/device_suite.sh --part native > $OUT/device_suite_native.log 2>&1
echo "device_suite rc $? at $(( $(date +%s) - s )) s"
grep -E "^(ok|FAIL|PASS|step|==)|passed|FAILED|PASSED|skipped" $OUT/device_suite_native.log | tail -40
