#!/bin/bash
# The Python package's GPU filter tests (python/tests/test_filter.py -m gpu) on this tree's cp312 wheel
# (on-demand modules whose filtered scans link in the background).
cd "$(dirname "$0")/.."; root=$PWD
PY=/opt/torch/.venv/bin/python
site=/tmp/udf-site-f; rm -rf $site
$PY -m pip install -q --no-deps --no-index --target $site .bench/whl_new/*.whl
cd /tmp && UDF_PYTHON_DIR=$site UDF_CACHE_DIR=/tmp/udf-cache-f timeout 300 $PY -m pytest $root/python/tests/test_filter.py \
  -m gpu -q -rs -p no:cacheprovider 2>&1 | tail -15
