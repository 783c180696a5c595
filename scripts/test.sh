#!/usr/bin/env bash
# Sets up, builds and runs every test (unit tests and lit tests; GPU tests
# skip with a printed reason where no GPU is present).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset default
cmake --build --preset default
# ctest shows a test's output only on failure: say first why the GPU tests
# will skip here (they run, and must pass, where a GPU is present).
if ! (command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1); then
  echo "GPU tests skip on this machine; the reason they print:"
  ctest --preset default -R '^Fixture\.ModuleQuery$' --verbose 2>&1 | grep -A1 ': Skipped$' | tail -n 1 || true
fi
ctest --preset default
