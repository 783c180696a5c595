#!/usr/bin/env python3
"""Time to first result: the wall time of udfc + udf-link for one metric, and of a Python
`@udf.metric` to its first search result, cold, warm and from the cache.

    bench/toolchain_bench.py [--build build] [--reps 5] [--out bench/results] [--tag NAME]
                             [--cases cli,nvcc,python] [--baseline DIR] [--python-device] [--python-path DIR]
                             [--python-backends auto,numba-cuda-mlir] [--python-udfs metric,filter,builtin+filter]

CLI cases, for two metrics (examples/l2.cu, examples/weighted_l2.cu declared monotone), two
arch sets (sm_90; sm_80, sm_90, sm_100, sm_120) and two entry sets (every k bucket, the default
of udf-link and what a deployment without a toolchain needs; and --max-k 32, what a first
search at k <= 32 needs):

  cold       a fresh process with an empty cache folder (a new UDF_CACHE_DIR each repetition):
             what the first build of a metric costs
  warm       a repeated run with --no-cache: the same work, files and libraries in the page cache
  cache hit  a repeated identical run with the cache: the whole CLI call

each for udfc and udf-link, with the module's size.  One more cold link per configuration, with
-v, gives each entry's link time and cubin size (what each kernel variant costs).  --baseline
DIR times an older build's bin/ (a folder with bin/udfc, bin/udf-link and share/udf/kernels)
on the same rows, in the same run.

nvcc rows (--cases nvcc): the toolkit's own pipeline for examples/l2.cu and the same entry
kernels (every k bucket), no cache: nvcc -dc -gencode arch=compute_XX,code=lto_XX ..., one
nvlink -dlto -kernels-used=... per arch (one LTO of all kernels, one after another), fatbinary.

Python cases (--cases python; needs the package importable, as in the build tree:
build/python), each in a new process:

  import     `import udf`
  (each front end of --python-backends, default "auto": the nvrtc translator for this metric)
  cold       from `@udf.metric` (weighted L2 declared monotone, default back end) to the first
             result of Index.build(100k x 64, 256 lists) + search(k 10, 32 probes), with an empty
             cache (the CUDA runtime's start timed apart: udf.device_info()); on a machine
             without a GPU (or without --python-device): to the linked module's bytes
             (udf.compile + udf.link for sm_90 with --max-k 32's entries), what a CI artifact
             job pays
  warm       the same in a new process with the cache filled

  with --python-udfs (a comma list; default "metric", the rows above):
  filter          the same weighted L2, and a filter from the front end's subset
                  (`ctx.tenants[id] == ctx.t`, a declared NumPy capture) declared with it; the index
                  built with filters=[it], the search filtered: the first filtered result
  builtin+filter  the shipped l2 artifact (udf.builtin_metric) and that filter: what a filter alone
                  costs

Prints markdown tables, writes results/toolchain_bench[_TAG].json (every sample, the commands,
the machine) and .md, and a PNG when matplotlib can be imported.
"""
import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
ARCH_SETS = (("sm_90",), ("sm_80", "sm_90", "sm_100", "sm_120"))
METRICS = (("l2", "examples/l2.cu", []), ("weighted_l2", "examples/weighted_l2.cu", ["--monotone"]))
ENTRY_SETS = (("all buckets", []), ("k <= 32", ["--max-k", "32"]))

