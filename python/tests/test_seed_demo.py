"""examples/python/seed_demo.py: the proof of concept's two examples.

CPU: the script compiles and links both metrics for several archs without a GPU and says why it
did not search (exit 0; exit 1 with --require-gpu).  GPU: both searches match the exhaustive
float64 reference for every query, as printed in the tables and as returned.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import gpu_status

DEMO = Path(__file__).resolve().parents[2] / "examples" / "python" / "seed_demo.py"


def run_demo(*args):
    import udf
    env = dict(os.environ)
    # the package under test, wherever pytest imported it from
    env["PYTHONPATH"] = os.pathsep.join([str(Path(udf.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, str(DEMO), *args], env=env, capture_output=True, text=True, timeout=900)


def load_demo():
    spec = importlib.util.spec_from_file_location("seed_demo", DEMO)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_demo_compiles_without_gpu(any_backend, udf_tools):
    if gpu_status()[0]:
        pytest.skip("a GPU is present: the demo searches (test_demo_searches_and_matches)")
    r = run_demo("--backend", any_backend, "--archs", "sm_80,sm_120")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"compiling for sm_80,sm_120 with {any_backend}" in r.stdout
    for symbol in ("demo_weighted_l2_update_f32", "demo_l2_f32"):
        assert any(line.strip().startswith(symbol) and "(sm_80, sm_120)" in line for line in r.stdout.splitlines()), \
            r.stdout
    assert "no GPU to search on (UDF_ERROR_NO_DRIVER" in r.stdout
    r = run_demo("--backend", any_backend, "--archs", "sm_90", "--require-gpu")
    assert r.returncode == 1 and "no GPU to search on" in r.stdout


@pytest.mark.gpu
def test_demo_searches_and_matches(ext, backend):
    r = run_demo("--backend", backend, "--require-gpu", "--archs", "sm_90")
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("matches the float64 reference: 5/5 queries") == 2
    assert r.stdout.rstrip().endswith("OK")
    # the same searches in this process: neighbours equal the reference's where distances differ
    demo = load_demo()
    for res in demo.search_examples(backend):
        assert res.neighbors.shape == res.distances.shape == (demo.N_QUERIES, demo.K)
        np.testing.assert_allclose(res.distances, res.ref_distances, rtol=1e-5, atol=1e-6)
        for q in range(demo.N_QUERIES):
            d = res.ref_distances[q]
            if np.all(np.diff(d) > 1e-5):  # no near-ties: the ids are determined
                assert np.array_equal(res.neighbors[q], res.ref_neighbors[q]), (res.title, q)
