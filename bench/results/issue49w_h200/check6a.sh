#!/usr/bin/env bash
# Device call, first of two (check6.sh follows while the machine is warm):
# installs 378867d's wheel (.bench/oldwheel) into /tmp/site-49w6-old.
set -uo pipefail
rm -rf /tmp/site-49w6-old && /opt/torch/.venv/bin/python -m pip install -q --no-deps --target /tmp/site-49w6-old .bench/oldwheel/*.whl && echo installed
