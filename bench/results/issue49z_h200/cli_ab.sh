#!/usr/bin/env bash
# udf-link alone, cold (--no-cache), l2 and weighted_l2 (monotone) for sm_90 at k <= 32: c5d213e's build
# (/tmp/fc-49y, a fresh clone of 49y's tree) and this tree alternated, 10 rounds, on the 2-core CPU machine;
# the same artifacts (/tmp/exp, manifest 1.4, read by both); output: who, metric, wall ms.
cd /tmp/exp
for i in $(seq 10); do
  for who in old new; do
    b=/tmp/fc-49y/build/bin; [[ $who == new ]] && b=/work/main/build/bin
    for a in l2 wl2; do
      s=$(date +%s%N); $b/udf-link $a.udfa --max-k 32 --arch sm_90 --no-cache -o /tmp/exp/cli_$who.udfm >/dev/null 2>&1 || echo fail
      e=$(date +%s%N); echo "$who $a $(( (e - s) / 1000000 ))"
    done
  done
done
