# lit configuration for udf's tool tests.  Loaded by the lit.site.cfg.py that
# CMake writes into the build folder (see lit.site.cfg.py.in), which sets the
# paths used here.  Works with LLVM's lit and with `pip install lit`.
import os
import shlex
import shutil
import subprocess

import lit.formats

config.name = "udf"
# lit's internal shell, as LLVM uses (lit 23 deprecates the external one): it
# has pipes, redirections, `&&`, `;` and globs, but no `$?` -- %exit prints a
# command's exit status instead -- and no loops -- helpers in test/tools do those.
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".test", ".cu"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)

if not hasattr(config, "udf_obj_root"):
    lit_config.fatal("run lit on the build folder (build/test/lit), where CMake wrote lit.site.cfg.py")
config.test_exec_root = os.path.join(config.udf_obj_root, "test", "lit")

udfc = os.path.join(config.udf_tools_dir, "udfc")
if not os.access(udfc, os.X_OK):
    lit_config.fatal("udfc not found at %s: build it first (ninja -C %s udfc)" % (udfc, config.udf_obj_root))
for tool in ("FileCheck", "not", "split-file"):
    if not os.access(os.path.join(config.llvm_tools_dir, tool), os.X_OK):
        lit_config.fatal("%s not found in %s" % (tool, config.llvm_tools_dir))

# FileCheck, not and split-file come from LLVM's tools folder; the udf tools
# come before everything else.
config.environment["PATH"] = os.pathsep.join(
    [config.udf_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ.get("PATH", ""))])
# Diagnostics in plain ASCII, no colors, whatever the caller's terminal.
config.environment["LC_ALL"] = "C"
if "CUDA_VISIBLE_DEVICES" in os.environ:
    config.environment["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
# The tools' on-disk cache: one folder per lit run, never the user's
# ~/.cache/udf.  Tests that need a real compile (-v output, determinism) pass
# --no-cache or their own UDF_CACHE_DIR.
cache_dir = os.path.join(config.test_exec_root, "udf-cache")
shutil.rmtree(cache_dir, ignore_errors=True)
config.environment["UDF_CACHE_DIR"] = cache_dir
for var in ("XDG_CACHE_HOME", "UDF_CACHE_MAX_BYTES", "UDF_KERNEL_PACK_DIR", "UDF_NVFATBIN_LIBRARY", "UDF_NVRTC_LIBRARY",
            "UDF_NVJITLINK_LIBRARY", "UDF_NVVM_LIBRARY", "UDF_CUDA_WHEEL_DIRS", "CUDA_HOME", "CUDA_PATH",
            "UDF_NO_FATBINARY_FALLBACK", "UDF_COMPILE_TIMEOUT", "UDF_COMPILE_MEMORY_LIMIT"):
    config.environment.pop(var, None)

python = shlex.quote(config.python_executable)
schema = os.path.join(config.udf_schemas_dir, "udf-artifact-v1.schema.json")
checked = "%s %s --udfc %s --schema %s --" % (
    python, shlex.quote(os.path.join(config.udf_test_tools_dir, "udfc-checked.py")), shlex.quote(udfc),
    shlex.quote(schema))

# Order matters: lit applies substitutions in turn, so %udfc-raw must come
# before %udfc.
config.substitutions.append(("%udf-obj-root", shlex.quote(config.udf_obj_root)))
config.substitutions.append(("%udfc-raw", shlex.quote(udfc)))
config.substitutions.append(("%udfc", checked))
# udf-link: %udf-link checks every module it writes (test/tools/udf-link-checked.py).
udf_link = os.path.join(config.udf_tools_dir, "udf-link")
config.substitutions.append(("%udf-link-raw", shlex.quote(udf_link)))
config.substitutions.append(("%udf-link", "%s %s --udf-link %s --udfc %s --schema %s --" % (
    python, shlex.quote(os.path.join(config.udf_test_tools_dir, "udf-link-checked.py")), shlex.quote(udf_link),
    shlex.quote(udfc), shlex.quote(os.path.join(config.udf_schemas_dir, "udf-module-v1.schema.json")))))
# udf-run (runtime CLI); its CPU-side tests live in udf-run/.
config.substitutions.append(("%udf-run", shlex.quote(os.path.join(config.udf_tools_dir, "udf-run"))))
config.substitutions.append(("%kernel-pack", shlex.quote(getattr(config, "udf_kernel_pack_dir", ""))))
config.substitutions.append(("%fatbin-info", "%s %s" % (
    python, shlex.quote(os.path.join(config.udf_test_tools_dir, "fatbin-info.py")))))
config.substitutions.append(("%validate", "%s %s --schema %s" % (
    python, shlex.quote(os.path.join(config.udf_test_tools_dir, "validate-manifest.py")), shlex.quote(schema))))
config.substitutions.append(("%examples", shlex.quote(config.udf_examples_dir)))
config.substitutions.append(("%schemas", shlex.quote(config.udf_schemas_dir)))
config.substitutions.append(("%test-tools", shlex.quote(config.udf_test_tools_dir)))
config.substitutions.append(("%exit", "%s %s" % (
    python, shlex.quote(os.path.join(config.udf_test_tools_dir, "exit-status.py")))))
config.substitutions.append(("%python", python))


def cuda_device_count():
    """The CUDA devices `nvidia-smi -L` lists (0 without nvidia-smi), at most those
    $CUDA_VISIBLE_DEVICES names when it is set."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        r = subprocess.run([smi, "-L"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return 0
    if r.returncode != 0:
        return 0
    n = sum(1 for line in r.stdout.splitlines() if line.startswith(b"GPU"))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        n = min(n, len([v for v in visible.split(",") if v.strip()]))
    return n


# cuda-device: a GPU; cuda-devices-2: two or more (tests of indexes sharded over GPUs).
_cuda_devices = cuda_device_count()
if _cuda_devices >= 1:
    config.available_features.add("cuda-device")
if _cuda_devices >= 2:
    config.available_features.add("cuda-devices-2")


# numba-cuda compiles Python UDFs to LTO-IR without a GPU (the interop tests in
# frontends/); scripts/setup.sh installs it.
def has_numba_cuda():
    try:
        r = subprocess.run([config.python_executable, "-c", "import numba.cuda"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


if has_numba_cuda():
    config.available_features.add("numba-cuda")
for var in ("HOME", "CUDA_HOME", "CUDA_PATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.substitutions.append(("%llvm-as", shlex.quote(os.path.join(config.llvm_tools_dir, "llvm-as"))))
