# probe/: one GPU over 10M rows (a shard's share by vectors), and the sharded path with one shard.
set -u; source "$(dirname "$0")/x2_common.sh"
c="--lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 10000 --probes 32 --ks 10"
r rows_10000000 $B .device/modules/bench.udfm $c --rows 10000000
r rows_20000000_devices_0 $B .device/modules/bench.udfm $c --rows 20000000 --devices 0
r rows_20000000_devices_1 $B .device/modules/bench.udfm $c --rows 20000000 --devices 1
