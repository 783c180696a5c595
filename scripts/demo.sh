#!/usr/bin/env bash
# The main job: set up, build, compile an example UDF to an artifact, print
# its manifest, and link it with the IVF-Flat kernel pack into a module.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default

example=examples/weighted_l2.cu
out=build/demo
mkdir -p "$out"
# The example's first line says which flags it needs: "// udfc: FLAGS".
read -r -a flags <<<"$(head -n 1 "$example" | sed -n 's|^// udfc:||p')"
export UDF_CACHE_DIR="$PWD/$out/cache"

echo "== udfc $example ${flags[*]} --arch sm_80,sm_90 -o $out/weighted_l2.udfa"
build/bin/udfc "$example" "${flags[@]}" --arch sm_80,sm_90 -o "$out/weighted_l2.udfa"
echo "== udfc --inspect $out/weighted_l2.udfa"
build/bin/udfc --inspect "$out/weighted_l2.udfa"

echo "== udf-link $out/weighted_l2.udfa --arch sm_90 -o $out/weighted_l2.udfm -v"
build/bin/udf-link "$out/weighted_l2.udfa" --arch sm_90 -o "$out/weighted_l2.udfm" -v
echo "== module entries (udfc --inspect $out/weighted_l2.udfm)"
build/bin/udfc --inspect "$out/weighted_l2.udfm" | python3 -c '
import json, sys
m = json.load(sys.stdin)
print("archs:", ", ".join(m["archs"]), "| packager:", m["toolchain"]["packager"], "| image:", m["image"]["size"], "bytes")
for e in m["entries"]:
    print("  entry", e["name"])'

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "== GPU found; running a search needs the runtime library, which is not built yet (see README: Status)"
else
  echo "== no GPU here: compile and link done; running a search needs a GPU"
fi
