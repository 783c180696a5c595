#!/bin/bash
# The binding A/B: the wheel of HEAD ("new") and the same wheel with the _ext of a665a2c ("old",
# before c04dfd3), alternated processes, three rounds.
set -u
py=/opt/torch/.venv/bin/python
rm -rf /tmp/site-new /tmp/site-old
$py -m pip install -q --no-deps --target /tmp/site-new .device/wheel/*.whl >/dev/null 2>&1
cp -r /tmp/site-new /tmp/site-old && cp .device/oldext/_ext*.so /tmp/site-old/udf/
for r in 1 2 3; do
  for side in old new; do
    PYTHONPATH=/tmp/site-$side UDF_CACHE_DIR=/tmp/udf-cache-$side $py bench/results/issue49v_h200/binding_ab.py $side
  done
done
