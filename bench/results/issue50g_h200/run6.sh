#!/bin/bash
set -u
cd "$(dirname "$0")/../.."
mkdir -p /tmp/packs && tar xJf .devpack/ab/pack75.tar.xz -C /tmp/packs
export PYTHONPATH=/tmp/udf-site UDF_CACHE_DIR=/tmp/udf-cache PYTHONUNBUFFERED=1
for r in 1 2 3; do for v in p112 p113; do
  if [[ $v == p112 ]]; then export UDF_KERNEL_PACK_DIR=/tmp/packs/pack75; else unset UDF_KERNEL_PACK_DIR; fi
  /opt/torch/.venv/bin/python .devpack/ab/refine_dist.py "$v round $r"
done; done
