# builtin_l2/: the built-in L2 (host arrays with the A/B, and device arrays).
set -u; source "$(dirname "$0")/x2_common.sh"
c="--rows 20000000 --lists 4096 --data clustered --elem f32 --metrics l2 --batches 10000 --probes 32 --ks 10"
r l2_2gpu $B .device/modules/bench.udfm $c --devices 0,1 --testing-paths 0,512 --path-rounds 2
r l2_1gpu $B .device/modules/bench.udfm $c
