#!/bin/bash
# CuPy arrays as raw tuples and CuPy's stream waited for on the GPU: HEAD's wheel ("old") against
# the same wheel with this tree's Python files ("new"), alternated processes, three rounds
# (binding_ab.py); then the GPU tests of the files this change touches, on "new".
set -u
py=/opt/torch/.venv/bin/python
rm -rf /tmp/site-new /tmp/site-old
$py -m pip install -q --no-deps --target /tmp/site-old .device/wheel/*.whl >/dev/null 2>&1
cp -r /tmp/site-old /tmp/site-new && cp python/udf/*.py /tmp/site-new/udf/
$py -c "import cupy; print('cupy', cupy.__version__)"
for r in 1 2 3; do
  for side in old new; do
    PYTHONPATH=/tmp/site-$side UDF_CACHE_DIR=/tmp/udf-cache-$side $py bench/results/issue49v_h200/binding_ab.py $side
  done
done
UDF_PYTHON_DIR=/tmp/site-new UDF_CACHE_DIR=/tmp/udf-cache-new timeout 400 $py -m pytest -q -rs -p no:cacheprovider \
  -m gpu python/tests/test_gpu.py python/tests/test_exact.py python/tests/test_api.py 2>&1 | tail -25
