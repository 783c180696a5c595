#!/usr/bin/env bash
set -u
python3 .devpack/pcie.py 2>&1 | tail -30
