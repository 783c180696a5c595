# variants/: the A/B without L2 eviction between searches, and with peer copies instead of NCCL.
set -u; source "$(dirname "$0")/x2_common.sh"
c="--rows 20000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 10000 --probes 32 --ks 10"
r warm_2gpu $B .device/modules/bench.udfm $c --devices 0,1 --testing-paths 0,512 --path-rounds 2 --warm-l2
r warm_1gpu $B .device/modules/bench.udfm $c --warm-l2
UDF_NCCL=0 r peer_2gpu $B .device/modules/bench.udfm $c --devices 0,1 --testing-paths 0,512 --path-rounds 2
