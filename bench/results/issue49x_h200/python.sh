#!/usr/bin/env bash
# Device call, after python_a.sh: toolchain_bench's Python rows with 5cc6eb6's
# wheel (installed by python_a.sh) and this tree's (.device/wheel), alternated
# old, new, old, new in one warm machine; then the Python package's GPU tests
# on the new wheel.
set -uo pipefail
py=/opt/torch/.venv/bin/python
mkdir -p "$OUT"
rm -rf /tmp/site-49x-new && $py -m pip install -q --no-deps --target /tmp/site-49x-new .device/wheel/*.whl
for round in 1 2; do
  for who in old new; do
    CUDA_CACHE_DISABLE=1 timeout 200 $py bench/toolchain_bench.py --cases python --python-device --python-path /tmp/site-49x-$who \
      --python-udfs metric,filter,builtin+filter --reps 5 --out "$OUT" --tag python_49x_${who}_$round 2>&1 | tail -8
  done
done
# One cold process of each wheel with UDF_PROFILE_LINK=1 (the metric + filter
# row): each background link's span and nvJitLink time, and the search's wait.
$py -c "import sys; sys.path.insert(0, 'bench'); import toolchain_bench as t; open('/tmp/ttfr_49x.py', 'w').write(t.PY_TTFR)"
for round in 1 2; do
  for who in old new; do
    c=$(mktemp -d)
    echo "== $who $round" >> "$OUT/profile_link.log"
    CUDA_CACHE_DISABLE=1 UDF_PROFILE_LINK=1 UDF_BENCH_DEVICE=1 UDF_BENCH_UDFS=filter UDF_CACHE_DIR=$c \
      PYTHONPATH=/tmp/site-49x-$who timeout 60 $py /tmp/ttfr_49x.py >> "$OUT/profile_link.log" 2>&1
    rm -rf "$c"
  done
done
grep -E "^==|waited|first_result" "$OUT/profile_link.log" | cut -c1-200
UDF_PYTHON_DIR=/tmp/site-49x-new UDF_CACHE_DIR=/tmp/udf-cache-49x PYTHONPATH=/tmp/site-49x-new \
  timeout 250 $py -m pytest -q -p no:cacheprovider -m gpu python/tests 2>&1 | tail -3 | tee "$OUT/pytest_gpu.log"
