#!/bin/bash
# The native GPU suite (test/gpu/device_suite.sh --part native) on this tree's build (ef2b9ed).
cd "$(dirname "$0")/.."
tar xJf .bench/dev.tar.xz
timeout 580 bash test/gpu/device_suite.sh --part native > $OUT/device_suite_native.log 2>&1
echo "rc $?"
grep -E "^=== |PASSED|FAILED|tests ran" $OUT/device_suite_native.log | grep -v ": ok" | tail -40
grep -E ": ok|: FAILED" $OUT/device_suite_native.log | tr '\n' ' '
