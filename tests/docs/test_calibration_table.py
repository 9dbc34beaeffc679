"""docs/statistics.md's calibration table is the committed output of benchmarks/calibration.py.

The page's block is rendered from docs/results/calibration.json; the file holds every row the
benchmark makes (a tiny run of it lists them), each case measured on at least 1,000 datasets,
and every row outside its target carries a reason that is not a blanket one.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def table():
    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    return importlib.import_module("calibration_table")


@pytest.fixture(scope="module")
def committed(table) -> dict:
    return json.loads(table.RESULT.read_text(encoding="utf-8"))


def test_the_page_shows_the_committed_file_and_every_row_meets_its_target_or_says_why(
    table, committed
) -> None:
    rn = importlib.import_module("readme_numbers")
    page = (ROOT / "docs" / "statistics.md").read_text(encoding="utf-8")
    assert rn.read_block(page, "calibration") == table.table(committed)
    assert table.problems(committed) == []
    assert all(c["datasets"] >= 1000 for c in committed["cases"])
    outside = [r for r in committed["rows"] if r["ok"] is False]
    assert outside and all(table.status(r, []).startswith("**outside** [") for r in outside)
    for r in committed["rows"]:  # ok means inside the band the row states
        if r["band"] is not None:
            assert r["ok"] == (r["band"][0] - 1e-12 <= r["value"] <= r["band"][1] + 1e-12)


def test_a_reason_names_its_rows_not_every_row(table) -> None:
    """Rows the intervals are designed for have no excuse: a miss there shows as unexplained."""
    reason = table.benchmark().reason
    for case in (
        "iid policy, 64 inputs x 4 runs",
        "harder mix, 16 inputs",
        "16 inputs: 4 runs stop at 4 + 4 full",
    ):
        for quantity in ("95% gain CI covers 0", "95% C(4) CI", "95% C(8) CI", "95% AUC@8 CI"):
            assert reason(case, quantity) is None
    assert reason("single-label Zipf(1.5) M=20, n=40", "95% CI covers C(20)") is None  # k = n/2
    assert reason("single-label Zipf(1.5) M=20, n=40", "95% CI covers N(40)") is not None  # k = n
    assert "below 8 inputs" in reason("iid policy, 4 inputs x 4 runs", "95% C(8) CI")


def test_the_committed_file_holds_every_row_the_benchmark_makes(table, committed, tmp_path: Path) -> None:
    """A tiny run (2 datasets per case) lists the benchmark's cases and rows; the committed file must
    hold the same ones, so a case added to the benchmark without re-running it fails here."""
    out = tmp_path / "tiny.json"
    subprocess.run(
        [sys.executable, str(table.BENCHMARK), "--datasets", "2", "--out", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    tiny = json.loads(out.read_text(encoding="utf-8"))

    def rows(data: dict) -> list[tuple[str, str]]:
        # a median row appears only when some dataset's median is finite
        return [(r["case"], r["quantity"]) for r in data["rows"] if "median (truth" not in r["quantity"]]

    assert [c["case"] for c in tiny["cases"]] == [c["case"] for c in committed["cases"]]
    assert sorted(set(rows(tiny))) == sorted(set(rows(committed)))
