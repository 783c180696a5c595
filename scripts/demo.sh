#!/usr/bin/env bash
# The main job: set up, build, then scripts/demo-steps.sh: compile an example
# UDF to an artifact, print its manifest, link it with the IVF-Flat kernel pack
# into a module, and where a GPU exists build an index and search it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default
exec bash scripts/demo-steps.sh
