#!/bin/bash
# Where a cold first filtered result waits: UDF_PROFILE_LINK=1 in new processes with an empty cache.
# (.bench/whl: this tree's cp312 wheel; .bench/ttfr.py: bench/toolchain_bench.py's PY_TTFR, written by
#  python3 -c 'import re; open(".bench/ttfr.py", "w").write(re.search(r"PY_TTFR = r\"\"\"(.*?)\"\"\"", open("bench/toolchain_bench.py").read(), re.S).group(1))')
cd "$(dirname "$0")/.."
PY=/opt/torch/.venv/bin/python
W=/tmp/udf_w; rm -rf $W; mkdir -p $W
$PY -m zipfile -e .bench/whl/*.whl $W; chmod +x $W/udf/bin/*
nproc; lscpu | grep -i "model name"
for udfs in metric filter builtin+filter metric filter builtin+filter; do
  C=$(mktemp -d)
  echo "== $udfs"
  CUDA_CACHE_DISABLE=1 UDF_PROFILE_LINK=1 UDF_CACHE_DIR=$C UDF_BENCH_DEVICE=1 UDF_BENCH_UDFS=$udfs PYTHONPATH=$W \
    $PY .bench/ttfr.py 2>&1 | sed 's/"import_s"/\n"import_s"/'
done
