#!/usr/bin/env bash
# test/lit's tests that need a GPU (REQUIRES: cuda-device, cuda-devices-2) on
# the GPU machine, with what test/gpu/stage_device.sh put in .device/: the
# staged tools, kernel pack, lit and FileCheck.  It writes a lit.site.cfg.py
# for them into $TMPDIR/udf-lit and runs lit there on the tests that name a
# GPU feature (a test that needs more GPUs than the machine has is
# UNSUPPORTED, as lit reports it).  Exit status: lit's.
#
#   test/gpu/lit_gpu.sh [PYTHON]   (an interpreter with numpy; default /opt/torch/.venv/bin/python)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
py=${1:-/opt/torch/.venv/bin/python}
dev=$root/.device
obj=${TMPDIR:-/tmp}/udf-lit
[[ -x $dev/lit/bin/FileCheck && -d $dev/lit/python/lit ]] || { echo "lit_gpu.sh: no lit in $dev/lit (test/gpu/stage_device.sh stages it)" >&2; exit 2; }
mkdir -p "$obj/test/lit"
cat >"$obj/test/lit/lit.site.cfg.py" <<EOF
import os
config.udf_src_root = "$root"
config.udf_obj_root = "$obj"
config.udf_tools_dir = "$dev/bin"
config.udf_examples_dir = "$root/examples"
config.udf_schemas_dir = "$root/schemas"
config.udf_test_tools_dir = "$root/test/tools"
config.udf_kernel_pack_dir = "$dev/share/udf/kernels"
config.llvm_tools_dir = "$dev/lit/bin"
config.python_executable = "$py"
lit_config.load_config(config, os.path.join(config.udf_src_root, "test", "lit", "lit.cfg.py"))
EOF
# The tests that name a GPU feature, as lit's --filter (a regular expression of their full names).
tests=$(grep -rlE '^REQUIRES:.*cuda-device' test/lit | sed 's|^test/lit/||' | sort)
[[ -n $tests ]] || { echo "lit_gpu.sh: no test in test/lit requires a GPU" >&2; exit 2; }
echo "lit_gpu.sh: $(echo "$tests" | tr '\n' ' ')"
filter=":: ($(echo "$tests" | sed 's/[.]/[.]/g' | paste -sd'|'))\$"
PYTHONPATH=$dev/lit/python${PYTHONPATH:+:$PYTHONPATH} LD_LIBRARY_PATH=$dev/lit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  "$py" -c 'import sys, lit.main; sys.argv[0] = "lit"; lit.main.main()' -sv "$obj/test/lit" --filter "$filter"