PY_TTFR = r"""
import json, os, sys, time
import numpy as np
rng = np.random.default_rng(0)
data = rng.standard_normal((100_000, 64), dtype=np.float32)
queries = rng.standard_normal((1, 64), dtype=np.float32)
weights = np.linspace(0.5, 2.0, 64, dtype=np.float32)
t0 = time.perf_counter()
import udf
t1 = time.perf_counter()

@udf.metric(captures={"weights": weights}, monotone=True, backend=os.environ.get("UDF_BENCH_BACKEND", "auto"))
def weighted_l2(x, y, acc, ctx):
    d = x - y
    return acc + ctx.weights[ctx.dim] * d * d

udfs = os.environ.get("UDF_BENCH_UDFS", "metric")
metric, filters, fkw = weighted_l2, [], {}
if udfs != "metric":
    tenants = (np.arange(data.shape[0]) % 16).astype(np.int32)

    @udf.filter(captures={"tenants": tenants, "t": 3})
    def same_tenant(query, id, ctx):
        return ctx.tenants[id] == ctx.t

    filters, fkw = [same_tenant], {"filter": same_tenant}
    if udfs == "builtin+filter":
        metric = udf.builtin_metric("l2")
t2 = time.perf_counter()
if os.environ.get("UDF_BENCH_DEVICE") == "1":
    udf.device_info()  # the CUDA driver and the runtime (Index.build would start them)
    tr = time.perf_counter()
    index = udf.Index.build(metric, data, n_lists=256, filters=filters)
    t3 = time.perf_counter()
    dist, ids = index.search(queries, k=10, n_probes=32, **fkw)
    assert ids.shape == (1, 10) and (ids >= 0).all()
    if filters:
        assert (ids % 16 == 3).all(), ids
else:
    tr = t2
    arts = ([metric.compile(archs=[90])] if hasattr(metric, "compile") else [metric]) + [f.compile(archs=[90]) for f in filters]
    t3 = time.perf_counter()
    mod = udf.link(arts, archs=[90], max_k=32)
    assert len(mod.data) > 0
t4 = time.perf_counter()
print(json.dumps({"backend": weighted_l2.backend, "filter_backend": filters[0].backend if filters else None,
                  "import_s": t1 - t0, "decorate_s": t2 - t1, "runtime_s": tr - t2, "build_s": t3 - tr,
                  "search_s": t4 - t3, "first_result_s": t4 - t1}))
"""


def run(cmd, env=None, cwd=None, capture=False):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write("bench: command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout.decode(),
                                                                   p.stderr.decode()))
        sys.exit(1)
    return (dt, p.stdout.decode(), p.stderr.decode()) if capture else dt


def stats(xs):
    return {"median_ms": statistics.median(xs) * 1e3, "min_ms": min(xs) * 1e3, "n": len(xs),
            "all_ms": [x * 1e3 for x in xs]}


ENTRY_RE = re.compile(r"udf-link: (sm_\d+): (\S+): nvjitlink \S+ \([^)]*\) linked in ([0-9.]+) ms, cubin (\d+) bytes")


def cli_cases(args, tools, work, env, fresh):
    """Every CLI row for one build (`tools`: {"udfc": path, "udf-link": path})."""
    out = []
    for mname, src, flags in METRICS:
        for archs in ARCH_SETS:
            arch = ["--arch", ",".join(archs)]
            udfa = os.path.join(work, "%s.udfa" % mname)
            udfc_cmd = [tools["udfc"], os.path.join(ROOT, src), "--flags-from-first-line", "-o", udfa] + flags + arch
            udfc = {"cold": stats([run(udfc_cmd, env=fresh()) for _ in range(args.reps)])}
            run(udfc_cmd + ["--no-cache"], env=env)
            udfc["warm"] = stats([run(udfc_cmd + ["--no-cache"], env=env) for _ in range(args.reps)])
            hit = fresh()
            run(udfc_cmd, env=hit)
            udfc["cache-hit"] = stats([run(udfc_cmd, env=hit) for _ in range(args.reps)])
            for ename, eflags in ENTRY_SETS:
                if eflags and not tools.get("max_k", True):
                    continue
                udfm = os.path.join(work, "%s.udfm" % mname)
                link_cmd = [tools["udf-link"], udfa, "-o", udfm] + arch + eflags
                row = {"metric": mname, "archs": list(archs), "entries": ename, "udfc": udfc,
                       "commands": {"udfc": udfc_cmd, "udf-link": link_cmd}}
                link = {"cold": stats([run(link_cmd, env=fresh()) for _ in range(args.reps)])}
                link["warm"] = (stats([run(link_cmd + ["--no-cache"], env=env) for _ in range(args.reps)])
                                if not args.skip_warm else link["cold"])
                h = fresh()
                run(link_cmd, env=h)
                link["cache-hit"] = stats([run(link_cmd, env=h) for _ in range(args.reps)])
                row["udf-link"] = link
                row["module_bytes"] = os.path.getsize(udfm)
                # One more cold link with -v: what each entry costs.
                _, _, err = run(link_cmd + ["-v"], env=fresh(), capture=True)
                row["entry_links"] = [{"arch": a, "entry": e, "ms": float(ms), "cubin_bytes": int(b)}
                                      for a, e, ms, b in ENTRY_RE.findall(err)]
                out.append(row)
                sys.stderr.write("bench: %s %s %s: udfc %.0f ms, udf-link cold %.0f / warm %.0f / hit %.1f ms\n" % (
                    mname, ",".join(archs), ename, udfc["cold"]["median_ms"], link["cold"]["median_ms"],
                    link["warm"]["median_ms"], link["cache-hit"]["median_ms"]))
    return out


