#!/usr/bin/env python3
"""Wall time of udfc + udf-link against the equivalent nvcc -dc -dlto + nvlink
-dlto pipeline, for one UDF linked with the whole IVF-Flat kernel pack.

    bench/toolchain_bench.py [--build build] [--reps 5] [--out bench/results]

Cases, for one arch (sm_90) and for three (sm_80, sm_90, sm_100):

  cold       a fresh process with an empty cache folder (a new UDF_CACHE_DIR
             each repetition): what the first build of a UDF costs
  warm       a repeated run with --no-cache: the same work, the files and the
             libraries already in the page cache
  cache-hit  a repeated identical run with the cache: the whole CLI call

The nvcc pipeline has no cache: every run of it does all the work, so it has
one row (reported as cold = warm).  What it runs (see docs in bench/README.md):

  nvcc -dc -gencode arch=compute_XX,code=lto_XX ... -std=c++17   (= -dc -dlto -arch=sm_XX for one arch) -I include udf.cu entries.cu
  nvlink -arch=sm_XX -dlto -nvvmpath=NVVM -kernels-used=ENTRIES -L cuda/lib64 -lcudadevrt
         udf.o entries.o share/udf/kernels/ivf_flat_v1.ltoir -o sm_XX.cubin      (per arch)
  fatbinary --64 --create=out.fatbin --image3=kind=elf,sm=XX,file=sm_XX.cubin ...

entries.cu holds the same entry kernels udf-link generates (one per matching
scan variant, calling the pack's device function with &l2) and -kernels-used
lists the same kernels, so both produce comparable cubins (their sizes are
printed).  NVVM is a folder of links that gives nvlink the layout it wants
(bin/, libdevice/, lib64/libnvvm.so): the toolkit here keeps libnvvm in lib64/.

Prints a markdown table, writes results JSON (and a PNG if matplotlib is
importable) under --out.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

UDF = r"""#include <udf/abi/metric_v1.h>
extern "C" __device__ float l2(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y;
  return acc + d * d;
}
"""


def entries_source(pack):
    """The entry kernels udf-link generates for `l2` (f32/f32/min), and their names."""
    src = '#include <udf/kernels/ivf_flat_v1.h>\n\nextern "C" __device__ float l2(float, float, float, const udf_ctx_v1 *);\n'
    names = []
    for v in pack["scan_variants"]:
        if (v["elem"], v["acc"], v["order"]) != ("f32", "f32", "min"):
            continue
        name = "udf_ivf_scan_v1__l2__f32_f32_min_k%d" % v["k_max"]
        names.append(name)
        src += ('extern "C" __global__ void __launch_bounds__(%d) %s(udf_ivf_scan_args_v1 args) {\n'
                "  %s(&args, &l2, 0);\n}\n" % (v["block_threads"], name, v["symbol"]))
    names += [k["symbol"] for k in pack["kernels"] if k.get("order", "min") == "min"]
    return src, names


def run(cmd, env=None, cwd=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write("bench: command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd),
                                                                   p.stdout.decode(), p.stderr.decode()))
        sys.exit(1)
    return dt


def stats(xs):
    return {"median_ms": statistics.median(xs) * 1e3, "min_ms": min(xs) * 1e3, "n": len(xs),
            "all_ms": [x * 1e3 for x in xs]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--cuda", default="/usr/local/cuda")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = ap.parse_args()

    build = os.path.abspath(args.build)
    src_root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    udfc, link = os.path.join(build, "bin", "udfc"), os.path.join(build, "bin", "udf-link")
    pack_dir = os.path.join(build, "share", "udf", "kernels")
    nvcc, nvlink, fatbinary = (os.path.join(args.cuda, "bin", t) for t in ("nvcc", "nvlink", "fatbinary"))
    for tool in (udfc, link, nvcc, nvlink, fatbinary):
        if not os.access(tool, os.X_OK):
            sys.exit("bench: %s not found" % tool)
    with open(os.path.join(pack_dir, "ivf_flat_v1.json")) as f:
        pack = json.load(f)

    work = tempfile.mkdtemp(prefix="udf-bench.")
    # nvlink -dlto wants NVVM/{bin,libdevice,lib64/libnvvm.so}.
    nvvm = os.path.join(work, "nvvm")
    os.makedirs(os.path.join(nvvm, "lib64"))
    os.symlink(os.path.join(args.cuda, "nvvm", "bin"), os.path.join(nvvm, "bin"))
    os.symlink(os.path.join(args.cuda, "nvvm", "libdevice"), os.path.join(nvvm, "libdevice"))
    for lib in ("libnvvm.so", "libnvvm.so.4"):
        for d in (os.path.join(args.cuda, "nvvm", "lib64"), os.path.join(args.cuda, "lib64")):
            if os.path.exists(os.path.join(d, lib)):
                os.symlink(os.path.join(d, lib), os.path.join(nvvm, "lib64", lib))
                break
    with open(os.path.join(work, "udf.cu"), "w") as f:
        f.write(UDF)
    esrc, kernels = entries_source(pack)
    with open(os.path.join(work, "entries.cu"), "w") as f:
        f.write(esrc)

    env = dict(os.environ)
    env.pop("UDF_NO_FATBINARY_FALLBACK", None)
    counter = [0]

    def fresh_cache():
        counter[0] += 1
        d = os.path.join(work, "cache%d" % counter[0])
        return dict(env, UDF_CACHE_DIR=d)

    results = {"machine": {"cpu": platform.processor() or "", "nproc": os.cpu_count(), "loadavg_start": os.getloadavg(),
                           "python": platform.python_version()}, "reps": args.reps, "configs": []}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    results["machine"]["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass

    for archs in (["sm_90"], ["sm_80", "sm_90", "sm_100"]):
        label = ",".join(archs)
        arch_args = ["--arch", label]
        udfa, udfm = os.path.join(work, "l2.udfa"), os.path.join(work, "l2.udfm")
        udfc_cmd = [udfc, os.path.join(work, "udf.cu"), "-o", udfa] + arch_args
        link_cmd = [link, udfa, "-o", udfm] + arch_args
        cfg = {"archs": archs, "rows": {}}
        r = cfg["rows"]
        # udfc
        r["udfc cold"] = stats([run(udfc_cmd, env=fresh_cache()) for _ in range(args.reps)])
        run(udfc_cmd + ["--no-cache"], env=env)
        r["udfc warm"] = stats([run(udfc_cmd + ["--no-cache"], env=env) for _ in range(args.reps)])
        hit_env = fresh_cache()
        run(udfc_cmd, env=hit_env)
        r["udfc cache-hit"] = stats([run(udfc_cmd, env=hit_env) for _ in range(args.reps)])
        # udf-link (the artifact from the last udfc run)
        r["udf-link cold"] = stats([run(link_cmd, env=fresh_cache()) for _ in range(args.reps)])
        r["udf-link warm"] = stats([run(link_cmd + ["--no-cache"], env=env) for _ in range(args.reps)])
        run(link_cmd, env=hit_env)
        r["udf-link cache-hit"] = stats([run(link_cmd, env=hit_env) for _ in range(args.reps)])
        cfg["udf_link_module_bytes"] = os.path.getsize(udfm)
        link_cubin = os.path.join(work, "l2.cubin")
        run([link, udfa, "-o", link_cubin, "--emit", "cubin", "--arch", "sm_90", "--no-cache"], env=env)
        cfg["udf_link_sm90_cubin_bytes"] = os.path.getsize(link_cubin)

        # nvcc -dc -dlto + nvlink -dlto (+ fatbinary), no cache.
        gencode = []
        for a in archs:
            n = a[3:]
            gencode += ["-gencode", "arch=compute_%s,code=lto_%s" % (n, n)]
        nvcc_cmd = [nvcc, "-dc"] + gencode + ["-std=c++17", "-I", os.path.join(src_root, "include"),
                                                      "udf.cu", "entries.cu"]
        nvlink_cmds = [[nvlink, "-arch=" + a, "-dlto", "-nvvmpath=" + nvvm, "-kernels-used=" + ",".join(kernels),
                        "-L", os.path.join(args.cuda, "lib64"), "-lcudadevrt", "udf.o", "entries.o",
                        os.path.join(pack_dir, "ivf_flat_v1.ltoir"), "-o", "%s.cubin" % a] for a in archs]
        fatbin_cmd = [fatbinary, "--64", "--create=out.fatbin"] + [
            "--image3=kind=elf,sm=%s,file=%s.cubin" % (a[3:], a) for a in archs]
        nv_c, nv_l, nv_f, nv_total = [], [], [], []
        for _ in range(args.reps):
            c = run(nvcc_cmd, cwd=work)
            l = sum(run(cmd, cwd=work) for cmd in nvlink_cmds)
            f = run(fatbin_cmd, cwd=work)
            nv_c.append(c)
            nv_l.append(l)
            nv_f.append(f)
            nv_total.append(c + l + f)
        r["nvcc -dc -dlto"] = stats(nv_c)
        r["nvlink -dlto (all archs)"] = stats(nv_l)
        r["fatbinary"] = stats(nv_f)
        r["nvcc pipeline total"] = stats(nv_total)
        cfg["nvlink_sm90_cubin_bytes"] = os.path.getsize(os.path.join(work, "sm_90.cubin"))
        cfg["commands"] = {"udfc": udfc_cmd, "udf-link": link_cmd, "nvcc": nvcc_cmd, "nvlink": nvlink_cmds,
                           "fatbinary": fatbin_cmd}
        results["configs"].append(cfg)

    results["machine"]["loadavg_end"] = os.getloadavg()
    shutil.rmtree(work, ignore_errors=True)

    # Report.
    lines = []
    for cfg in results["configs"]:
        r = cfg["rows"]
        lines.append("### %s (median / min of %d, ms)\n" % (", ".join(cfg["archs"]), args.reps))
        lines.append("| step | cold | warm (--no-cache) | cache hit |")
        lines.append("|---|---:|---:|---:|")
        for tool in ("udfc", "udf-link"):
            cells = ["%.1f / %.1f" % (r["%s %s" % (tool, k)]["median_ms"], r["%s %s" % (tool, k)]["min_ms"])
                     for k in ("cold", "warm", "cache-hit")]
            lines.append("| %s | %s |" % (tool, " | ".join(cells)))
        ours = {k: r["udfc %s" % k]["median_ms"] + r["udf-link %s" % k]["median_ms"] for k in ("cold", "warm", "cache-hit")}
        lines.append("| **udfc + udf-link** | **%.1f** | **%.1f** | **%.1f** |" % (ours["cold"], ours["warm"], ours["cache-hit"]))
        for k in ("nvcc -dc -dlto", "nvlink -dlto (all archs)", "fatbinary"):
            s = "%.1f / %.1f" % (r[k]["median_ms"], r[k]["min_ms"])
            lines.append("| %s | %s | %s | n/a |" % (k, s, s))
        t = r["nvcc pipeline total"]
        lines.append("| **nvcc pipeline total** | **%.1f** | **%.1f** | n/a |" % (t["median_ms"], t["median_ms"]))
        lines.append("")
        lines.append("sm_90 cubin: udf-link %d bytes, nvlink %d bytes.\n" % (cfg["udf_link_sm90_cubin_bytes"],
                                                                          cfg["nvlink_sm90_cubin_bytes"]))
    one = results["configs"][0]["rows"]
    hit_ok = one["udf-link cache-hit"]["median_ms"] < 20.0
    cold_ok = one["udf-link cold"]["median_ms"] < one["nvlink -dlto (all archs)"]["median_ms"]
    e2e_ok = (one["udfc cold"]["median_ms"] + one["udf-link cold"]["median_ms"]) < one["nvcc pipeline total"]["median_ms"]
    results["targets"] = {"udf_link_cache_hit_under_20ms": hit_ok, "cold_link_faster_than_nvlink": cold_ok,
                          "cold_udfc_plus_link_faster_than_nvcc_pipeline": e2e_ok}
    lines.append("Targets (sm_90): udf-link cache hit < 20 ms: %s (%.1f ms); cold udf-link faster than nvlink -dlto: %s; "
                 "cold udfc + udf-link faster than the nvcc pipeline: %s." % (
                     "met" if hit_ok else "NOT met", one["udf-link cache-hit"]["median_ms"],
                     "met" if cold_ok else "NOT met", "met" if e2e_ok else "NOT met"))
    m = results["machine"]
    lines.append("\nMachine: %s, %d CPUs, load average %.2f at start, %.2f at end." % (
        m["cpu"], m["nproc"], m["loadavg_start"][0], m["loadavg_end"][0]))
    report = "\n".join(lines) + "\n"
    sys.stdout.write(report)

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "toolchain_bench.json"), "w") as f:
        json.dump(results, f, indent=2)
    with open(os.path.join(args.out, "toolchain_bench.md"), "w") as f:
        f.write(report)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(results["configs"]), figsize=(12, 4))
        for ax, cfg in zip(axes, results["configs"]):
            r = cfg["rows"]
            names = ["udfc cold", "udf-link cold", "udf-link warm", "udf-link cache-hit", "nvcc -dc -dlto",
                     "nvlink -dlto (all archs)", "nvcc pipeline total"]
            ax.barh(names, [r[n]["median_ms"] for n in names])
            ax.set_xscale("log")
            ax.set_xlabel("ms (median)")
            ax.set_title(", ".join(cfg["archs"]))
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "toolchain_bench.png"))
    except ImportError:
        sys.stdout.write("(matplotlib not installed: no plot)\n")


if __name__ == "__main__":
    main()
