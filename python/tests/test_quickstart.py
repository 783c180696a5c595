"""examples/python/quickstart.py, README's Python quickstart, run as a user runs it.

CPU: it compiles the metric for four archs, then stops with exit status 1 and at most two lines
saying there is no GPU (and why).  GPU: it builds an index, searches, and prints a recall@10 of at
least 0.9 against NumPy's exact answer.  (test/tools/readme-quickstarts.py checks that README
shows this very file.)
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import gpu_status

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "python" / "quickstart.py"


def run_quickstart(tmp_path):
    import udf
    env = dict(os.environ)
    # the package under test, wherever pytest imported it from
    env["PYTHONPATH"] = os.pathsep.join([str(Path(udf.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, str(QUICKSTART)], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=900)


def test_quickstart_compiles_without_gpu(tmp_path, udf_tools):
    if gpu_status()[0]:
        pytest.skip("a GPU is present: the quickstart searches (test_quickstart_searches)")
    r = run_quickstart(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"^<udf\.Artifact 'weighted_l2' f32/f32 min .*archs=sm_80,sm_90,sm_100,sm_120", r.stdout,
                     re.M), r.stdout
    assert re.search(r"^no GPU here, so no search: .*driver", r.stderr, re.M), r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.gpu
def test_quickstart_searches(tmp_path, ext):
    r = run_quickstart(tmp_path)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^GPU: ", r.stdout, re.M), r.stdout
    recall = re.search(r"^recall@10: ([0-9.]+)$", r.stdout, re.M)
    assert recall and float(recall.group(1)) >= 0.9, r.stdout
