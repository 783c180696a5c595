#!/usr/bin/env bash
# The demo's steps over an existing build: README's command-line quickstart
# (examples/cli/quickstart.sh) run with this build's tools in BUILD/demo, each
# command printed before its output, then the module's entries and sizes.
# With a GPU the quickstart also builds an index and prints the recall of a
# search.  scripts/demo.sh sets up and builds first; on a machine that only
# runs a copied build (a GPU box), call this alone.
#
#   UDF_BUILD_DIR: the build (or copy of one) to take bin/ and share/ from
#                  (default: build/ beside this script's folder)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${UDF_BUILD_DIR:-$root/build}" && pwd)
for tool in udfc udf-link udf-run; do
  [[ -x $build/bin/$tool ]] || { echo "demo: $build/bin/$tool is missing: run scripts/demo.sh (it builds first)" >&2; exit 1; }
done
out=$build/demo
rm -rf "$out"
mkdir -p "$out"
cd "$out"
export PATH=$build/bin:$PATH

bash -eux -o pipefail "$root/examples/cli/quickstart.sh" 2>&1 | grep -v '^+ nvidia-smi'

echo
echo "The module $out/wl2.udfm:"
udfc --inspect wl2.udfm >module.json
python3 - module.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
sizes = [im["size"] for im in m["images"]]
print(f"  archs {', '.join(m['archs'])}; {len(m['entries'])} entry kernels, {sum(sizes) / 1e6:.1f} MB of fatbins")
for e in m["entries"]:
    print(f"  {sizes[e['image']] / 1e3:6.0f} KB  {e['name']}")
PY
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo
  echo "No GPU here: compiled and linked. With a GPU the demo also searches with the module (udf-run --check)."
fi
