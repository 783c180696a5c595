#!/usr/bin/env bash
# Installs everything udf needs to build and test on a fresh Debian 12 machine
# with the CUDA 13 toolkit at /usr/local/cuda.  Idempotent: a second run
# installs nothing and finishes in seconds.
set -euo pipefail

APT_PACKAGES=(
  cmake ninja-build make g++ pkg-config dpkg-dev file
  libcli11-dev nlohmann-json3-dev libfmt-dev libssl-dev libgtest-dev libxxhash-dev libdlpack-dev
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
)
PIP_PACKAGES=(
  "lit>=18"
  "jsonschema>=4.18"
  "nvidia-nvfatbin==13.0.*"
  "numba-cuda==0.30.*"
  "cuda-bindings==13.0.*"
)

log() { printf 'setup: %s\n' "$*" >&2; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  log "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  log "Debian packages present"
fi

PYTHON="${PYTHON:-python3}"
need_pip=0
"$PYTHON" - <<'PY' || need_pip=1
import importlib.metadata as md, sys
from importlib.metadata import PackageNotFoundError
want = {"lit": None, "jsonschema": None, "nvidia-nvfatbin": "13.0.", "numba-cuda": "0.30.", "cuda-bindings": "13.0."}
for name, prefix in want.items():
    try:
        v = md.version(name)
    except PackageNotFoundError:
        sys.exit(1)
    if prefix and not v.startswith(prefix):
        sys.exit(1)
PY
if ((need_pip)); then
  log "installing Python packages: ${PIP_PACKAGES[*]}"
  "$PYTHON" -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}"
else
  log "Python packages present"
fi

if [ ! -x /usr/local/cuda/bin/nvcc ] || [ ! -f /usr/local/cuda/include/nvrtc.h ]; then
  log "error: the CUDA 13 toolkit is expected at /usr/local/cuda (NVRTC, nvJitLink, libNVVM, nvcc)"
  exit 1
fi
log "ok"