def nvcc_entries(pack, symbol):
    """The entry kernels udf-link plans for a plain (not monotone) f32 metric `symbol` with every k
    bucket (lib/link/link.cpp, plan_entries), as CUDA source, and every kernel's name."""
    src = '#include <udf/kernels/ivf_flat_v1.h>\n\nextern "C" __device__ float %s(float, float, float, const udf_ctx_v1 *);\n' % symbol
    names = []
    for v in pack["scan_variants"]:
        if (v.get("abi", "ivf_flat.metric.v1"), v["elem"], v["acc"], v["order"]) != (
                "ivf_flat.metric.v1", "f32", "f32", "min") or v.get("prune"):
            continue
        name = "udf_ivf_scan_v1__%s__f32_f32_min_k%d" % (symbol, v["k_max"])
        names.append(name)
        src += ('extern "C" __global__ void __launch_bounds__(%d) %s(udf_ivf_scan_args_v1 args) {\n'
                "  %s(&args, &%s, 0, 0);\n}\n" % (v["block_threads"], name, v["symbol"], symbol))
    names += [k["symbol"] for k in pack["kernels"] if k.get("order", "min") == "min"]
    return src, names


def nvcc_cases(args, work):
    """The toolkit's own pipeline for examples/l2.cu and the entries udf-link makes of it (every k
    bucket): nvcc -dc -dlto, then one nvlink -dlto per arch (one LTO of all the kernels), then
    fatbinary.  No cache: every run does all the work."""
    cuda = args.cuda
    build = os.path.abspath(args.build)
    pack_dir = os.path.join(build, "share", "udf", "kernels")
    nvcc, nvlink, fatbinary = (os.path.join(cuda, "bin", t) for t in ("nvcc", "nvlink", "fatbinary"))
    for tool in (nvcc, nvlink, fatbinary):
        if not os.access(tool, os.X_OK):
            sys.stderr.write("bench: %s not found: no nvcc rows\n" % tool)
            return []
    with open(os.path.join(pack_dir, "ivf_flat_v1.json")) as f:
        pack = json.load(f)
    d = os.path.join(work, "nvcc")
    # nvlink -dlto wants NVVM/{bin,libdevice,lib64/libnvvm.so}; the toolkit may keep libnvvm in lib64/.
    nvvm = os.path.join(d, "nvvm")
    os.makedirs(os.path.join(nvvm, "lib64"))
    for sub in ("bin", "libdevice"):
        os.symlink(os.path.join(cuda, "nvvm", sub), os.path.join(nvvm, sub))
    for lib in ("libnvvm.so", "libnvvm.so.4"):
        for ld in (os.path.join(cuda, "nvvm", "lib64"), os.path.join(cuda, "lib64")):
            if os.path.exists(os.path.join(ld, lib)):
                os.symlink(os.path.join(ld, lib), os.path.join(nvvm, "lib64", lib))
                break
    with open(os.path.join(ROOT, "examples", "l2.cu")) as f:
        udf_src = "#include <udf/abi/metric_v1.h>\n" + f.read()
    with open(os.path.join(d, "udf.cu"), "w") as f:
        f.write(udf_src)
    esrc, kernels = nvcc_entries(pack, "l2")
    with open(os.path.join(d, "entries.cu"), "w") as f:
        f.write(esrc)
    rows = []
    for archs in ARCH_SETS:
        gencode = []
        for a in archs:
            gencode += ["-gencode", "arch=compute_%s,code=lto_%s" % (a[3:], a[3:])]
        nvcc_cmd = [nvcc, "-dc"] + gencode + ["-std=c++17", "-I", os.path.join(ROOT, "include"), "udf.cu", "entries.cu"]
        # The l2 module's pack files (pack 1.7: one a family; before, ivf_flat_v1.ltoir).
        packs = [os.path.join(pack_dir, f) for f in ("scan_v1_f32_f32_min.ltoir", "merge_v1_min.ltoir")
                 if os.path.exists(os.path.join(pack_dir, f))] or [os.path.join(pack_dir, "ivf_flat_v1.ltoir")]
        nvlink_cmds = [[nvlink, "-arch=" + a, "-dlto", "-nvvmpath=" + nvvm, "-kernels-used=" + ",".join(kernels),
                        "-L", os.path.join(cuda, "lib64"), "-lcudadevrt", "udf.o", "entries.o"] + packs +
                       ["-o", "%s.cubin" % a] for a in archs]
        fatbin_cmd = [fatbinary, "--64", "--create=out.fatbin"] + [
            "--image3=kind=elf,sm=%s,file=%s.cubin" % (a[3:], a) for a in archs]
        c, l, fb = [], [], []
        for _ in range(args.reps):
            c.append(run(nvcc_cmd, cwd=d))
            l.append(sum(run(cmd, cwd=d) for cmd in nvlink_cmds))
            fb.append(run(fatbin_cmd, cwd=d))
        rows.append({"metric": "l2", "archs": list(archs), "entries": "all buckets", "kernels": kernels,
                     "nvcc": stats(c), "nvlink": stats(l), "fatbinary": stats(fb),
                     "total": stats([x + y + z for x, y, z in zip(c, l, fb)]),
                     "sm_90_cubin_bytes": os.path.getsize(os.path.join(d, "sm_90.cubin")),
                     "commands": {"nvcc": nvcc_cmd, "nvlink": nvlink_cmds, "fatbinary": fatbin_cmd}})
        sys.stderr.write("bench: nvcc pipeline %s: %.0f ms (nvlink %.0f ms)\n" % (
            ",".join(archs), rows[-1]["total"]["median_ms"], rows[-1]["nvlink"]["median_ms"]))
    return rows


