#!/usr/bin/env bash
# Device call 3: the Python cold first result with the kernel pack compiled in
# the source folder (before 380bbdd, .bench/oldpack.tar.xz) and in pinned
# sources (this tree's wheel), same wheel otherwise, through $UDF_KERNEL_PACK_DIR;
# alternated, three rounds of toolchain_bench's filtered Python rows, cold.
set -uo pipefail
py=/opt/torch/.venv/bin/python
site=/tmp/site-49za
mkdir -p "$OUT" /tmp/oldpack
rm -rf $site && $py -m pip install -q --no-deps --target $site dist/udf-*cp312*.whl
tar -C /tmp/oldpack -xJf .bench/oldpack.tar.xz
new=$site/udf/share/udf/kernels old=/tmp/oldpack/kernels
ls $new/*.ltoir | wc -l; ls $old/*.ltoir | wc -l
for round in 1 2 3; do
  for who in old new; do
    pack=$old; [[ $who == new ]] && pack=$new
    echo "=== round $round $who"
    UDF_KERNEL_PACK_DIR=$pack CUDA_CACHE_DISABLE=1 timeout 100 $py bench/toolchain_bench.py --cases python --python-device \
      --python-path $site --python-udfs filter,builtin+filter --reps 5 --out "$OUT" --tag pack_${who}_$round 2>&1 | grep cold
  done
done
