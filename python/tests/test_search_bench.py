"""The search benchmark's pieces that run without a GPU (bench/search_bench.py and .cpp).

- bench/search_bench.py --from-json renders a results JSON in search_bench's format (with PyTorch
  exact rows) into the combined table: the expected rows, PyTorch beside ours, the speed-up.
- Its helpers: the JSON layout round-trips, recall@k and the quantiles match search_bench's.
- search_bench.cpp's .npy writer, element conversions, option parsing, data families and list
  balance, compiled into a tiny helper program (the bench's main renamed away, the runtime left
  unlinked): numpy.load reads what it writes, with the values numpy's own conversions give.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

np = pytest.importorskip("numpy", reason="numpy is not installed")

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "bench" / "search_bench.py"


def load_driver():
    spec = importlib.util.spec_from_file_location("search_bench_driver", DRIVER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def result(engine, data, metric, batch, probes, median_ms, recall, arrays="host", elem="f32", k=10):
    samples = [median_ms * 0.9, median_ms, median_ms * 1.2]
    return {"engine": engine, "data": data, "elem": elem, "metric": metric, "arrays": arrays, "batch": batch,
            "n_probes": probes, "k": k, "reps": 3, "median_ms": median_ms, "p10_ms": samples[0], "p90_ms": samples[2],
            "qps": batch / (median_ms / 1e3), "recall": recall, "recall_queries": min(batch, 1000),
            "coarse_ms": 0.1, "schedule_ms": 0.2, "scan_ms": 0.3, "merge_ms": 0.05, "scored_per_query": 31234.5,
            "list_mb_per_query": 16.5, "scan_gbps": 2345.6, "samples_ms": samples}


def synthetic_doc() -> dict:
    ours = [("clustered", "l2", 10000, 8, 10.0, 0.95, "host", "f32"),
            ("clustered", "l2", 10000, 32, 20.0, 0.99, "host", "f32"),
            ("clustered", "weighted_l2", 10000, 32, 25.0, 0.98, "host", "f32"),
            ("clustered", "l2", 1, 32, 0.4, 1.0, "host", "f32"),
            ("uniform", "l2", 10000, 32, 30.0, 0.7, "host", "f32"),
            ("clustered", "l2", 10000, 32, 16.0, None, "device", "f32"),
            ("clustered", "l2", 10000, 32, 12.0, 0.97, "host", "f16")]
    torch = [("clustered", "l2", 10000, 200.0, "host"), ("clustered", "l2", 10000, 160.0, "device"),
             ("clustered", "l2", 1, 0.5, "host")]
    return {"kind": "search_bench", "version": 1, "device": "NVIDIA H100 80GB HBM3", "driver": 13000, "commit": "abc1234",
            "rows": 1000000, "dim": 128, "lists": 1024, "quick": False,
            "config": {"data": ["clustered", "uniform"], "elems": ["f32", "f16"], "metrics": ["l2", "weighted_l2"],
                       "batches": [1, 10000], "probes": [8, 32], "ks": [10], "reps": {"1": 200, "10000": 10},
                       "eval_queries": 1000, "clusters": 1024, "sigma": 0.15, "i8_scale": 100,
                       "weights": "linspace(0.5, 2.0, dim)", "evict_bytes": 268435456},
            "builds": [{"data": "clustered", "elem": "f32", "metric": "l2", "symbol": "udf_builtin_l2", "seconds": 3.4,
                        "kmeans_s": 1.25, "assign_s": 1.5, "pack_s": 0.65, "balance": 1.5, "list_mean": 976.5625,
                        "list_probe_weighted": 1416.016, "list_max": 1465, "probe_weighted_over_mean": 1.45,
                        "max_over_mean": 1.5002},
                       {"data": "uniform", "elem": "f32", "metric": "l2", "symbol": "udf_builtin_l2", "seconds": 2.0}],
            "results": [result("udf", d, m, b, p, ms, r, a, e) for d, m, b, p, ms, r, a, e in ours]
            + [{**result("torch_exact", d, m, b, None, ms, 1.0, a), "coarse_ms": None} for d, m, b, ms, a in torch]}


def md_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """The markdown tables of `text` under each '## TITLE', as rows of {header: cell}."""
    tables, title, header = {}, None, None
    for line in text.splitlines():
        if line.startswith("## "):
            title, header = line[3:].strip(), None
        elif line.startswith("|") and title:
            cells = [c.strip() for c in line.strip("|").split("|")]
            if header is None:
                header = cells
                tables[title] = []
            elif not set(cells[0]) <= set("-: "):
                tables[title].append(dict(zip(header, cells)))
    return tables


def test_from_json_renders_the_combined_table(tmp_path):
    src = tmp_path / "in.json"
    src.write_text(json.dumps(synthetic_doc()))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(DRIVER), "--from-json", str(src), "--out", str(out)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    md = (out / "search_bench.md").read_text()
    assert md.strip() in r.stdout
    assert "NVIDIA H100 80GB HBM3, CUDA driver 13000, commit abc1234. 1,000,000 x 128 vectors, 1024 lists" in md
    tables = md_tables(md)
    assert tables["Index builds"] == [  # phases and balance: "-" in a file from before they were recorded
        {"data": "clustered", "elem": "f32", "metric": "l2", "build s": "3.40", "k-means s": "1.25", "assign s": "1.50",
         "pack + upload s": "0.65", "balance": "1.5", "mean list": "976.6", "probe-weighted": "1416.0", "p-w / mean": "1.450",
         "max / mean": "1.500"},
        {"data": "uniform", "elem": "f32", "metric": "l2", "build s": "2.00", "k-means s": "-", "assign s": "-",
         "pack + upload s": "-", "balance": "-", "mean list": "-", "probe-weighted": "-", "p-w / mean": "-", "max / mean": "-"}]

    search = tables["Search"]
    assert len(search) == 7  # every search_bench row, in order; PyTorch rows only beside them
    key = lambda row: (row["data"], row["elem"], row["metric"], row["arrays"], row["batch"], row["n_probes"])
    by_key = {key(row): row for row in search}
    p32 = by_key[("clustered", "f32", "l2", "host", "10000", "32")]
    assert (p32["median ms"], p32["p10"], p32["p90"], p32["QPS"], p32["recall@k"]) == ("20.000", "18.000", "24.000", "500,000", "0.9900")
    assert (p32["PyTorch exact ms"], p32["PyTorch QPS"], p32["speed-up"]) == ("200.000", "50,000", "10.00")
    assert by_key[("clustered", "f32", "l2", "host", "10000", "8")]["speed-up"] == "20.00"
    assert by_key[("clustered", "f32", "l2", "host", "1", "32")]["speed-up"] == "1.25"
    device = by_key[("clustered", "f32", "l2", "device", "10000", "32")]
    assert (device["recall@k"], device["PyTorch exact ms"], device["speed-up"]) == ("-", "160.000", "10.00")
    for unmatched in [("clustered", "f32", "weighted_l2", "host", "10000", "32"), ("uniform", "f32", "l2", "host", "10000", "32"),
                      ("clustered", "f16", "l2", "host", "10000", "32")]:
        assert (by_key[unmatched]["PyTorch QPS"], by_key[unmatched]["speed-up"]) == ("-", "-")
    assert (p32["coarse"], p32["schedule"], p32["scan"], p32["merge ms"]) == ("0.100", "0.200", "0.300", "0.050")
    assert (p32["scored / query"], p32["list MB / query"], p32["scan GB/s"]) == ("31,234", "16.50", "2,346")

    torch = tables["PyTorch exact"]
    assert [(t["arrays"], t["batch"], t["median ms"], t["QPS"], t["recall@k"]) for t in torch] == [
        ("host", "10000", "200.000", "50,000", "1.0000"), ("device", "10000", "160.000", "62,500", "1.0000"),
        ("host", "1", "0.500", "2,000", "1.0000")]

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib is not importable: no plots" in r.stdout
    else:
        assert (out / "search_latency.png").stat().st_size > 0 and (out / "search_recall_qps.png").stat().st_size > 0


def test_driver_needs_a_binary_or_a_json(tmp_path):
    r = subprocess.run([sys.executable, str(DRIVER), "--out", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "--bin and --module are required" in r.stderr


def test_json_layout_recall_and_quantiles():
    drv = load_driver()
    doc = synthetic_doc()
    text = drv.json_text(doc)
    assert json.loads(text) == doc
    lines = text.splitlines()
    assert sum(line.startswith('  {"engine": ') for line in lines) == len(doc["results"])  # one result a line
    assert sum(line.startswith('  {"data": ') for line in lines) == len(doc["builds"])

    found = np.array([[1, 2, -1], [4, 5, 6], [7, 7, 8]])
    reference = np.array([[1, 2, 3], [6, 5, 4], [9, 10, 7]])
    assert drv.recall_at_k(found, reference) == pytest.approx((2 + 3 + 1) / 9)

    q = drv.quantiles([4.0, 1.0, 3.0, 2.0])  # as search_bench's quantile(): linear between order statistics
    assert q == pytest.approx({"median_ms": 2.5, "p10_ms": 1.3, "p90_ms": 3.7})


HELPER = r"""
#define main search_bench_main  // the bench's own main is not linked in (--gc-sections drops it)
#include "search_bench.cpp"
#undef main

