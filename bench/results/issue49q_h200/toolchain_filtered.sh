#!/bin/bash
# udf-link --no-cache of filtered modules on this 2-core CPU machine: HEAD's pack (old: /tmp/pack_old, its
# scan_v1_f32_f32_min and manifest built from HEAD's sources) against this tree's (new), alternated, 3 rounds.
# Prints one line a run: row pack wall_s cpu_s slowest_filtered_entry_ms module_bytes entries.
B=/work/main/build; A=$B/test/runtime_artifacts; M=$B/share/udf/metrics; F=$B/share/udf/filters
declare -A ROWS=(
  [l2_bitmap_k32]="$M/l2.udfa $F/bitmap.udfa --max-k 32"
  [wl2_odd_k32]="$A/bench/weighted_l2.udfa $A/filters/odd_ids.udfa --max-k 32"
  [l2_bitmap_all]="$M/l2.udfa $F/bitmap.udfa"
  [l2_k32]="$M/l2.udfa --max-k 32"
)
O=/tmp/tcf; rm -rf $O; mkdir -p $O
for r in 1 2 3; do for row in l2_k32 l2_bitmap_k32 wl2_odd_k32 l2_bitmap_all; do for v in old new; do
  P=$B/share/udf/kernels; [[ $v == old ]] && P=/tmp/pack_old
  out=$O/${row}_$v.udfm; rm -f $out
  /usr/bin/time -f "%e %U %S" -o $O/t $B/bin/udf-link ${ROWS[$row]} --arch sm_90 --no-cache -v --kernel-pack $P -o $out > $O/log 2>&1
  read wall u s < $O/t
  slow=$(grep "linked in" $O/log | grep where | sed -E 's/.*linked in ([0-9.]+) ms.*/\1/' | sort -n | tail -1)
  n=$(grep -c "linked in" $O/log)
  echo "$row $v $wall $(echo "$u + $s" | bc) ${slow:--} $(stat -c %s $out) $n"
done; done; done
