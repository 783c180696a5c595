#!/usr/bin/env bash
# The main job: set up, build what the demo runs (the tools, the runtime and
# the kernel pack, not the tests), then scripts/demo-steps.sh: compile a UDF,
# print its manifest, link it into a module; with a GPU, search with it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default --target udfc udf-link udf-run udf_kernel_pack
exec bash scripts/demo-steps.sh
