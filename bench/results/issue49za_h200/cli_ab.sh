#!/usr/bin/env bash
# udf-link alone, cold (--no-cache), l2 (the built-in artifact) and weighted_l2
# (examples/weighted_l2.cu, monotone) for sm_90 at k <= 32, one udf-link, with
# the kernel pack compiled in the source folder (old: /tmp/oldpack/kernels, as
# before 380bbdd) and in pinned sources (new: build/share/udf/kernels),
# alternated, 10 rounds, on the 2-core CPU machine; output: who, metric, wall ms.
cd /work/main
for i in $(seq 10); do
  for who in old new; do
    pack=/tmp/oldpack/kernels; [[ $who == new ]] && pack=/work/main/build/share/udf/kernels
    for a in l2 wl2; do
      s=$(date +%s%N)
      build/bin/udf-link /tmp/exp/$a.udfa --max-k 32 --arch sm_90 --no-cache --kernel-pack $pack -o /tmp/exp/cli_$who.udfm >/dev/null 2>&1 || echo fail
      e=$(date +%s%N); echo "$who $a $(( (e - s) / 1000000 ))"
    done
  done
done
