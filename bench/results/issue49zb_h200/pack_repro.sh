#!/usr/bin/env bash
# Device call 4: the kernel pack compiled on the GPU machine (Ubuntu 24.04, its
# own CUDA 13.0 toolkit) with the build's own nvcc commands (pack_commands.txt:
# `ninja -t commands kernels/all` of build/, the output folder renamed), each
# through cmake/pinned_sources.py as the build runs them; the files' SHA-256
# (pack_sha_gpu_machine.txt) are compared with the 2-core CPU machine's build
# (Debian 12, pack_sha_cpu2.txt).  Every third command only (33 of 98): the
# device time left allowed no more.
set -uo pipefail
mkdir -p "$OUT" /tmp/pack
export PATH=/usr/local/cuda/bin:$PATH
{ nvcc --version | tail -2; grep PRETTY_NAME /etc/os-release; python3 --version; } | tee "$OUT/pack_env.txt"
root=$PWD
cd kernels
start=$(date +%s)
xargs -P 16 -d '\n' -I{} sh -c "python3 $root/cmake/pinned_sources.py --source-root $root --stage-root=/tmp/udf-kernel-src -- {} || echo FAILED: {}" \
  < <(awk 'NR % 3 == 1' "$root/bench/results/issue49zb_h200/pack_commands.txt") 2>&1 | tail -5
echo "compiled in $(( $(date +%s) - start )) s" | tee -a "$OUT/pack_env.txt"
cd /tmp/pack && sha256sum *.ltoir > "$OUT/pack_sha_gpu_machine.txt"; wc -l < "$OUT/pack_sha_gpu_machine.txt"
cd "$root/bench/results/issue49zb_h200" && while read -r sum f; do
  grep -q "^$sum  $f\$" pack_sha_cpu2.txt && echo "same: $f" || echo "DIFFERENT: $f"; done < "$OUT/pack_sha_gpu_machine.txt" > "$OUT/pack_compare.txt"
cut -d: -f1 "$OUT/pack_compare.txt" | sort | uniq -c
