"""The pages' numbers and scripts/readme_numbers.py stay in step.

The full check (``python scripts/readme_numbers.py --check``) re-runs ``seffi run`` and the SB3
example, a few minutes; here are its cheap parts: every block on README.md and docs/*.md has a
producer and sits where the script looks, the blocks made in process or from committed results (the
lane table, the CLI reference, the BibTeX entry, the ladder page, the benchmark outputs) are exactly
what the script makes, and the slow commands' tables have the format the script writes.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rn():
    spec = importlib.util.spec_from_file_location("readme_numbers", ROOT / "scripts" / "readme_numbers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_numbers"] = module  # dataclasses and readme_ladder look it up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def text(rn) -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in rn.pages()}


def body(rn, text: dict[Path, str], name: str) -> str:
    (found,) = [rn.read_block(t, name) for t in text.values() if name in rn.block_names(t)]
    return found


def test_every_block_has_a_producer_and_sits_in_one_page(rn, text: dict[Path, str]) -> None:
    on_pages = [name for t in text.values() for name in rn.block_names(t)]
    assert sorted(on_pages) == sorted(set(on_pages)), "a block name appears twice"
    assert set(on_pages) == rn.expected_blocks()
    assert not rn.unproduced(text)
    assert re.search(rn.SEFFI_RUN_TIME, text[ROOT / "docs" / "performance.md"])
    assert re.search(rn.SB3_TIME, text[ROOT / "docs" / "integrations.md"])
    with pytest.raises(KeyError):
        rn.read_block(text[rn.README], "no-such-block")


def test_lane_table_is_what_the_lane_measures(rn, text, tmp_path: Path) -> None:
    """The lane table == seffi lane on both splits (holdout first hit 1.125)."""
    produced = rn.produce_lane(rn.Context(tmp_path, text)).blocks["lane"]
    assert body(rn, text, "lane") == produced
    assert "| holdout | 8 | 1.125 |" in produced


def test_cli_reference_is_every_commands_help(rn, text, tmp_path: Path) -> None:
    """docs/cli.md holds the --help of seffi and of every subcommand, as they print it now.

    The reference is written with every extra installed (``seffi bench``'s choices come from the
    ``lm`` and ``trl`` extras), so this comparison needs them too.
    """
    from tests.helpers import require

    require("transformers", "lm")
    require("trl", "trl")
    produced = rn.produce_cli(rn.Context(tmp_path, text)).blocks["cli"]
    assert body(rn, text, "cli") == produced
    for command in ("seffi run", "seffi compare", "seffi ladder", "seffi lane sample-efficiency"):
        assert f"### `{command}`" in produced
    assert all(len(line) <= rn.HELP_COLUMNS for line in produced.splitlines() if not line.startswith("#"))
    table = text[ROOT / "docs" / "cli.md"].split("<!-- readme-numbers:cli -->")[0]
    leaves = [c for c in re.findall(r"### `(seffi[\w -]*)`", produced)
              if not any(o.startswith(c + " ") for o in re.findall(r"### `(seffi[\w -]*)`", produced))]
    for command in leaves:  # every command without subcommands has a row in the page's own table
        if command != "seffi":
            assert f"| `{command}" in table, command


def test_bibtex_is_citation_cff(rn, text, tmp_path: Path) -> None:
    produced = rn.produce_citation(rn.Context(tmp_path, text)).blocks["citation"]
    assert body(rn, text, "citation") == produced
    assert "version = {0.1.0}" in produced


def test_ladder_page_is_its_committed_results(rn, text, tmp_path: Path) -> None:
    """Every ladder table, caption and finding equals what the committed results give."""
    result = rn.produce_ladder(rn.Context(tmp_path, text))
    for name, expected in result.blocks.items():
        assert body(rn, text, name) == expected, name
    for path, digest in result.digests:
        assert rn._sha256(path) == digest


def test_benchmark_outputs_are_the_committed_files(rn, text, tmp_path: Path) -> None:
    result = rn.produce_benchmarks(rn.Context(tmp_path, text))
    assert not result.problems
    for name, expected in result.blocks.items():
        assert body(rn, text, name) == expected, name
        assert name == "bench-cost" or expected.startswith("```text\n$ python benchmarks/")


def test_readme_cost_numbers_each_come_from_a_committed_benchmark_output(rn, text, tmp_path: Path) -> None:
    """Every number of the README's cost block appears in peers.py's or scale.py's committed output."""
    block = rn.produce_benchmarks(rn.Context(tmp_path, text)).blocks["bench-cost"]
    outputs = "".join(
        (rn.RESULTS / "benchmarks" / f"{n}.txt").read_text(encoding="utf-8")
        for n in ("peers", "scale", "scale-monitor")
    )
    numbers = set(re.findall(r"\d+\.\d+x?", block))
    assert len(numbers) >= 12  # five consumers x two columns, and the scale sentence
    assert all(n in outputs for n in numbers), sorted(n for n in numbers if n not in outputs)


