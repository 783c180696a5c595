#!/usr/bin/env bash
# udf-link alone, cold (--no-cache), l2 and weighted_l2 (monotone) for sm_90 at k <= 32, 5cc6eb6 (/tmp/old-build) and
# this tree alternated, 15 rounds (5, then 10 more), on the 2-core CPU machine; output: cli_ab_cpu2.txt (who, metric, wall ms).
cd /tmp/exp
for i in 1 2 3 4 5; do
  for who in old new; do
    b=/tmp/old-build/bin; [[ $who == new ]] && b=/work/main/build/bin
    for a in l2 wl2; do
      s=$(date +%s%N); $b/udf-link $a.udfa --max-k 32 --arch sm_90 --no-cache -o /tmp/exp/cli_$who.udfm >/dev/null 2>&1 || echo fail
      e=$(date +%s%N); echo "$who $a $(( (e - s) / 1000000 ))"
    done
  done
done
