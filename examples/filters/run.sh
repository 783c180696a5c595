#!/usr/bin/env bash
# The filter examples end to end: compile tenant.cu and price_range.cu with
# udfc (the flags of their first lines), link both with the built-in l2
# metric into one module (udf-link --pair), write the inputs (numpy), and --
# when a GPU is there -- search with each filter (udf-run --filter ...
# --check) and check the results against a float64 brute force.
#
#   examples/filters/run.sh [--build DIR] [--out DIR] [--arch sm_XX] [--no-search]
#
#   --build DIR   where udfc, udf-link, udf-run (DIR/bin) and the built-in
#                 metrics (DIR/share/udf/metrics) are; default: build/ of this
#                 repository.  Installed tools work too: --build /usr/local
#   --out DIR     where the artifacts, module, inputs and results go
#                 (default: a new temporary folder)
#   --arch sm_XX  the GPU arch to build for (default: the first GPU's, from
#                 nvidia-smi; sm_90 when there is none)
#   --no-search   stop after the inputs, even with a GPU
#
# Without a GPU (`nvidia-smi -L` lists none) the search step is skipped and
# the script exits 0 after compiling and linking.  Needs python3 with numpy.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$here/../.." && pwd)/build
out=
arch=
search=1
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --no-search) search=0; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
udfc=$build/bin/udfc
udf_link=$build/bin/udf-link
udf_run=$build/bin/udf-run
l2=$build/share/udf/metrics/l2.udfa
for f in "$udfc" "$udf_link" "$l2"; do
  [[ -e $f ]] || { echo "run.sh: $f not found: build the project first, or pass --build DIR" >&2; exit 1; }
done
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/udf-filters.XXXXXX")}
mkdir -p "$out"

gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then gpu=1; fi
if [[ -z $arch ]]; then
  arch=sm_90
  if ((gpu)); then
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
    [[ $cc =~ ^[0-9]+$ ]] && arch=sm_$cc
  fi
fi
echo "== filters example in $out ($arch)"

# 1. Compile: each file's first line holds its flags (--kind filter --capture ...).
"$udfc" --flags-from-first-line "$here/tenant.cu" -o "$out/tenant.udfa" --arch "$arch"
"$udfc" --flags-from-first-line "$here/price_range.cu" -o "$out/price_range.udfa" --arch "$arch"

# 2. Link with the built-in l2 metric (symbol udf_builtin_l2): its unfiltered
#    scans, plus one filtered set per --pair.
"$udf_link" "$l2" "$out/tenant.udfa" "$out/price_range.udfa" -o "$out/filters.udfm" --arch "$arch" \
  --pair udf_builtin_l2:same_tenant --pair udf_builtin_l2:price_in_range
echo "linked $out/filters.udfm:"
"$udfc" --inspect "$out/filters.udfm" | python3 -c '
import json, sys
m = json.load(sys.stdin)
for f in m["filters"]:
    print("  filter %d: %s (%s), captures %s" % (f["index"], f["symbol"], f["source_name"],
          ", ".join("%s:%s%s" % (c["name"], c["type"], "[]" if c["kind"] == "array" else "") for c in f["captures"])))
for e in m["entries"]:
    if e["filter"] is not None and e["name"].endswith("_k32"):
        print("  entry %s (%s)" % (e["name"], "its twin that prunes: l2 is monotone" if e["launch"].get("prune") == 1 else "and the other k"))'

# 3. Inputs: vectors, queries, and the filters' arrays indexed by id.
python3 "$here/filters_data.py" make "$out"
n_ids=$(sed -n 's/^n_ids=//p' "$out/params.txt")
tenant=$(sed -n 's/^tenant=//p' "$out/params.txt")
lo=$(sed -n 's/^lo=//p' "$out/params.txt")
hi=$(sed -n 's/^hi=//p' "$out/params.txt")

# 4. Search, with each filter.
if ((!search)); then
  echo "search step skipped (--no-search)"
  exit 0
fi
if ((!gpu)); then
  echo "no GPU (nvidia-smi -L lists none): the search step is skipped"
  exit 0
fi
common=(--dataset "$out/base.npy" --queries "$out/queries.npy" --k 10 --n-lists 128 --n-probes 16
        --index "$out/l2.udfi" -q --check)
echo "-- same_tenant: tenant $tenant"
"$udf_run" "$out/filters.udfm" "${common[@]}" --save-index --out "$out/tenant.npy" \
  --filter same_tenant --filter-capture tenants="$out/tenants.npy" --filter-capture n_ids="$n_ids" \
  --filter-capture tenant="$tenant"
python3 "$here/filters_data.py" check "$out" same_tenant "$out/tenant.npy"
echo "-- price_in_range: [$lo, $hi] (the index saved above, loaded)"
"$udf_run" "$out/filters.udfm" "${common[@]}" --load-index --out "$out/price.npy" \
  --filter price_in_range --filter-capture prices="$out/prices.npy" --filter-capture lo="$lo" \
  --filter-capture hi="$hi" --filter-capture n_ids="$n_ids"
python3 "$here/filters_data.py" check "$out" price_in_range "$out/price.npy"
