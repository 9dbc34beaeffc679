"""The pages' numbers and scripts/readme_numbers.py stay in step.

The full check (``python scripts/readme_numbers.py --check``) re-runs ``seffi run`` and the SB3
example, a few minutes; here are its cheap parts: every block on README.md and docs/*.md has a
producer and sits where the script looks, the blocks made in process or from committed results (the
lane table, the CLI reference, the BibTeX entry, the ladder page, the benchmark outputs) are exactly
what the script makes, and the slow commands' tables have the format the script writes.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import require

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rn():
    # imported by name, as readme_results and readme_exploration import it
    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    return importlib.import_module("readme_numbers")


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
    assert re.search(rn.SB3_TIME, text[ROOT / "docs" / "performance.md"])
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
    leaves = [
        c
        for c in re.findall(r"### `(seffi[\w -]*)`", produced)
        if not any(o.startswith(c + " ") for o in re.findall(r"### `(seffi[\w -]*)`", produced))
    ]
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
    assert f"learned (the trained router) AUC {auc}, gain {two[0]} [{two[1]}, {two[2]}]" in caption
    assert "iid-sampler (the base model run through the env" in caption  # defined where first used


def test_sb3_sentence_has_the_scripts_format(rn, text) -> None:
    """The SB3 sentence quotes first and final gain with 3-decimal CIs (its time: the performance page)."""
    found = body(rn, text, "sb3-eval")
    n = r"−?\d\.\d{3}"
    assert re.search(rf"{n} \[{n}, {n}\] after \d+k steps, {n} \[{n}, {n}\] at the end\.", found), found
    assert " s," not in found and " s)" not in found


def test_check_ignores_wall_times_and_write_updates_them_with_the_load(rn, tmp_path: Path) -> None:
    """A loaded machine is slower, not drifted: ``--check`` passes; ``--write`` records time and load."""
    page = tmp_path / "performance.md"
    stated = (
        "The default `seffi run` (3 tasks) takes\n**5.6 s** of wall time on this machine (load average "
        "0.4 on 2 cores when it started), and\n`examples/sb3_ppo_router_eval.py` with default arguments "
        "**16 s** (load average 0.5), as timed.\n"
    )
    loaded = rn.Result({}, times=[(rn.SEFFI_RUN_TIME, 45.2, 7.9), (rn.SB3_TIME, 17.0, 7.9)])
    text = {page: stated}
    assert rn.apply(loaded, text, write=False) == [] and text[page] == stated
    assert rn.apply(loaded, text, write=True) == []
    assert "**45.2 s** of wall time on this machine (load average 7.9 on" in text[page]
    assert "**16 s** (load average 0.5)" in text[page]  # within a factor 2: kept as stated
    missing = rn.Result({}, times=[(rn.SEFFI_RUN_TIME, 5.0, 0.1)])
    assert rn.apply(missing, {page: "no time here"}, write=False) == [
        f"time not found on any page: /{rn.SEFFI_RUN_TIME}/"
    ]


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


def test_exploration_page_is_its_committed_results(rn, text, tmp_path: Path) -> None:
    """The bench page's tables, findings and wall times, and both figures, come from the committed benches."""
    result = rn.produce_exploration(rn.Context(tmp_path, text))
    import readme_exploration

    assert set(result.blocks) == readme_exploration.BLOCKS
    for name, expected in result.blocks.items():
        assert body(rn, text, name) == expected, name
    require("transformers", "lm")  # the figures are drawn by seffi.experiment, which needs the lm extra
    assert not result.problems
    assert len(result.figures) == 2
    for committed, fresh in result.figures:
        assert rn.same_image(committed, fresh) is None


def _bench(gains: dict[str, list[tuple[float, float, float, float]]]) -> dict:
    """A bench summary: per method, per seed 0-2 (pool gain, lo, hi, held-out valid@1); base valid@1 0.5."""
    held = {"heldout_gain": 0.0, "heldout_gain_lo": -0.1, "heldout_gain_hi": 0.1, "coverage_k": 0.5}
    rows = [
        {
            "method": m,
            "seed": s,
            "pool_gain": g,
            "pool_gain_lo": lo,
            "pool_gain_hi": hi,
            "valid_at_1": v,
            "pool_gain_classifier": None,
            **held,
        }
        for m, per_seed in gains.items()
        for s, (g, lo, hi, v) in enumerate(per_seed)
    ]
    return {
        "config": {"seeds": [0, 1, 2], "methods": list(gains), "budget": 8, "grpo": {"eval_samples": 64}},
        "base": [{"seed": s, "valid_at_1": 0.5, "coverage_k": 0.5} for s in range(3)],
        "rows": rows,
    }


def test_exploration_target_needs_two_seeds_above_0_at_the_bases_valid_rate(rn) -> None:
    """A method meets the target on >= 2 of 3 seeds with its pool CI above 0 and valid@1 >= the base's."""
    import readme_exploration as x

    summary = _bench(
        {
            "diversity": [(0.2, 0.1, 0.3, 0.6), (0.1, -0.1, 0.3, 0.6), (0.2, 0.05, 0.35, 0.5)],
            "validity": [(0.2, 0.1, 0.3, 0.4), (0.3, 0.2, 0.4, 0.9), (-0.2, -0.3, -0.1, 0.9)],
        }
    )
    b = x.Bench(summary)
    assert [x.meets(r, b.base[r["seed"]]) for r in b.rows("diversity")] == [True, False, True]
    # validity's seed 0 has its CI above 0 but valid@1 0.4 < 0.5: one seed only
    assert [x.meets(r, b.base[r["seed"]]) for r in b.rows("validity")] == [False, True, False]
    target, single = x.target_finding(b)
    assert "met by **seffi diversity** on seeds 0 and 2: +0.200 [+0.100, +0.300] at valid@1 0.600" in target
    assert "on seed 1 +0.100 [\u22120.100, +0.300]" in target
    assert single == (
        "**Clearing the bar on fewer seeds**: validity on seed 1 (+0.300 [+0.200, +0.400] at valid@1 0.900)."
    )


def test_exploration_number_formats(rn) -> None:
    import readme_exploration as x

    assert x.signed(0.1554) == "+0.155" and x.signed(-0.9049) == "\u22120.905"
    assert x.signed(-0.0001) == "0.000" and x.interval(0.1, None, 0.2) == "+0.100"
    assert x.side(0.01, 0.2) == "above 0" and x.side(-0.2, -0.01) == "below 0"
    assert x.side(-0.1, 0.1) == "contains 0"
    assert x.seeds_text([1]) == "seed 1" and x.seeds_text([0, 1, 2]) == "seeds 0, 1 and 2"
    assert x.span([0.2, 0.9, 0.5]) == "0.200-0.900" and x.span([0.5, 0.5]) == "0.500"


def test_no_result_is_written_by_hand_outside_a_block(rn, text) -> None:
    """Measured-looking numbers on the pages sit in generated blocks; one written into prose is found."""
    assert rn.stray_numbers(text, rn.delegated_pages()) == []
    page = rn.DOCS / "page.md"
    found = rn.stray_numbers({page: "gain +0.155 [0.016, 0.295], `0.123`, 0.001\n```\n0.444\n```\nT = 1.3\n"})
    assert found == ["docs/page.md:1: +0.155, 0.016, 0.295 outside a generated block"]
