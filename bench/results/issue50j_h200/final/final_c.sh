#!/bin/bash
# The Python GPU tests of exact search and refine, with the staged wheel installed by the suite's interpreter.
set -u
cd "$(dirname "$0")/.."
[[ -d .device/wheel ]] || tar xf .devpy/dev.tar
py=/opt/torch/.venv/bin/python
$py --version
rm -rf /tmp/udf-site2 && $py -m pip install -q --no-deps --no-index --no-compile --target /tmp/udf-site2 .device/wheel/*.whl 2>&1 | tail -2
ROOTDIR=$PWD
cd /tmp && UDF_PYTHON_DIR=/tmp/udf-site2 PYTHONPATH=/tmp/udf-site2 UDF_CACHE_DIR=/tmp/udf-cache2 timeout 300 $py -m pytest "$ROOTDIR"/python/tests/test_exact.py -m gpu -q -rs -p no:cacheprovider -x > $OUT/pytest_exact.log 2>&1; echo "pytest rc $?"
tail -15 $OUT/pytest_exact.log
