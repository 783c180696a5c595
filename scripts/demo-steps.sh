#!/usr/bin/env bash
# The demo's steps over an existing build (build/bin, build/share): compile an
# example UDF, print its manifest, link it into a module, and where a GPU
# exists build an index and search it with udf-run.  scripts/demo.sh sets up
# and builds first; on a machine that only runs (a GPU box), call this alone.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${UDF_BUILD_DIR:-build}/bin"   # UDF_BUILD_DIR: a build (or copy of one) other than ./build

example=examples/weighted_l2.cu
out="${UDF_BUILD_DIR:-build}/demo"
mkdir -p "$out"
# The example's first line says which flags it needs: "// udfc: FLAGS".
read -r -a flags <<<"$(head -n 1 "$example" | sed -n 's|^// udfc:||p')"
export UDF_CACHE_DIR="$PWD/$out/cache"

echo "== udfc $example ${flags[*]} --arch sm_80,sm_90 -o $out/weighted_l2.udfa"
"$bin"/udfc "$example" "${flags[@]}" --arch sm_80,sm_90 -o "$out/weighted_l2.udfa"
echo "== udfc --inspect $out/weighted_l2.udfa"
"$bin"/udfc --inspect "$out/weighted_l2.udfa"

echo "== udf-link $out/weighted_l2.udfa --arch sm_80,sm_90,sm_100,sm_120 -o $out/weighted_l2.udfm -v"
"$bin"/udf-link "$out/weighted_l2.udfa" --arch sm_80,sm_90,sm_100,sm_120 -o "$out/weighted_l2.udfm" -v
echo "== module entries (udfc --inspect $out/weighted_l2.udfm)"
"$bin"/udfc --inspect "$out/weighted_l2.udfm" | python3 -c '
import json, sys
m = json.load(sys.stdin)
print("archs:", ", ".join(m["archs"]), "| packager:", m["toolchain"]["packager"], "| image:", m["image"]["size"], "bytes")
for e in m["entries"]:
    print("  entry", e["name"])'

# Run it where a GPU exists: index 20000 clustered vectors, search 100 queries,
# and check recall against an exhaustive search under the same UDF.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  python3 - "$out" <<'PY'
import random, struct, sys
out = sys.argv[1]
rng = random.Random(7)
# Clustered like real embeddings: 64 centres, each point a centre plus noise.
centres = [[rng.gauss(0, 1) for _ in range(32)] for _ in range(64)]
def fvecs(path, n, dim):
    with open(path, "wb") as f:
        for _ in range(n):
            c = rng.choice(centres)
            f.write(struct.pack("<i", dim) + struct.pack(f"<{dim}f", *(x + rng.gauss(0, 0.3) for x in c)))
fvecs(f"{out}/base.fvecs", 20000, 32)
fvecs(f"{out}/queries.fvecs", 100, 32)
with open(f"{out}/weights.npy", "wb") as f:  # a 1-D float32 .npy: weights 0.5 .. 1.5
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (32,), }"
    header += " " * (63 - len(header) % 64) + "\n"
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<32f", *(0.5 + i / 31 for i in range(32))))
PY
  echo "== udf-run $out/weighted_l2.udfm --dataset base.fvecs --queries queries.fvecs --capture weights=weights.npy --check"
  "$bin"/udf-run "$out/weighted_l2.udfm" --dataset "$out/base.fvecs" --queries "$out/queries.fvecs" \
    --capture weights="$out/weights.npy" --n-lists 64 --n-probes 8 --k 10 --out "$out/result.json" --check
else
  echo "== no GPU here: compiled and linked; with a GPU, this demo also builds an index and searches it with udf-run"
fi
