#!/usr/bin/env bash
# Sets up, builds and runs every test (unit tests and lit tests; GPU tests
# skip with a printed reason where no GPU is present).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset default
cmake --build --preset default
ctest --preset default
