#!/bin/bash
# cuvs_compare.py at 10M x 128 beside cuVS 26.10, three data seeds, 10k recall queries, P24/32/40,
# batch 10k only, no host builds: is the 10M recall gap at P32 more than the draw's spread?
set -e
cat /tmp/cuvs-parts/cuvs-site.tar.xz.part0[0-4] > /tmp/cuvs.tar.xz
test "$(sha256sum < /tmp/cuvs.tar.xz | cut -d' ' -f1)" = "$(awk '/^sha256 /{print $2}' .cuvs/MANIFEST.txt)"
rm -rf /tmp/cuvs-site && mkdir -p /tmp/cuvs-site && tar -xJf /tmp/cuvs.tar.xz -C /tmp/cuvs-site
python3 -m pip install -q --no-deps --no-index --no-compile --upgrade --target /tmp/udf-site .device/wheel/udf-*-cp312-*.whl
V=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export PYTHONPATH=/tmp/cuvs-site:/tmp/udf-site PYTHONUNBUFFERED=1 UDF_CACHE_DIR=/tmp/udf-cache
export LD_LIBRARY_PATH=/tmp/cuvs-site/nvidia/cu13/lib:$V/nvidia/cu13/lib:$V/nvidia/nccl/lib
for s in 49 50 51; do
  python3 bench/cuvs_compare.py --commit 38089e6 --sizes 10m --seed $s --recall-queries 10000 --probes 24,32,40 \
    --batches 10000 --reps 3 --warmup 1 --build-reps 1 --host-build none --budget-s 160 \
    --json $OUT/cuvs_seed$s.json > $OUT/cuvs_seed$s.log 2>&1 || echo "seed $s rc $?"
  grep -i "recall" $OUT/cuvs_seed$s.log | tail -8
done
