#!/bin/bash
# The native GPU suite of this tree (staged .device), then the tile bit check with its wheel.
set -u
cd "$(dirname "$0")/.."
rm -rf .device && tar xJf .devsuite/dev.tar.xz
timeout 450 test/gpu/device_suite.sh --part native > $OUT/device_suite_native.log 2>&1; echo "native rc $?"
grep -E "^=== .*: (ok|FAILED)|passed|FAILED|tests ran" $OUT/device_suite_native.log | tail -40
