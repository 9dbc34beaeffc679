"""The README's numbers and scripts/readme_numbers.py stay in step.

The full regeneration (``python scripts/readme_numbers.py --check``) re-runs ``seffi run`` and the SB3
example, which takes about a minute; here are its cheap parts: every block is where the script looks,
the lane table (0.1 s in process) is exactly what the runner measures, and the tables and sentences
the slow commands produce have the format the script writes.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rn():
    spec = importlib.util.spec_from_file_location("readme_numbers", ROOT / "scripts" / "readme_numbers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_numbers"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_block_and_time_is_where_the_script_looks(rn, readme: str) -> None:
    """One marked block per producer; the quoted wall times are found."""
    for name in rn.PRODUCERS:
        assert rn.read_block(readme, name).strip(), name
    assert re.search(rn.SEFFI_RUN_TIME, readme) and re.search(rn.SB3_TIME, readme)
    with pytest.raises(KeyError):
        rn.read_block(readme, "no-such-block")


def test_lane_table_is_what_the_lane_measures(rn, readme: str, tmp_path: Path) -> None:
    """README lane table == seffi lane on both splits (holdout first hit 1.125)."""
    produced = rn.produce_lane(tmp_path, readme).body
    assert rn.read_block(readme, "lane") == produced
    assert "| holdout | 8 | 1.125 |" in produced


def test_seffi_run_table_has_the_scripts_format(rn, readme: str) -> None:
    """Every row of the seffi-run block is one the script writes (3 decimals, CIs, minus)."""
    n = r"−?\d\.\d{3}"
    policy = re.compile(
        rf"^\| \w+ \| (learned|iid-sampler) \| {n} \[{n}, {n}\] \| {n} \[{n}, {n}\] \| "
        rf"(\d+|> 8 \(censored\)) \| {n} \| {n} \|$"
    )
    t = r"(\d+|> 8 \(censored\))"
    base = re.compile(rf"^\| \w+ \| iid / oracle \| {n} / {n} \| \| {t} / \d+ \| {n} / {n} \| \|$")
    rows = rn.read_block(readme, "seffi-run").splitlines()[2:]
    assert len(rows) == 9
    for row in rows:
        assert policy.match(row) or base.match(row), row
    assert "-" not in "".join(rows).replace("iid-sampler", "")  # negatives use the typographic minus
    assert rn.num(-0.1274) == "−0.127" and rn.num(-0.0001) == "0.000" and rn.num(None) == ""


def test_sb3_sentence_has_the_scripts_format(rn, readme: str) -> None:
    """The SB3 sentence quotes first and final gain with 3-decimal CIs and its time."""
    body = rn.read_block(readme, "sb3-eval")
    n = r"−?\d\.\d{3}"
    assert re.search(rf"{n} \[{n}, {n}\] after \d+k steps, {n} \[{n}, {n}\] at the end\.", body), body
    assert rn.within(30.0, 28.0) and not rn.within(60.0, 28.0)  # the stated time tolerance (x2)