// The one runtime function the pieces under test call.
extern "C" size_t udf_dtype_size(udf_dtype t) { return t == UDF_DTYPE_F32 ? 4 : t == UDF_DTYPE_F16 ? 2 : 1; }

int main(int argc, char** argv) {
  const std::string mode = argv[1];
  if (mode == "parse") {  // search_bench's options, parsed from argv[2..]
    const Options o = parse_options(argc - 1, argv + 1);
    std::printf("rows %lld lists %u probes", static_cast<long long>(o.rows), o.lists);
    for (uint32_t p : o.probes) std::printf(" %u", p);
    std::printf(" ks");
    for (uint32_t k : o.ks) std::printf(" %u", k);
    std::printf(" reps");
    for (uint32_t b : o.batches) std::printf(" %u", o.reps_for(b));
    std::printf(" elems");
    for (const std::string& e : o.elems) std::printf(" %s", e.c_str());
    std::printf(" data");
    for (const std::string& d : o.data) std::printf(" %s", d.c_str());
    std::printf(" spread %g", double(o.spread));
    if (o.many_spread != 0.55f) std::printf(" many_spread %g", double(o.many_spread));  // --many-spread, as given
    if (o.clusters) std::printf(" clusters %u", o.clusters);  // --clusters, as given
    if (o.balance >= 0) std::printf(" balance %g", o.balance);  // --balance, as given
    if (o.mesoclusters) std::printf(" mesoclusters %u", o.mesoclusters);  // --mesoclusters, as given
    std::printf(" mixtures %u %u", o.clusters_for("clustered"), o.clusters_for("many"));
    if (!o.devices.empty()) {  // --devices: the ordinals as given
      std::printf(" devices");
      for (int32_t d : o.devices) std::printf(" %d", d);
    }
    if (o.testing_paths != std::vector<uint32_t>{0}) {  // --testing-paths, as given
      std::printf(" paths");
      for (uint32_t p : o.testing_paths) std::printf(" %u", p);
      std::printf(" ab %d rounds %u", o.path_ab() ? 1 : 0, o.path_rounds);
    }
    std::printf("\n");
    return 0;
  }
  if (mode == "balance") {  // balance SIZE...: the list balance of these list sizes
    std::vector<uint32_t> sizes;
    for (int i = 2; i < argc; ++i) sizes.push_back(static_cast<uint32_t>(std::strtoul(argv[i], nullptr, 10)));
    const ListBalance b = list_balance(sizes);
    std::printf("%.6f %.6f %.0f\n", b.mean, b.probe_weighted, b.max);
    return 0;
  }
  if (mode == "draw") {  // draw KIND SIGMA [CLUSTERS]: 4000 x 16 rows; their mean and variance, and a checksum
    const uint32_t clusters = argc > 4 ? static_cast<uint32_t>(std::atoi(argv[4])) : kClusters;
    const Distribution dist(static_cast<Distribution::Kind>(std::atoi(argv[2])), std::strtof(argv[3], nullptr), 16, clusters);
    const std::vector<float> v = dist.draw(4000, Distribution::kBaseStream);
    double sum = 0, sq = 0;
    uint64_t h = 1469598103934665603ull;
    for (float f : v) {
      sum += f;
      sq += double(f) * f;
      uint32_t b;
      std::memcpy(&b, &f, 4);
      h = (h ^ b) * 1099511628211ull;
    }
    const double mean = sum / double(v.size());
    std::printf("%.4f %.4f %016llx\n", mean, sq / double(v.size()) - mean * mean, static_cast<unsigned long long>(h));
    return 0;
  }
  // npy DIR: values.npy (the f32 input) and its conversions, written as search_bench writes them
  std::vector<float> x;
  for (int i = 0; i < 7 * 300; ++i) x.push_back(static_cast<float>(std::sin(i * 0.37) * 1.8 + (i % 7 == 0 ? 0.005 : 0.0)));
  x[1] = 0.025f;  // a halfway case for i8: 2.5 rounds to 2
  x[2] = -0.015f; // -1.5 rounds to -2
  const std::string dir = argv[2];
  write_npy(dir + "/values.npy", "<f4", {300, 7}, x.data(), x.size() * sizeof(float));
  for (const Elem& e : kElems) {
    const Vectors v = to_elem(x, 7, e);
    write_npy(dir + "/" + e.name + ".npy", e.npy_descr, {v.rows, v.cols}, v.bytes.data(), v.bytes.size());
  }
  std::vector<int64_t> ids(1000 * 3);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i) * 1000003 - 1;
  write_npy(dir + "/ids.npy", "<i8", {1000, 3}, ids.data(), ids.size() * sizeof(int64_t));
  write_npy(dir + "/row.npy", "<f4", {5}, x.data(), 5 * sizeof(float));
  return 0;
}
"""


@pytest.fixture(scope="module")
def helper(tmp_path_factory):
    """search_bench.cpp's pieces in a small program (built with $CXX or g++)."""
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    if not cxx:
        pytest.skip("no C++ compiler ($CXX or g++) to build search_bench.cpp's pieces")
    d = tmp_path_factory.mktemp("search_bench_helper")
    (d / "helper.cpp").write_text(HELPER)
    exe = d / "helper"
    subprocess.run([cxx, "-std=c++20", "-O1", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function",
                    f"-I{ROOT / 'include'}", f"-I{ROOT / 'bench'}", "-ffunction-sections", "-Wl,--gc-sections",
                    str(d / "helper.cpp"), "-o", str(exe), "-ldl"], check=True)
    return exe


