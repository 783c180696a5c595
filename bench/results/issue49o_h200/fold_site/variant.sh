#!/bin/bash
# variant.sh NAME KDIR: pack /tmp/pack_NAME = build's pack with scan_v1_f32_f32_min from KDIR; link the filter module; report.
set -e
name=$1; K=$2; P=/tmp/pack_$name
rm -rf $P && cp -r /work/main/build/share/udf/kernels $P
(cd $K && /usr/local/cuda/bin/nvcc -arch=lto_75 -dlto -rdc=true -ltoir -std=c++17 -Werror all-warnings -I/work/main/include -DUDF_PACK_FILE_scan_v1_f32_f32_min=UDF_PACK_PROBE -o $P/scan_v1_f32_f32_min.ltoir -c ivf_flat_v1.cu)
(cd /work/main/build/kernels && python3 /work/main/kernels/gen_manifest.py --header /work/main/include/udf/kernels/ivf_flat_v1.h --pack-dir $P --arch compute_75 --copy-arch compute_80 --version 0.1.0 --output $P/ivf_flat_v1.json >/dev/null)
A=/work/main/build/test/runtime_artifacts; D=/tmp/sass/nvidia/cu13/bin; O=/tmp/fl/v_$name; rm -rf $O; mkdir -p $O
/work/main/build/bin/udf-link $A/bench/weighted_l2.udfa $A/filters/query_group.udfa $A/filters/odd_ids.udfa --arch sm_90 --max-k 32 --no-cache -j1 -v --kernel-pack $P --save-temps -o $O/bench_filter.udfm 2>&1 | grep "linked in" | sed -E 's/.*sm_90: (udf_ivf_[a-z0-9_]*).*linked in ([0-9.]+) ms.*/\1 \2/' | tr '\n' ' '; echo
for f in $O/*.cubin; do b=$(basename $f); echo "$name ${b:17:60} $($D/cuobjdump -res-usage $f 2>&1 | grep -o 'REG:[0-9]* STACK:[0-9]*' | head -1) size $(stat -c %s $f) spills $($D/nvdisasm -c $f | grep -c 'STL\|LDL') $(cmp -s $f /tmp/fl/old/$b && echo '= old')"; done
