#!/bin/bash
# variant.sh NAME [nvcc -D flags...]: a pack from /tmp/pack_new with the f32 min rows file (compute_80) rebuilt
# from the working tree with the given flags, its manifest regenerated; then the exact module linked from it.
set -e
name=$1; shift
P=/tmp/pack_$name
rm -rf $P && cp -r /work/main/build/share/udf/kernels $P
cd /work/main/kernels
/usr/local/cuda/bin/nvcc -arch=lto_80 -dlto -rdc=true -ltoir -std=c++17 -Werror all-warnings -I../include "$@" \
  -DUDF_PACK_FILE_rows_v1_f32_f32_min=UDF_PACK_PROBE -o $P/rows_v1_f32_f32_min.compute_80.ltoir -c ivf_flat_v1.cu
cd /work/main/build/kernels && python3 /work/main/kernels/gen_manifest.py --header /work/main/include/udf/kernels/ivf_flat_v1.h \
  --pack-dir $P --arch compute_75 --copy-arch compute_80 --version 0.1.0 --output $P/ivf_flat_v1.json >/dev/null
cd /tmp/ab && W=/work/main/build/bin
$W/udf-link wl2.udfa l1.udfa linf.udfa --exact --max-k 32 --arch sm_90 --kernel-pack $P --no-cache -o exact_$name.udfm
mkdir -p s_$name && cd s_$name && $W/udf-link ../wl2.udfa ../l1.udfa ../linf.udfa --exact --max-k 32 --arch sm_90 --kernel-pack $P --no-cache --save-temps -o m.udfm >/dev/null 2>&1
D=/tmp/sass/nvidia/cu13/bin
for c in *rows*cubin; do $D/nvdisasm -c $c > ${c%.cubin}.sass; $D/nvdisasm -hex $c > ${c%.cubin}.hex; echo "$name ${c#m.udfm.udf_ivf_rows_v1__} $($D/cuobjdump -res-usage $c | grep -o 'REG:[0-9]* STACK:[0-9]*') spills $(grep -c 'STL\|LDL' ${c%.cubin}.sass)"; python3 /tmp/w/blocks.py ${c%.cubin}.sass 500 | head -3; done