def test_npy_files_read_back_with_numpy(helper, tmp_path):
    subprocess.run([str(helper), "npy", str(tmp_path)], check=True)
    for f in tmp_path.glob("*.npy"):
        raw = f.read_bytes()
        assert raw[:8] == b"\x93NUMPY\x01\x00"
        header_len = int.from_bytes(raw[8:10], "little")
        assert (10 + header_len) % 64 == 0 and raw[10 + header_len - 1:10 + header_len] == b"\n", f.name

    x = np.load(tmp_path / "values.npy")
    assert x.dtype == np.float32 and x.shape == (300, 7) and x.flags["C_CONTIGUOUS"]
    expected = np.sin(np.arange(7 * 300) * 0.37) * 1.8 + np.where(np.arange(7 * 300) % 7 == 0, 0.005, 0.0)
    expected[1:3] = [0.025, -0.015]
    np.testing.assert_allclose(x.ravel(), expected.astype(np.float32), rtol=1e-6)
    assert np.array_equal(np.load(tmp_path / "f32.npy"), x)

    f16 = np.load(tmp_path / "f16.npy")
    assert f16.dtype == np.float16 and f16.shape == (300, 7)
    assert np.array_equal(f16, x.astype(np.float16))

    i8 = np.load(tmp_path / "i8.npy")
    assert i8.dtype == np.int8 and i8.shape == (300, 7)
    assert np.array_equal(i8, np.clip(np.round(x * np.float32(100)), -127, 127).astype(np.int8))
    assert i8.ravel()[1:3].tolist() == [2, -2] and i8.min() == -127 and i8.max() == 127

    ids = np.load(tmp_path / "ids.npy")
    assert ids.dtype == np.int64 and ids.shape == (1000, 3)
    assert np.array_equal(ids.ravel(), np.arange(3000, dtype=np.int64) * 1000003 - 1)
    row = np.load(tmp_path / "row.npy")
    assert row.shape == (5,) and np.array_equal(row, x.ravel()[:5])