def python_cases(args, work, env):
    py_env = dict(env)
    where = args.python_path or os.path.join(os.path.abspath(args.build), "python")
    py_env["PYTHONPATH"] = where + os.pathsep + env.get("PYTHONPATH", "")
    if args.python_device:
        py_env["UDF_BENCH_DEVICE"] = "1"
    script = os.path.join(work, "ttfr.py")
    with open(script, "w") as f:
        f.write(PY_TTFR)
    out = []
    for udfs in args.python_udfs.split(","):
        for backend in args.python_backends.split(","):
            rows = {"device": bool(args.python_device), "backend": backend, "udfs": udfs, "cold": [], "warm": []}
            for rep in range(args.reps):
                e = dict(py_env, UDF_CACHE_DIR=os.path.join(work, "pycache_%s_%s_%d" % (udfs, backend, rep)),
                         UDF_BENCH_BACKEND=backend, UDF_BENCH_UDFS=udfs)
                for case in ("cold", "warm"):
                    _, text, _ = run([sys.executable, script], env=e, capture=True)
                    rows[case].append(json.loads(text.strip().splitlines()[-1]))
                rows["used"] = rows["cold"][-1]["backend"]
                sys.stderr.write("bench: python %s, %s (%s) rep %d: cold %.2f s, warm %.3f s (import %.3f s)\n" % (
                    udfs, backend, rows["used"], rep, rows["cold"][-1]["first_result_s"],
                    rows["warm"][-1]["first_result_s"], rows["warm"][-1]["import_s"]))
            out.append(rows)
    return out