def test_seffi_run_table_has_the_scripts_format(rn, text) -> None:
    """Every row of the seffi-run block is one the script writes (3 decimals, CIs, minus)."""
    n = r"−?\d\.\d{3}"
    policy = re.compile(
        rf"^\| \w+ \| (learned|iid-sampler) \| {n} \[{n}, {n}\] \| {n} \[{n}, {n}\] \| "
        rf"(\d+|> 8 \(censored\)) \| {n} \| {n} \|$"
    )
    t = r"(\d+|> 8 \(censored\))"
    base = re.compile(rf"^\| \w+ \| iid / oracle \| {n} / {n} \| \| {t} / \d+ \| {n} / {n} \| \|$")
    rows = body(rn, text, "seffi-run").splitlines()[2:]
    assert len(rows) == 9
    for row in rows:
        assert policy.match(row) or base.match(row), row
    assert "-" not in "".join(rows).replace("iid-sampler", "")  # negatives use the typographic minus
    assert rn.num(-0.1274) == "−0.127" and rn.num(-0.0001) == "0.000" and rn.num(None) == ""


def test_coverage_caption_quotes_the_tables_sort_swaps_row(rn, text) -> None:
    """The figure's caption and the table come from one run: the same AUCs, the gain rounded."""
    caption = body(rn, text, "coverage-figure")
    (row,) = [r for r in body(rn, text, "seffi-run").splitlines() if r.startswith("| sort_swaps | learned |")]
    auc, gain = re.findall(r"(−?\d\.\d{3}) \[", row)[:2]
    lo, hi = re.findall(r"\[(−?\d\.\d{3}), (−?\d\.\d{3})\]", row)[1]
    two = [f"{float(v.replace('−', '-')):.2f}".replace("-", "−") for v in (gain, lo, hi)]
    assert f"learned AUC {auc}, gain {two[0]} [{two[1]}, {two[2]}]" in caption


def test_sb3_sentence_has_the_scripts_format(rn, text) -> None:
    """The SB3 sentence quotes first and final gain with 3-decimal CIs and its time."""
    found = body(rn, text, "sb3-eval")
    n = r"−?\d\.\d{3}"
    assert re.search(rf"{n} \[{n}, {n}\] after \d+k steps, {n} \[{n}, {n}\] at the end\.", found), found
    assert rn.within(30.0, 28.0) and not rn.within(60.0, 28.0)  # the stated time tolerance (x2)


def test_same_image_sees_one_changed_pixel(rn, tmp_path: Path) -> None:
    import matplotlib.image as mpimg

    pixels = np.zeros((4, 5, 3))
    mpimg.imsave(tmp_path / "a.png", pixels)
    mpimg.imsave(tmp_path / "b.png", pixels)
    pixels[1, 2] = 1.0
    mpimg.imsave(tmp_path / "c.png", pixels)
    a, b, c = (tmp_path / f"{x}.png" for x in "abc")
    rn.ROOT = tmp_path  # messages name files relative to the repository
    try:
        assert rn.same_image(a, b) is None
        assert rn.same_image(a, c) == "a.png: 1 pixels differ from the regenerated figure"
    finally:
        rn.ROOT = ROOT


def test_a_drifted_block_is_reported_and_rewritten(rn, tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    text = {page: "x\n<!-- readme-numbers:lane -->\nold\n<!-- /readme-numbers:lane -->\n"}
    rn.ROOT = tmp_path
    try:
        problems = rn.apply(rn.Result({"lane": "new\n"}), text, write=False)
    finally:
        rn.ROOT = ROOT
    assert len(problems) == 1 and "-old" in problems[0] and "+new" in problems[0]
    assert rn.read_block(text[page], "lane") == "new\n"