@pytest.mark.parametrize("args, expected", [
    ([], "rows 1000000 lists 1024 probes 8 16 32 64 128 256 ks 10 100 reps 200 50 10 elems f32 f16 i8 data clustered uniform "
     "spread 0.92 mixtures 1024 4096"),
    (["--quick"], "rows 1000000 lists 1024 probes 8 32 128 ks 10 reps 40 10 2 elems f32 f16 i8 data clustered uniform spread 0.92 "
     "mixtures 1024 4096"),
    (["--quick", "--probes", "4,64", "--reps", "3", "--elem", "all", "--rows", "5000", "--lists", "64"],
     "rows 5000 lists 64 probes 4 64 ks 10 reps 3 3 3 elems f32 f16 i8 data clustered uniform spread 0.92 mixtures 1024 256"),
    (["--batches", "5,500", "--ks", "1", "--elem", "f16,i8"], "rows 1000000 lists 1024 probes 8 16 32 64 128 256 ks 1 reps 200 50 "
     "elems f16 i8 data clustered uniform spread 0.92 mixtures 1024 4096"),
    (["--data", "overlap", "--spread", "0.7"], "rows 1000000 lists 1024 probes 8 16 32 64 128 256 ks 10 100 reps 200 50 10 elems f32 f16 i8 "
     "data overlap spread 0.7 mixtures 1024 4096"),
    (["--data", "all"], "rows 1000000 lists 1024 probes 8 16 32 64 128 256 ks 10 100 reps 200 50 10 elems f32 f16 i8 "
     "data clustered overlap many uniform spread 0.92 mixtures 1024 4096"),
    (["--quick", "--devices", "0,1"], "rows 1000000 lists 1024 probes 8 32 128 ks 10 reps 40 10 2 elems f32 f16 i8 "
     "data clustered uniform spread 0.92 mixtures 1024 4096 devices 0 1"),
    (["--devices", "0,0,3", "--quick"], "rows 1000000 lists 1024 probes 8 32 128 ks 10 reps 40 10 2 elems f32 f16 i8 "
     "data clustered uniform spread 0.92 mixtures 1024 4096 devices 0 0 3"),
    (["--devices", "2"], "rows 1000000 lists 1024 probes 8 16 32 64 128 256 ks 10 100 reps 200 50 10 elems f32 f16 i8 "
     "data clustered uniform spread 0.92 mixtures 1024 4096 devices 2"),
    (["--data", "many", "--clusters", "512"], "rows 1000000 lists 1024 probes 8 16 32 64 128 256 ks 10 100 reps 200 50 10 "
     "elems f32 f16 i8 data many spread 0.92 clusters 512 mixtures 512 512"),
    (["--data", "many", "--many-spread", "0.4"], "rows 1000000 lists 1024 probes 8 16 32 64 128 256 ks 10 100 reps 200 50 10 "
     "elems f32 f16 i8 data many spread 0.92 many_spread 0.4 mixtures 1024 4096"),
    (["--data", "many,overlap", "--lists", "100", "--spread", "0.8"], "rows 1000000 lists 100 probes 8 16 32 64 128 256 ks 10 100 "
     "reps 200 50 10 elems f32 f16 i8 data many overlap spread 0.8 mixtures 1024 400"),
    (["--balance", "1.2"], "rows 1000000 lists 1024 probes 8 16 32 64 128 256 ks 10 100 reps 200 50 10 elems f32 f16 i8 "
     "data clustered uniform spread 0.92 balance 1.2 mixtures 1024 4096"),
    (["--balance", "0", "--clusters", "16777216"], "rows 1000000 lists 1024 probes 8 16 32 64 128 256 ks 10 100 reps 200 50 10 "
     "elems f32 f16 i8 data clustered uniform spread 0.92 clusters 16777216 balance 0 mixtures 16777216 16777216"),
    (["--balance", "1"], "rows 1000000 lists 1024 probes 8 16 32 64 128 256 ks 10 100 reps 200 50 10 elems f32 f16 i8 "
     "data clustered uniform spread 0.92 balance 1 mixtures 1024 4096"),
    (["--mesoclusters", "1"], "rows 1000000 lists 1024 probes 8 16 32 64 128 256 ks 10 100 reps 200 50 10 elems f32 f16 i8 "
     "data clustered uniform spread 0.92 mesoclusters 1 mixtures 1024 4096"),
    (["--testing-paths", "512"], "rows 1000000 lists 1024 probes 8 16 32 64 128 256 ks 10 100 reps 200 50 10 elems f32 f16 i8 "
     "data clustered uniform spread 0.92 mixtures 1024 4096 paths 512 ab 0 rounds 1"),
    (["--testing-paths", "0,512", "--path-rounds", "3"], "rows 1000000 lists 1024 probes 8 16 32 64 128 256 ks 10 100 "
     "reps 200 50 10 elems f32 f16 i8 data clustered uniform spread 0.92 mixtures 1024 4096 paths 0 512 ab 1 rounds 3"),
])
def test_options(helper, args, expected):
    r = subprocess.run([str(helper), "parse", "m.udfm", *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == expected


@pytest.mark.parametrize("args, message", [
    ([], "no module given"),
    (["m.udfm", "--bogus", "1"], "unknown option --bogus"),
    (["m.udfm", "--rows", "0"], "bad value for --rows: '0'"),
    (["m.udfm", "--probes", "8,,16"], "bad value for --probes: ''"),
    (["m.udfm", "--elem", "u8"], "bad value for --elem: 'u8'"),
    (["m.udfm", "--data", "normal"], "bad value for --data: 'normal'"),
    (["m.udfm", "--data", "both"], "bad value for --data: 'both'"),
    (["m.udfm", "--spread", "0"], "bad value for --spread: '0'"),
    (["m.udfm", "--many-spread", "-1"], "bad value for --many-spread: '-1'"),
    (["m.udfm", "--spread", "-1"], "bad value for --spread: '-1'"),
    (["m.udfm", "--spread", "nan"], "bad value for --spread: 'nan'"),
    (["m.udfm", "--spread", "0.5x"], "bad value for --spread: '0.5x'"),
    (["m.udfm", "--reps"], "--reps needs a value"),
    (["m.udfm", "--devices", "0,,1"], "bad value for --devices: ''"),
    (["m.udfm", "--devices", "0,1,"], "bad value for --devices: ''"),
    (["m.udfm", "--devices", "-1"], "bad value for --devices: '-1'"),
    (["m.udfm", "--devices", "a"], "bad value for --devices: 'a'"),
    (["m.udfm", "--devices", "1,x2"], "bad value for --devices: 'x2'"),
    (["m.udfm", "--devices"], "--devices needs a value"),
    (["m.udfm", "--testing-paths", "0,x"], "bad value for --testing-paths: '0,x'"),
    (["m.udfm", "--testing-paths", "-1"], "bad value for --testing-paths: '-1'"),
    (["m.udfm", "--path-rounds", "0"], "bad value for --path-rounds: '0'"),
    (["m.udfm", "--data", "many,lots"], "bad value for --data: 'lots'"),
    (["m.udfm", "--clusters", "0"], "bad value for --clusters: '0'"),
    (["m.udfm", "--clusters", "-4"], "bad value for --clusters: '-4'"),
    (["m.udfm", "--clusters", "16777217"], "bad value for --clusters: '16777217'"),
    (["m.udfm", "--clusters", "4k"], "bad value for --clusters: '4k'"),
    (["m.udfm", "--balance", "0.5"], "bad value for --balance: '0.5'"),  # the runtime takes 0 (no cap) or >= 1
    (["m.udfm", "--balance", "-1"], "bad value for --balance: '-1'"),
    (["m.udfm", "--balance", "inf"], "bad value for --balance: 'inf'"),
    (["m.udfm", "--balance", "nan"], "bad value for --balance: 'nan'"),
    (["m.udfm", "--balance", "1.5x"], "bad value for --balance: '1.5x'"),
    (["m.udfm", "--balance", ""], "bad value for --balance: ''"),
    (["m.udfm", "--balance"], "--balance needs a value"),
    (["m.udfm", "--mesoclusters", "0"], "bad value for --mesoclusters: '0'"),  # 0 is the default: leave it out
    (["m.udfm", "--mesoclusters", "16385"], "bad value for --mesoclusters: '16385'"),
])
def test_bad_options_exit_2_with_usage(helper, args, message):
    r = subprocess.run([str(helper), "parse", *args], capture_output=True, text=True)
    assert r.returncode == 2
    assert f"search_bench: {message}\n" in r.stderr and "usage: search_bench MODULE.udfm" in r.stderr
    assert "  [--spread S] [--many-spread S] [--clusters N] [--balance B] [--mesoclusters M]\n" in r.stderr  # every option group of the usage ends its line


def test_overlap_data_is_the_clustered_mixture_with_a_wider_spread(helper):
    """Centres uniform in [-1, 1] (variance 1/3) plus Gaussian noise: the variance of every coordinate
    is 1/3 + sigma^2.  The overlap family (kind 2) draws around the clustered family's centres with
    --spread as sigma, its own points; the same arguments give the same data."""
    def draw(kind, sigma):
        r = subprocess.run([str(helper), "draw", str(kind), str(sigma)], capture_output=True, text=True, check=True)
        mean, var, digest = r.stdout.split()
        return float(mean), float(var), digest
    uniform, clustered, overlap = draw(0, 0.15), draw(1, 0.15), draw(2, 0.5)
    assert uniform[1] == pytest.approx(1 / 3, rel=0.05)
    assert clustered[1] == pytest.approx(1 / 3 + 0.15 ** 2, rel=0.05)
    assert overlap[1] == pytest.approx(1 / 3 + 0.5 ** 2, rel=0.05)
    assert draw(2, 0.8)[1] == pytest.approx(1 / 3 + 0.8 ** 2, rel=0.05)
    assert draw(2, 0.5) == overlap  # deterministic
    assert len({uniform[2], clustered[2], overlap[2], draw(1, 0.5)[2]}) == 4  # other points, even at one spread


def test_many_data_is_a_mixture_of_its_own_centres(helper):
    """The many family (kind 3): a mixture of --clusters centres (4 x --lists by default) uniform in
    [-1, 1], spread sigma: the variance of every coordinate is 1/3 + sigma^2 too; its centres and
    points are draws of its own (other numbers than overlap's at the same spread and count), the
    same arguments give the same data, and the count changes the draws."""
    def draw(kind, sigma, clusters):
        r = subprocess.run([str(helper), "draw", str(kind), str(sigma), str(clusters)], capture_output=True, text=True, check=True)
        mean, var, digest = r.stdout.split()
        return float(mean), float(var), digest
    many = draw(3, 0.92, 4096)
    assert many[1] == pytest.approx(1 / 3 + 0.92 ** 2, rel=0.05)
    assert draw(3, 0.3, 4096)[1] == pytest.approx(1 / 3 + 0.3 ** 2, rel=0.05)
    assert draw(3, 0.92, 4096) == many  # deterministic
    assert len({many[2], draw(2, 0.92, 4096)[2], draw(3, 0.92, 1024)[2], draw(2, 0.92, 1024)[2]}) == 4
    assert draw(1, 0.15, 1024) == draw(1, 0.15, 1024)


@pytest.mark.parametrize("sizes, expected", [
    ([5, 5, 5, 5], "5.000000 5.000000 5"),        # even lists: probe-weighted = mean
    ([1, 2, 3], "2.000000 2.333333 3"),           # (1 + 4 + 9) / 6
    ([0, 0, 4], "1.333333 4.000000 4"),           # one full list of three: every probe lands in it
    ([100, 300], "200.000000 250.000000 300"),    # (10^4 + 9 10^4) / 400
    ([], "0.000000 0.000000 0"),
    ([0, 0], "0.000000 0.000000 0"),
])
def test_list_balance_is_the_probe_weighted_mean(helper, sizes, expected):
    """list_balance: the mean list size, sum(s^2) / sum(s) (the size of a list probed in proportion
    to its size) and the largest list."""
    r = subprocess.run([str(helper), "balance", *map(str, sizes)], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == expected
