#!/usr/bin/env bash
# Sourced by test/gpu/stage_device.sh and bench/stage_bench.sh (from the
# source root): the GPU test modules in build/ must hold every k bucket, not a
# CI build's k <= 32 (UDF_TEST_MODULES_MAX_K, set by scripts/test.sh without a
# GPU).  Exits with status 2 otherwise; $1 names the caller in the message.
if max_k=$(grep -o '^UDF_TEST_MODULES_MAX_K:STRING=[0-9][0-9]*' build/CMakeCache.txt 2>/dev/null); then
  echo "$1: build/ links the GPU test modules for k <= ${max_k#*=} only (scripts/test.sh without a GPU);" \
       "they need every bucket: cmake -B build -DUDF_TEST_MODULES_MAX_K= && cmake --build build" >&2
  exit 2
fi
