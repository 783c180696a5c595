"""bench/cuvs_compare.py's pieces that run without a GPU (its --selftest, with NumPy): the options,
the mixture, the exact top-k, recall, the list sizes by nearest centre and the vectors a query's
nearest lists hold, and the report rendered from a result document."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numpy", reason="numpy is not installed")

ROOT = Path(__file__).resolve().parents[2]


def test_selftest_passes():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "cuvs_compare.py"), "--selftest"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "cuvs_compare selftest: ok" in out.stdout


def test_report_of_a_run_without_the_scanned_rows():
    # A stored run without the scanned rows renders as before (older result files stay readable).
    stored = ROOT / "bench" / "results" / "issue49t_h200" / "cuvs_compare.json"
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "cuvs_compare.py"), "--report", str(stored)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "| 10m | build from CuPy | 2.41 s | 1.60 s | 1.50x |" in out.stdout
