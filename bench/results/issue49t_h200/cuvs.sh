#!/bin/bash
# cuVS 26.10 beside this tree's wheel in one process (bench/README.md,
# "Carrying cuVS to the GPU machine"): the parts already in /tmp/cuvs-parts.
# $1: the commit; $2...: cuvs_compare.py options.
set -e; C=$1; shift
cat /tmp/cuvs-parts/cuvs-site.tar.xz.part0[0-4] > /tmp/cuvs.tar.xz
test "$(sha256sum < /tmp/cuvs.tar.xz | cut -d' ' -f1)" = "$(awk '/^sha256 /{print $2}' .cuvs/MANIFEST.txt)"
rm -rf /tmp/cuvs-site && mkdir -p /tmp/cuvs-site && tar -xJf /tmp/cuvs.tar.xz -C /tmp/cuvs-site
python3 -m pip install -q --no-deps --no-index --no-compile --upgrade --target /tmp/udf-site .device/wheel/udf-*-cp312-*.whl
V=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export PYTHONPATH=/tmp/cuvs-site:/tmp/udf-site PYTHONUNBUFFERED=1 UDF_CACHE_DIR=/tmp/udf-cache
export LD_LIBRARY_PATH=/tmp/cuvs-site/nvidia/cu13/lib:$V/nvidia/cu13/lib:$V/nvidia/nccl/lib
set -o pipefail
python3 bench/cuvs_compare.py --commit $C --json $OUT/cuvs_compare.json "$@" 2>&1 | tee $OUT/cuvs_compare.log | grep -v "^  "
