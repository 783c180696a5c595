#!/usr/bin/env bash
# The udf wheel on the GPU machine with nothing of CUDA visible but the
# driver (issue 32): the CUDA libraries come from NVIDIA's wheels only.
#
#   test/gpu/wheel_driver_only.sh WHEELHOUSE... [-- PYTHON]
#
# Each WHEELHOUSE folder holds wheels (*.whl) and unpacked wheels packed as
# *.tar.xz (for wheels larger than one carry); PYTHON (default
# /opt/torch/.venv/bin/python) is an environment with what the folders lack
# (numpy, cuda-bindings, nvidia-cuda-nvrtc, ...).  The script makes a venv
# that sees PYTHON's site-packages (a .pth file), unpacks the *.tar.xz into it, installs
# the *.whl with `pip --no-index` (so pip checks that every dependency the udf
# wheel declares is present), then, in a mount namespace that hides every
# /usr/local/cuda* and the toolkit's libraries in the system library folder
# (libcuda.so and libnvidia-* stay), runs: the console scripts' --version,
# udfc + udf-link on examples/l2.cu, and the seed demo with both back ends.
# With --stage-only it unpacks and installs only (a first call, when the
# wheels do not fit one carry; /tmp is kept while the machine stays warm).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
stage_only=0
houses=()
py=/opt/torch/.venv/bin/python
while (($#)); do
  case $1 in
    --stage-only) stage_only=1 ;;
    --) shift; py=$1 ;;
    *) houses+=("$1") ;;
  esac
  shift
done
venv=${TMPDIR:-/tmp}/udf-wheel-venv
failed=()
step() {  # step NAME COMMAND...
  local name=$1; shift
  echo "=== $name"
  if "$@"; then echo "=== $name: ok"; else echo "=== $name: FAILED"; failed+=("$name"); fi
}

[[ -x $venv/bin/python ]] || step "venv" "$py" -m venv "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# PYTHON's packages seen through a .pth file that runs site.addsitedir (so
# that their own .pth files, e.g. numba-cuda's redirector, work too; a venv's
# --system-site-packages would show PYTHON's base interpreter's instead).
"$py" -c 'import sysconfig; p = sysconfig.get_paths(); print("import site; site.addsitedir(%r)" % p["purelib"])' \
  >"$site/zz-udf-test-base.pth"
# NVIDIA's CUDA wheels that PYTHON has, installed into the venv from PYTHON's
# copies of their files (dist-info included): as `pip install` of the same
# wheels would, so that each tool and cuda-pathfinder finds every library in
# one site-packages/nvidia/cu13/lib.
step "install PYTHON's NVIDIA wheels into the venv" "$py" - "$site" <<'PY'
import importlib.metadata as md, os, shutil, sys
dest = sys.argv[1]
for name in ("nvidia-cuda-nvrtc", "nvidia-nvjitlink", "nvidia-cuda-runtime", "nvidia-nvvm", "nvidia-nvfatbin"):
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        print(f"  {name}: not in PYTHON's environment")
        continue
    n = 0
    for f in dist.files or []:
        src = dist.locate_file(f)
        out = os.path.join(dest, str(f))
        if os.path.isfile(src) and not os.path.exists(out) and ".." not in str(f):
            os.makedirs(os.path.dirname(out), exist_ok=True)
            shutil.copy2(src, out)
            n += 1
    print(f"  {name} {dist.version}: {n} files")
PY
for h in "${houses[@]}"; do
  for t in "$h"/*.tar.xz; do [[ -f $t ]] && step "unpack $(basename "$t")" tar -xJf "$t" -C "$site"; done
  whls=("$h"/*.whl)
  deps=()
  for w in "${whls[@]}"; do [[ -f $w && $(basename "$w") != udf-* ]] && deps+=("$w"); done
  ((${#deps[@]})) && step "install $(basename -a "${deps[@]}" | tr '\n' ' ')" \
    "$venv/bin/python" -m pip install -q --no-index --no-deps --disable-pip-version-check "${deps[@]}"
  for w in "${whls[@]}"; do
    [[ -f $w && $(basename "$w") == udf-* ]] || continue
    # With its dependencies checked: --no-index and the folders as the only index.
    links=()
    for h2 in "${houses[@]}"; do links+=(--find-links "$h2"); done
    "$venv/bin/python" -m pip uninstall -q -y udf >/dev/null 2>&1
    t0=$(date +%s%N)
    step "install $(basename "$w") (its dependencies resolved from the folders and the environment only)" \
      "$venv/bin/python" -m pip install -q --no-index --disable-pip-version-check "${links[@]}" "$w"
    echo "installed in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  done
done
if ((stage_only)); then
  ((${#failed[@]})) && { echo "FAILED: ${failed[*]}"; exit 1; }
  echo "staged"; exit 0
fi

# What the namespace hides: the toolkit and its libraries outside it.
hide_script=$(mktemp)
{
  echo 'set -e; e=$(mktemp -d); f=$(mktemp)'
  for d in /usr/local/cuda* /opt/cuda*; do [[ -d $d && ! -L $d ]] && echo "mount --bind \$e $d"; done
  for f in /usr/lib/x86_64-linux-gnu/lib{nvrtc,nvJitLink,nvvm,nvfatbin,cudart,cublas,cublasLt,cufft,cufftw,curand,cusolver,cusolverMg,cusparse,cupti,nvblas,nvperf,nvToolsExt,nvtx3interop,cufile,npp,nvjpeg,pcsamplingutil,checkpoint}*.so*; do
    [[ -f $f && ! -L $f ]] && echo "mount --bind \$f $f"
  done
  echo 'exec "$@"'
} >"$hide_script"
hidden() { unshare --mount --propagation private bash "$hide_script" "$@"; }
export PATH=$venv/bin:/usr/bin:/bin
unset PYTHONPATH UDF_BIN_DIR UDF_CUDA_WHEEL_DIRS LD_LIBRARY_PATH CUDA_HOME CUDA_PATH
export UDF_CACHE_DIR=${TMPDIR:-/tmp}/udf-wheel-cache
rm -rf "$UDF_CACHE_DIR"
work=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "hidden: $(grep -c 'mount --bind' "$hide_script") mounts"
step "the toolkit is hidden" hidden bash -c '[[ -z $(ls /usr/local/cuda/ 2>/dev/null) && ! -s /usr/lib/x86_64-linux-gnu/libnvrtc.so.13 ]]'
step "udfc --version: every CUDA library from a wheel" hidden bash -c \
  'v=$(udfc --version); echo "$v"; [[ $(grep -E "^  (NVRTC|nvJitLink|nvFatbin|libNVVM) " <<<"$v" | grep -c "(python env)") == 4 ]]'
step "udf-run --version: the driver" hidden bash -c 'v=$(udf-run --version); echo "$v"; grep -q "CUDA driver  13\." <<<"$v"'
step "udfc + udf-link (console scripts)" hidden bash -c "cd '$work' && udfc '$root/examples/l2.cu' -o l2.udfa --arch sm_90 && udf-link l2.udfa -o l2.udfm --arch sm_90 --max-k 32 && ls -la l2.udfm"
for backend in numba-cuda-mlir numba-cuda; do
  step "seed demo ($backend)" hidden bash -c "cd '$work' && python '$root/examples/python/seed_demo.py' --require-gpu --backend $backend --archs sm_90"
done
rm -f "$hide_script"
if ((${#failed[@]})); then echo "FAILED: ${failed[*]}"; exit 1; fi
echo "all wheel steps passed"
