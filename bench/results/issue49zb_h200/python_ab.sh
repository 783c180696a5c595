#!/usr/bin/env bash
# Device call 1: Python's cold first result with the background links in waves
# (this tree's wheel, dist/) and without (the same wheel given the previous
# libudf_runtime.so.3, .bench/oldrt.so.xz: fc32bc3's runtime, whose on-demand
# links all started at once); alternated old, new, four rounds of
# toolchain_bench's Python rows, cold (an empty cache per process); then one
# cold filtered process of each with UDF_PROFILE_LINK=1, two rounds.
set -uo pipefail
py=/opt/torch/.venv/bin/python
mkdir -p "$OUT" /tmp/tb
nproc; grep -m1 "model name" /proc/cpuinfo; uptime
rm -rf /tmp/site-new /tmp/site-old
$py -m pip install -q --no-deps --target /tmp/site-new dist/udf-*cp312*.whl
cp -a /tmp/site-new /tmp/site-old
xz -dc .bench/oldrt.so.xz > /tmp/site-old/udf/lib/libudf_runtime.so.3
sha256sum /tmp/site-{old,new}/udf/lib/libudf_runtime.so.3
for round in 1 2 3 4; do
  for who in old new; do
    echo "=== round $round $who"
    CUDA_CACHE_DISABLE=1 timeout 120 $py bench/toolchain_bench.py --cases python --python-device --python-path /tmp/site-$who \
      --python-udfs metric,filter,builtin+filter --reps 5 --skip-warm --out /tmp/tb --tag waves_${who}_$round 2>&1 | grep -E "cold|Machine"
  done
done
$py -c "import sys; sys.path.insert(0, 'bench'); import toolchain_bench as t; open('/tmp/ttfr.py', 'w').write(t.PY_TTFR)"
for round in 1 2; do
  for who in old new; do
    c=$(mktemp -d)
    echo "== $who $round" >> /tmp/tb/profile_link.log
    CUDA_CACHE_DISABLE=1 UDF_PROFILE_LINK=1 UDF_BENCH_DEVICE=1 UDF_BENCH_UDFS=filter UDF_CACHE_DIR=$c \
      PYTHONPATH=/tmp/site-$who timeout 60 $py /tmp/ttfr.py >> /tmp/tb/profile_link.log 2>&1
    rm -rf "$c"
  done
done
cut -c1-300 /tmp/tb/profile_link.log
tar -C /tmp -cf "$OUT/tb.tar" tb