def report(results):
    lines = []
    for build in results["builds"]:
        lines.append("## %s (%s)\n" % (build["label"], build["bin"]))
        lines.append("| metric | archs | entries | udfc cold | udf-link cold | udfc + udf-link cold | udf-link warm | "
                     "udfc + udf-link hit | module |")
        lines.append("|---|---|---|---:|---:|---:|---:|---:|---:|")
        for r in build["cli"]:
            c = r["udfc"]["cold"]["median_ms"] + r["udf-link"]["cold"]["median_ms"]
            h = r["udfc"]["cache-hit"]["median_ms"] + r["udf-link"]["cache-hit"]["median_ms"]
            lines.append("| %s | %s | %s | %.0f ms | %.0f ms | **%.0f ms** | %.0f ms | **%.1f ms** | %.0f KB |" % (
                r["metric"], ",".join(a[3:] for a in r["archs"]), r["entries"], r["udfc"]["cold"]["median_ms"],
                r["udf-link"]["cold"]["median_ms"], c, r["udf-link"]["warm"]["median_ms"], h, r["module_bytes"] / 1024))
        lines.append("")
        # What each entry costs (the links of the sm_90-only, all-buckets rows).
        costs = {}
        for r in build["cli"]:
            if r["entries"] != "all buckets" or r["archs"] != ["sm_90"]:
                continue
            for e in r["entry_links"]:
                if e["arch"] != "sm_90":
                    continue
                kind = re.sub(r"__[A-Za-z0-9_]+?__", "__METRIC__", e["entry"])
                costs.setdefault((r["metric"], kind), []).append((e["ms"], e["cubin_bytes"]))
        if costs:
            lines.append("Each entry's cold link for sm_90 (one nvJitLink each, -v of one cold run):\n")
            lines.append("| metric | entry | link | cubin |")
            lines.append("|---|---|---:|---:|")
            for (m, kind), v in sorted(costs.items()):
                for ms, b in v:
                    lines.append("| %s | %s | %.0f ms | %.0f KB |" % (m, kind, ms, b / 1024))
            lines.append("")
    nv = results.get("nvcc")
    if nv:
        lines.append("## The toolkit's pipeline for the same l2 module (nvcc -dc -dlto, nvlink -dlto per arch, "
                     "fatbinary; no cache)\n")
        lines.append("| archs | nvcc -dc | nvlink -dlto (all archs, one after another) | fatbinary | **total** | "
                     "udfc + udf-link cold (%s) | sm_90 cubin, nvlink / udf-link module |" % (
                         results["builds"][-1]["label"] if results.get("builds") else "-"))
        lines.append("|---|---:|---:|---:|---:|---:|---:|")
        for r in nv:
            ours = [x for x in (results["builds"][-1]["cli"] if results.get("builds") else [])
                    if (x["metric"], x["archs"], x["entries"]) == (r["metric"], r["archs"], r["entries"])]
            ours_ms = ("%.0f ms" % (ours[0]["udfc"]["cold"]["median_ms"] + ours[0]["udf-link"]["cold"]["median_ms"])
                       if ours else "-")
            ours_kb = ("%.0f KB" % (ours[0]["module_bytes"] / 1024) if ours and len(r["archs"]) == 1 else "-")
            lines.append("| %s | %.0f ms | %.0f ms | %.0f ms | **%.0f ms** | %s | %.0f KB / %s |" % (
                ",".join(a[3:] for a in r["archs"]), r["nvcc"]["median_ms"], r["nvlink"]["median_ms"],
                r["fatbinary"]["median_ms"], r["total"]["median_ms"], ours_ms, r["sm_90_cubin_bytes"] / 1024, ours_kb))
        lines.append("")
    pys = results.get("python")
    if isinstance(pys, dict):  # results written before --python-backends
        pys = [dict(pys, backend="default", used="numba")]
    if pys:
        what = "Index.build(100k x 64) + search" if pys[0]["device"] else "compile + link (sm_90, k <= 32), no GPU"
        lines.append("## Python, the declarations to the first result (%s), median of %d new processes\n" % (
            what, len(pys[0]["cold"])))
        lines.append("| UDFs | front end | case | import udf | decorate | CUDA + runtime | compile + build | "
                     "search (+ link wait) | first result (after import) |")
        lines.append("|---|---|---|---:|---:|---:|---:|---:|---:|")
        udf_names = {"metric": "@udf.metric", "filter": "@udf.metric + @udf.filter",
                     "builtin+filter": "built-in l2 + @udf.filter"}
        for py in pys:
            med = lambda case, k: statistics.median(x[k] for x in py[case])  # noqa: E731
            name = py["backend"] if py["backend"] == py["used"] else "%s (%s)" % (py["backend"], py["used"])
            udfs = udf_names.get(py.get("udfs", "metric"), py.get("udfs"))
            for case in ("cold", "warm"):
                lines.append("| %s | %s | %s | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.0f ms | **%.0f ms** |" % (
                    udfs, name, case, med(case, "import_s") * 1e3, med(case, "decorate_s") * 1e3,
                    med(case, "runtime_s") * 1e3, med(case, "build_s") * 1e3, med(case, "search_s") * 1e3,
                    med(case, "first_result_s") * 1e3))
        lines.append("")
    m = results["machine"]
    lines.append("Machine: %s, %d CPUs, load average %.2f at start, %.2f at end; %d repetitions; %s." % (
        m["cpu"], m["nproc"], m["loadavg_start"][0], m["loadavg_end"][0], results["reps"], m.get("gpu") or "no GPU"))
    return "\n".join(lines) + "\n"


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    builds = results["builds"]
    rows = builds[0]["cli"]
    labels = ["%s %s\n%s" % (r["metric"], "1 arch" if len(r["archs"]) == 1 else "4 archs", r["entries"]) for r in rows]
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / len(builds)
    for i, b in enumerate(builds):
        vals = []
        for r in rows:
            match = [x for x in b["cli"] if (x["metric"], x["archs"], x["entries"]) == (r["metric"], r["archs"], r["entries"])]
            vals.append((match[0]["udfc"]["cold"]["median_ms"] + match[0]["udf-link"]["cold"]["median_ms"]) / 1e3
                        if match else 0)
        ax.bar([j + i * width for j in range(len(rows))], vals, width, label=b["label"])
    ax.set_xticks([j + width * (len(builds) - 1) / 2 for j in range(len(rows))])
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("udfc + udf-link, cold (s)")
    ax.axhline(1.0, color="gray", ls="--", lw=0.8)
    ax.legend()
    ax.set_title("Cold compile + link of one metric (%d CPUs)" % results["machine"]["nproc"])
    fig.tight_layout()
    fig.savefig(path)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--tag", default="", help="suffix of the result files")
    ap.add_argument("--cases", default="cli,nvcc,python", help="a comma list of cli, nvcc, python")
    ap.add_argument("--cuda", default=os.environ.get("CUDA_HOME", "/usr/local/cuda"), help="the toolkit of the nvcc rows")
    ap.add_argument("--baseline", help="an older build's folder (bin/, share/udf/kernels) timed on the same CLI rows")
    ap.add_argument("--baseline-label", default="baseline")
    ap.add_argument("--label", default="this build")
    ap.add_argument("--skip-warm", action="store_true", help="no --no-cache rows (warm = cold): half the time")
    ap.add_argument("--only-baseline", action="store_true", help="time the --baseline build alone")
    ap.add_argument("--python-backends", default="auto",
                    help="a comma list of the @udf.metric back ends to time (auto, nvrtc, numba-cuda-mlir, numba-cuda)")
    ap.add_argument("--python-udfs", default="metric",
                    help="a comma list of what the Python cases declare: metric, filter (the metric and a filter), "
                         "builtin+filter (the shipped l2 and a filter)")
    ap.add_argument("--python-device", action="store_true", help="Python cases build and search an index on the GPU")
    ap.add_argument("--python-path", help="where `import udf` finds the package (default BUILD/python; an installed "
                                          "wheel's folder)")
    ap.add_argument("--report", metavar="JSON", help="print (and rewrite the .md and .png beside) an earlier "
                                                     "run's JSON; runs nothing")
    args = ap.parse_args()

    if args.report:
        with open(args.report) as f:
            results = json.load(f)
        text = report(results)
        sys.stdout.write(text)
        stem = os.path.splitext(args.report)[0]
        with open(stem + ".md", "w") as f:
            f.write(text)
        if results.get("builds"):
            plot(results, stem + ".png")
        return

    cases = set(args.cases.split(","))
    work = tempfile.mkdtemp(prefix="udf-bench.")
    env = dict(os.environ)
    env.pop("UDF_NO_FATBINARY_FALLBACK", None)
    counter = [0]

    def fresh():
        counter[0] += 1
        return dict(env, UDF_CACHE_DIR=os.path.join(work, "cache%d" % counter[0]))

    results = {"machine": {"cpu": platform.processor() or "", "nproc": os.cpu_count(), "loadavg_start": os.getloadavg(),
                           "python": platform.python_version()}, "reps": args.reps, "builds": []}
    try:
        with open("/proc/cpuinfo") as f:
            results["machine"]["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        results["machine"]["gpu"] = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                                   capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    if "cli" in cases:
        builds = [] if args.only_baseline else [(args.label, os.path.abspath(args.build))]
        if args.baseline:
            builds.insert(0, (args.baseline_label, os.path.abspath(args.baseline)))
        for label, root in builds:
            tools = {t: os.path.join(root, "bin", t) for t in ("udfc", "udf-link")}
            help_text = subprocess.run([tools["udf-link"], "--help"], capture_output=True, text=True).stdout
            tools["max_k"] = "--max-k" in help_text
            results["builds"].append({"label": label, "bin": os.path.join(root, "bin"),
                                      "cli": cli_cases(args, tools, work, env, fresh)})
    if "nvcc" in cases:
        results["nvcc"] = nvcc_cases(args, work)
    if "python" in cases:
        results["python"] = python_cases(args, work, env)
    results["machine"]["loadavg_end"] = os.getloadavg()
    shutil.rmtree(work, ignore_errors=True)

    text = report(results)
    sys.stdout.write(text)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, "toolchain_bench" + ("_" + args.tag if args.tag else ""))
    with open(stem + ".json", "w") as f:
        json.dump(results, f, indent=2)
    with open(stem + ".md", "w") as f:
        f.write(text)
    if results["builds"] and not plot(results, stem + ".png"):
        sys.stdout.write("(matplotlib not installed: no plot)\n")


if __name__ == "__main__":
    main()
