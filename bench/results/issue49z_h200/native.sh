#!/usr/bin/env bash
# Device call 1: declared coarse weights (udfc --coarse-weights).  This
# tree's staged build (.bench/dev.tar.xz, test/gpu/stage_device.sh
# --no-wheel): the runtime's native GPU suite; udf-run with a metric that
# declares its coarse weights, against the same build given --coarse-weights;
# search_bench (1M x 128 overlap, P32, k 10, 50 repetitions) for the
# benchmark table.  Everything goes to $OUT.
set -uo pipefail
[[ -d .device ]] || tar -xJf .bench/dev.tar.xz
mkdir -p "$OUT"
py=/opt/torch/.venv/bin/python
B=.device/bin t=/tmp/cw
rm -rf $t && mkdir -p $t
{
  echo "=== udf-run: declared coarse weights"
  $py - "$t" <<'PY'
import numpy as np, sys
out = sys.argv[1]
rng = np.random.default_rng(5)
data = rng.normal(size=(20000, 32)).astype(np.float32)
np.save(f"{out}/data.npy", data)
np.save(f"{out}/q.npy", data[:200] + 0.05 * rng.normal(size=(200, 32)).astype(np.float32))
w = rng.uniform(0.2, 2.0, 32).astype(np.float32); w[3] = 30.0
np.save(f"{out}/w.npy", w)
PY
  $B/udfc examples/weighted_l2.cu -o $t/plain.udfa --arch sm_90 --capture 'weights:f32[]' &&
  $B/udfc examples/weighted_l2.cu -o $t/decl.udfa --arch sm_90 --capture 'weights:f32[]' --coarse-weights weights &&
  $B/udf-link $t/plain.udfa -o $t/plain.udfm --arch sm_90 --max-k 32 &&
  $B/udf-link $t/decl.udfa -o $t/decl.udfm --arch sm_90 --max-k 32 || echo "compile/link FAILED"
  run() { $B/udf-run "$@" --dataset $t/data.npy --queries $t/q.npy --capture weights=$t/w.npy --n-lists 64 --n-probes 4 --k 10 --check; }
  run $t/plain.udfm --out $t/plain.npy --index $t/plain.udfi --save-index 2>&1 | grep -i "recall" | sed 's/^/plain, no weights: /'
  run $t/plain.udfm --coarse-weights $t/w.npy --out $t/given.npy --index $t/given.udfi --save-index 2>&1 | grep -i "recall" | sed 's/^/plain, --coarse-weights: /'
  run $t/decl.udfm --out $t/decl.npy --index $t/decl.udfi --save-index 2>&1 | grep -i "recall" | sed 's/^/declared: /'
  $py - $t <<'PY'
import numpy as np, struct, sys
t = sys.argv[1]
flags = {n: struct.unpack_from('<I', open(f"{t}/{n}.udfi", 'rb').read(), 28)[0] & 0x200 for n in ("plain", "given", "decl")}
print("coarse weights in the index file (bit 9):", {k: bool(v) for k, v in flags.items()})
same = np.array_equal(np.load(f"{t}/given.npy"), np.load(f"{t}/decl.npy"))
print("declared == --coarse-weights (ids):", same)
print("declared == no weights (ids):", np.array_equal(np.load(f"{t}/plain.npy"), np.load(f"{t}/decl.npy")))
assert flags["decl"] and flags["given"] and not flags["plain"] and same
print("udf-run check: ok")
PY
} 2>&1 | tee "$OUT/udf_run.log"
echo "=== search_bench"
timeout 150 .device/bin/search_bench .device/modules/bench.udfm --rows 1000000 --dim 128 --lists 1024 --data overlap \
  --probes 32 --ks 10 --reps 50 --elem f32 --metrics l2,weighted_l2 --batches 1,100,10000 --json "$OUT/search_bench.json" 2>&1 \
  | tee "$OUT/search_bench.md" | grep -E '^\| overlap|build' | head -20
echo "=== native suite"
timeout 400 test/gpu/device_suite.sh --part native 2>&1 | tee "$OUT/native_suite.log" | grep -E "^=== .*: (ok|FAILED)|passed|FAILED" | tail -30
