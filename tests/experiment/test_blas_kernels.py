"""``seffi run`` writes the same report.json whatever BLAS kernel the CPU gets.

OpenBLAS picks its kernels per CPU (``OPENBLAS_CORETYPE`` forces one): the kernels order the
additions of a product differently, so a report computed through BLAS differs in its last digits
from machine to machine, and the router trained on those digits drifts further. Each run here is
its own process with one forced kernel; the config is tiny, the code path the default run's.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

KERNELS = ("Haswell", "Sandybridge", "Prescott")
# Large enough that a learned router and bootstrap intervals come out of training.
TINY = ["--tasks", "sort_swaps", "--n-inputs", "6", "--budget", "6", "--eval-runs", "2", "--rounds", "12",
        "--bootstrap", "50", "--wandb", "disabled", "--no-progress"]  # fmt: skip


def _report(out, kernel: str) -> bytes:
    env = {**os.environ, "OPENBLAS_CORETYPE": kernel, "WANDB_MODE": "disabled", "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, "-m", "seffi.cli", "run", *TINY, "--out", str(out / kernel)],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return (out / kernel / "report.json").read_bytes()


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 OpenBLAS kernels")
def test_report_json_is_byte_identical_under_every_openblas_kernel(tmp_path):
    reports = {kernel: _report(tmp_path, kernel) for kernel in KERNELS}
    assert b'"learned"' in reports["Haswell"]
    assert {k: r == reports["Haswell"] for k, r in reports.items()} == dict.fromkeys(KERNELS, True)
