"""``seffi bench exploration``: the smoke end to end, and its assembly against hand-computed inputs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.experiment._smoke import isolated_run
from tests.helpers import require

# ruff: noqa: E402
require("torch", "lm")
require("transformers", "lm")
require("trl", "trl")

import torch

from seffi.cli import main
from seffi.experiment.bench_methods import METHOD_SLUGS
from seffi.experiment.bench_report import (
    checkpoint_points,
    combine_summaries,
    correlations,
    method_row,
    method_summary,
    most_disagreeing,
)
from seffi.experiment.bench_sampling import Sampler, group_surface, ordered_eval
from seffi.models.passk import EvalResult, evaluate_samples
from seffi.models.surface import SURFACE_KEYS, surface_metrics

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("bench")
    with isolated_run(root, OMP_NUM_THREADS="1"):
        code = main(["bench", "exploration", "--smoke", "--out", str(root / "run"), "--no-progress"])
    return root / "run", code


def _summary(out: Path) -> dict:
    return json.loads((out / "bench.json").read_text())


def test_smoke_runs_every_method_and_writes_every_output(smoke: tuple[Path, int]) -> None:
    """`seffi bench exploration --smoke` trains tiny models, runs every method and writes every output."""
    out, code = smoke
    assert code == 0
    for name in ("bench.json", "bench.md", "bench.png"):
        assert (out / name).stat().st_size > 500, name
    s = _summary(out)
    assert [r["method"] for r in s["rows"]] == list(METHOD_SLUGS)
    assert all((out / "records" / "seed-0" / f"{m}.json").is_file() for m in METHOD_SLUGS)
    assert list(out.parent.glob("wandb/offline-run-*")), "no offline W&B run"
    md = (out / "bench.md").read_text()
    assert "these numbers are not results" in md and s["smoke"] is True
    assert "## Surface metrics vs strategy coverage" in md and "## Second labeler" in md
    # Every GRPO method was trained for the configured steps and evaluated at its last one.
    for m in METHOD_SLUGS:
        rec = json.loads((out / "records" / "seed-0" / f"{m}.json").read_text())
        assert rec["history"][-1]["step"] == s["config"]["grpo"]["steps"]


def test_smoke_wandb_run_holds_one_line_series_per_method(smoke: tuple[Path, int]) -> None:
    """The offline W&B run, read back with the W&B CLI: one C(k) line-series table per method and each
    method's mean pool gain as in bench.json."""
    import subprocess
    import sys

    out, _ = smoke
    (run_dir,) = out.parent.glob("wandb/offline-run-*")
    read = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", str(run_dir), "--summary", "--json"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    summary = json.loads(read.stdout)["summary"]
    tables = sorted(k.split("/")[2] for k in summary if k.endswith("/coverage_curve_table"))
    assert tables == sorted(METHOD_SLUGS)
    means = [m for m in _summary(out)["methods"] if m["pool_gain_mean"] is not None]
    assert means
    for m in means:
        assert summary[f"seffi/bench/{m['method']}/pool_gain_mean"] == pytest.approx(m["pool_gain_mean"])


def test_smoke_lr0_policy_is_the_base_within_its_ci(smoke: tuple[Path, int]) -> None:
    """lr = 0 leaves the base LM unchanged: its final held-out samples are the base's own samples at the
    same seed (drawn here again from the cached base), and its pool gain CI contains 0."""
    from seffi._seeding import seed_of
    from seffi.callbacks import trl_model
    from seffi.experiment.bench import BenchConfig
    from seffi.experiment.bench_methods import bench_methods, grpo_args
    from seffi.models import grpo
    from seffi.models.cache import cached_base_folder

    out, _ = smoke
    s = _summary(out)
    lr0 = next(r for r in s["rows"] if r["method"] == "lr0")
    assert lr0["pool_gain_lo"] <= 0.0 <= lr0["pool_gain_hi"]
    rec = json.loads((out / "records" / "seed-0" / "lr0.json").read_text())
    cfg = BenchConfig(**{**s["config"], "cache_dir": out.parent / "cache"})
    lm_cfg = cfg.ladder(0).lm_config()
    policy = grpo.trl_policy(cached_base_folder(lm_cfg, cfg.cache_dir, retrain=False), _task(lm_cfg))
    method = next(m for m in bench_methods(cfg) if m.slug == "lr0")
    args = grpo_args(cfg.grpo, cfg, out, method, policy.max_new_tokens, policy.suppress, 0)
    gen = trl_model.generation_config(args, policy.model, policy.tokenizer)
    step = s["config"]["grpo"]["steps"]
    prompts = [f"{_task(lm_cfg).prompt(x)} <sep>" for x in _held_out(s, lm_cfg)]
    again = Sampler(policy).texts(
        policy.model, policy.tokenizer, prompts, s["config"]["grpo"]["eval_samples"], gen,
        seed=seed_of(s["seeds"]["0"]["measurement_seed"], 10, step),
    )  # fmt: skip
    assert again == rec["held_out"]["texts"]


def _task(lm_cfg):
    from seffi.models.cache import build_task

    return build_task(lm_cfg)


def _held_out(s: dict, lm_cfg) -> list:
    task = _task(lm_cfg)
    rec_ids = s["seeds"]["0"]["held_out_ids"]
    from seffi.experiment.bench import BenchConfig, prompt_sets

    _, held, _ = prompt_sets(BenchConfig(**s["config"]), task)
    assert [x.id for x in held] == rec_ids
    return held


def test_table_cells_are_hand_counts_of_the_saved_records(smoke: tuple[Path, int]) -> None:
    """Pool valid, held-out valid@1 and C(n) of a row recounted by hand from records/seed-0/<method>.json."""
    out, _ = smoke
    s = _summary(out)
    m = len(s["strategies"])
    for method in ("validity", "mixture_distinct"):
        row = next(r for r in s["rows"] if r["method"] == method)
        rec = json.loads((out / "records" / "seed-0" / f"{method}.json").read_text())
        flags = [v for run in rec["pool"]["validator"]["valid"] for v in run]
        assert row["pool_valid"] == pytest.approx(sum(flags) / len(flags))
        held = rec["held_out"]
        valid = [v for i in held["input_ids"] for v in held["valid"][i]]
        assert row["valid_at_1"] == pytest.approx(sum(valid) / len(valid))
        union = [len({st for ms in held["matches"][i] for st in ms}) / m for i in held["input_ids"]]
        assert row["coverage_n"] == pytest.approx(np.mean(union))


def test_mixture_completions_start_with_the_router_code_and_train_without_it(
    smoke: tuple[Path, int],
) -> None:
    """The distinct-code rollout forces code order[i] on the i-th completion of each group and masks it."""
    from seffi.experiment.bench import BenchConfig
    from seffi.models import grpo
    from seffi.models.cache import train_ladder_models
    from seffi.models.lm import Layout

    out, _ = smoke
    s = _summary(out)
    cfg = BenchConfig(**{**s["config"], "cache_dir": out.parent / "cache"})
    models = train_ladder_models(cfg.ladder(0).lm_config(), cfg.cache_dir, retrain=False)
    policy = grpo.trl_policy(models.mixture_dir, models.task)
    code0 = Layout(models.task.vocabulary()).code0
    prompts = ["grid 3 3 walls <sep>", "grid 4 3 walls 1 1 <sep>"]
    priors = {prompts[0]: np.array([0.1, 0.5, 0.4]), prompts[1]: np.array([0.7, 0.1, 0.2])}
    sampler = Sampler(policy, "distinct", priors, code0=code0, budget=2)
    args = SimpleNamespace(max_completion_length=policy.max_new_tokens + 1,
                           generation_kwargs={"suppress_tokens": policy.suppress})  # fmt: skip
    trainer = SimpleNamespace(
        num_generations=2, processing_class=policy.tokenizer, args=args, model=policy.model
    )
    batch = [prompts[0], prompts[0], prompts[1], prompts[1]]
    got = sampler.rollout_func(seed=3)(batch, trainer)
    assert [c[0] - code0 for c in got["completion_ids"]] == [1, 2, 0, 2]  # each prompt's prior order
    assert all(m[0] == 0 and all(v == 1 for v in m[1:]) for m in got["env_mask"])
    assert [len(m) for m in got["env_mask"]] == [len(c) for c in got["completion_ids"]]
    assert got["logprobs"] is None and len(got["prompt_ids"]) == 4
    assert "<unk>" not in sampler.decode(got["completion_ids"][0])


def test_combine_rewrites_a_bench_from_its_json(smoke: tuple[Path, int], tmp_path: Path) -> None:
    """`--combine DIR` rebuilds the table from bench.json alone (no model, no training); a repeated seed
    is one error line, exit 2."""
    out, _ = smoke
    again = tmp_path / "again"
    assert (
        main(["bench", "exploration", "--combine", str(out), "--out", str(again), "--wandb", "disabled"]) == 0
    )
    a, b = _summary(out), _summary(again)
    assert (
        a["rows"] == b["rows"] and a["correlations"] == b["correlations"] and b["combined_from"] == [str(out)]
    )
    assert (again / "bench.png").stat().st_size > 500 and "| GRPO lr = 0 (sanity) | 0 |" in (
        again / "bench.md"
    ).read_text()
    dup = [
        "bench",
        "exploration",
        "--combine",
        str(out),
        str(out),
        "--out",
        str(tmp_path / "dup"),
        "--wandb",
        "disabled",
    ]
    assert main(dup) == 2


def test_bench_flags_all_have_help_and_bad_methods_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """Every option of `seffi bench exploration` has help text; an unknown method is one line, exit 2."""
    import argparse

    from seffi.cli.bench import add_exploration_arguments

    p = argparse.ArgumentParser()
    add_exploration_arguments(p)
    for action in p._actions:
        if action.dest != "help":
            assert action.help, action.dest
    assert main(["bench", "exploration", "--budget", "1", "--wandb", "disabled"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "budget" in err[0]
    with pytest.raises(SystemExit):
        main(["bench", "exploration", "--methods", "nope"])


# -- assembly against hand-computed inputs ---------------------------------------------------------------


def _result(valid_at_k, coverage, solvable=1.0, sets=True) -> EvalResult:
    n = len(coverage)
    return EvalResult(
        n=n, valid_at_k=np.array(valid_at_k, dtype=float), coverage=np.array(coverage, dtype=float),
        valid_rate=valid_at_k[0], solvable=solvable, per_prompt_coverage=np.array([coverage], dtype=float),
        prompt_ids=["a"], sample_sets=np.zeros((1, n, 2), dtype=bool) if sets else None,
    )  # fmt: skip


def test_method_row_reads_gains_curves_and_the_target() -> None:
    """A row's cells come from the pool gains, the last evaluation and its scalars; the target needs both
    the pool CI above 0 and held-out valid@1 at least the base's."""
    final = _result([0.9, 0.95, 1.0, 1.0], [0.25, 0.5, 0.6, 0.7], solvable=0.75)
    pool = {"validator": {"value": 0.3, "lo": 0.1, "hi": 0.5, "valid_rate": 0.8, "fragile": False},
            "classifier": {"value": -0.1, "lo": -0.4, "hi": 0.2, "fragile": True}}  # fmt: skip
    sc = {"seffi/eval/gain_vs_base": 0.2, "seffi/eval/gain_vs_base_lo": -0.1,
          "seffi/eval/gain_vs_base_hi": 0.4, "seffi/eval/gain_vs_base_fragile": 1.0,
          "seffi/eval/crossover_found": 1.0, "seffi/eval/crossover_k": 3.0}  # fmt: skip
    surf = {k: 0.5 for k in SURFACE_KEYS}
    row = method_row("m", "M", 1, 2, pool, final, sc, surf, base_valid_at_1=0.9, seconds=12.0)
    assert (row["pool_gain"], row["pool_gain_lo"], row["pool_gain_classifier_hi"]) == (0.3, 0.1, 0.2)
    assert (row["valid_at_1"], row["coverage_k"], row["coverage_n"], row["solvable"]) == (0.9, 0.5, 0.7, 0.75)
    assert (row["crossover_k"], row["pool_valid"]) == (3, 0.8)
    flags = (row["pool_gain_fragile"], row["pool_gain_classifier_fragile"], row["heldout_gain_fragile"])
    assert flags == (False, True, True)
    assert row["meets_target"] and row["pool_ci_above_0"] and not row["pool_ci_contains_0"]
    lower = method_row("m", "M", 1, 2, pool, final, sc, surf, base_valid_at_1=0.91, seconds=1.0)
    assert not lower["meets_target"]  # valid@1 0.90 < the base's 0.91
    sc["seffi/eval/crossover_found"] = 0.0
    none = method_row("m", "M", 1, 2, pool, _result([0.9, 1], [0.3, 0.6], sets=False), sc, surf, 0.5, 1.0)
    assert none["crossover_k"] is None


def test_method_summary_means_sds_and_target_seeds() -> None:
    """Mean and sample sd over seeds, and which seeds meet the target / have a CI containing 0."""
    rows = [
        {"method": "a", "label": "A", "seed": s, "pool_gain": g, "pool_gain_classifier": None,
         "pool_valid": 0.9,
         "valid_at_1": 0.9, "coverage_k": 0.5, "coverage_n": 0.6, "heldout_gain": 0.0, "seconds": 10.0,
         "meets_target": t, "pool_ci_contains_0": c}
        for s, g, t, c in ((0, 0.1, True, False), (1, 0.3, False, True), (2, 0.5, True, False))
    ]  # fmt: skip
    (m,) = method_summary(rows)
    assert m["pool_gain_mean"] == pytest.approx(0.3) and m["pool_gain_sd"] == pytest.approx(0.2)
    assert m["pool_gain_classifier_mean"] is None
    assert m["target_seeds"] == [0, 2] and m["pool_ci_contains_0_seeds"] == [1] and m["seeds"] == [0, 1, 2]


def test_correlations_rank_surface_against_coverage_and_gain() -> None:
    """rho = +1 for a surface metric ordered like C(K), -1 for one ordered against it; winners per seed."""
    base = _result([0.5, 0.6], [0.2, 0.3])
    hist = {m: [(10, _result([0.5, 0.6], [c, c]), {"seffi/eval/gain_vs_base": g})]
            for m, c, g in (("x", 0.4, 0.1), ("y", 0.6, 0.3), ("z", 0.8, 0.5))}  # fmt: skip
    surf = {m: {10: {k: (v if k != "edit_distance" else 1 - v) for k in SURFACE_KEYS}}
            for m, v in (("x", 0.1), ("y", 0.2), ("z", 0.3))}  # fmt: skip
    base_surf = {k: (0.0 if k != "edit_distance" else 1.0) for k in SURFACE_KEYS}
    points = checkpoint_points(0, 2, base, base_surf, hist, surf)
    assert [p["method"] for p in points] == ["base", "x", "y", "z"]
    assert [p["coverage_k"] for p in points] == [0.3, 0.4, 0.6, 0.8] and points[0]["heldout_gain"] == 0.0
    rows = [{"method": m, "seed": 0, "pool_gain": g, **{k: v for k in SURFACE_KEYS}}
            for m, g, v in (("x", 0.5, 0.1), ("y", 0.1, 0.2), ("z", 0.3, 0.3))]  # fmt: skip
    c = correlations(points, rows)
    assert c["checkpoints"]["distinct_2"]["coverage_k"] == {"rho": pytest.approx(1.0), "n": 4}
    assert c["checkpoints"]["edit_distance"]["heldout_gain"]["rho"] == pytest.approx(-1.0)
    # final: surface ranks x, y, z = 3, 2, 1 by value; pool gain ranks = 1, 3, 2 -> rho = -0.5
    assert c["final_pool_gain"]["distinct_1"]["rho"] == pytest.approx(-0.5)
    assert c["winners"]["0"]["pool_gain"] == "x" and c["winners"]["0"]["distinct_1"] == "z"
    # x: rank 3 by the metric, 1 by gain (|diff| 2); y: 2 vs 3; z: 1 vs 2
    assert most_disagreeing(rows, "distinct_1") == {
        "method": "x",
        "surface_rank": 3.0,
        "gain_rank": 1.0,
        "of": 3,
    }


def test_ordered_eval_is_the_first_k_of_runs_over_every_cyclic_order() -> None:
    """Hand example and a brute-force loop over the cyclic orders of the runs."""
    sets = {"p": [frozenset({"a"}), frozenset({"a"}), frozenset({"b"}), frozenset()]}
    valid = {"p": [False, True, True, False]}
    r = ordered_eval(sets, valid, ["a", "b"], run=2)
    # runs A = ({a}, {a}), B = ({b}, {}): k = 1, 2 cover one of 2 strategies; k >= 3 both.
    np.testing.assert_allclose(r.coverage, [0.5, 0.5, 1.0, 1.0])
    # valid: A = (F, T), B = (T, F): k = 1 -> (0 + 1) / 2; k >= 2 -> 1.
    np.testing.assert_allclose(r.valid_at_k, [0.5, 1.0, 1.0, 1.0])
    assert r.sample_sets is None and r.solvable == 1.0 and r.valid_rate == 0.5
    rng = np.random.default_rng(0)
    strategies = ["a", "b", "c"]
    sets = {
        f"p{i}": [frozenset(s for s in strategies if rng.random() < 0.3) for _ in range(6)] for i in range(4)
    }
    valid = {p: [bool(rng.random() < 0.5) for _ in range(6)] for p in sets}
    got = ordered_eval(sets, valid, strategies, run=2)
    for row, p in enumerate(sorted(sets)):
        runs = [list(range(2 * j, 2 * j + 2)) for j in range(3)]
        cov, val = np.zeros(6), np.zeros(6)
        for t in range(3):
            order = [i for j in range(3) for i in runs[(t + j) % 3]]
            for k in range(1, 7):
                cov[k - 1] += len(set().union(*[sets[p][i] for i in order[:k]])) / 3 / 3
                val[k - 1] += any(valid[p][i] for i in order[:k]) / 3
        np.testing.assert_allclose(got.per_prompt_coverage[row], cov)
        np.testing.assert_allclose(got.per_prompt_valid_at_k[row], val)


def test_ordered_eval_matches_rarefaction_in_expectation_for_iid_runs() -> None:
    """For iid samples the cyclic-order estimator and the rarefaction estimator agree on average."""
    rng = np.random.default_rng(1)
    probs = {"a": 0.6, "b": 0.3, "c": 0.1}
    diffs = []
    for _ in range(200):
        sets = {"p": [frozenset([rng.choice(list(probs), p=list(probs.values()))]) for _ in range(8)]}
        valid = {"p": [True] * 8}
        diffs.append(ordered_eval(sets, valid, list(probs), run=4).coverage - evaluate_samples(
            sets, valid, list(probs)).coverage)  # fmt: skip
    d = np.array(diffs)
    assert np.all(np.abs(d.mean(axis=0)) < 4 * d.std(axis=0) / np.sqrt(len(d)) + 1e-12)


def test_distinct_codes_follow_prior_order_and_restart_every_k() -> None:
    """The i-th sample of each run of K takes the i-th most likely code (cycling at L); iid codes follow
    the prior."""
    policy = SimpleNamespace(decode=lambda ids: " ".join(map(str, ids)))
    prior = np.array([0.2, 0.5, 0.3])
    s = Sampler(policy, "distinct", {"p": prior}, code0=10, budget=4)
    assert s.pick("p", range(8), np.random.default_rng(0)) == [1, 2, 0, 1, 1, 2, 0, 1]
    iid = Sampler(policy, "iid", {"p": prior}, code0=10, budget=4)
    codes = iid.pick("p", range(20000), np.random.default_rng(0))
    np.testing.assert_allclose(np.bincount(codes, minlength=3) / 20000, prior, atol=0.015)
    assert s.decode([11, 3, 4]) == "3 4" and Sampler(policy).decode([11, 3]) == "11 3"


def test_group_surface_is_the_mean_over_groups_of_k() -> None:
    """Each prompt's samples are cut into groups of K; the metrics are averaged over all groups."""
    texts = [["a b", "a b", "c d", "a c"], ["x y z", "x y z", "x y z", "y"]]
    got = group_surface(texts, 2)
    groups = [["a b", "a b"], ["c d", "a c"], ["x y z", "x y z"], ["x y z", "y"]]
    for k in SURFACE_KEYS:
        assert got[k] == pytest.approx(np.mean([surface_metrics(g)[k] for g in groups]))


def test_combined_benches_pool_rows_and_recompute_the_summary() -> None:
    """Two one-seed benches of the same settings give one table; other settings or a repeated seed are
    refused with one message."""
    from seffi.errors import SeffiError

    def bench(seed: int, gain: float, lr: float = 3e-4) -> dict:
        row = {"method": "a", "label": "A", "seed": seed, "pool_gain": gain, "pool_gain_classifier": None,
               "pool_valid": 0.9, "valid_at_1": 0.9, "coverage_k": 0.5 + gain, "coverage_n": 0.6,
               "heldout_gain": gain, "seconds": 1.0, "meets_target": gain > 0, "pool_ci_contains_0": False,
               **{k: 0.1 + gain for k in SURFACE_KEYS}}  # fmt: skip
        point = {"seed": seed, "method": "a", "step": 2, "coverage_k": 0.5 + gain, "heldout_gain": gain,
                 **{k: 0.1 + gain for k in SURFACE_KEYS}}  # fmt: skip
        return {"format": "seffi.bench.exploration/1", "command": f"seffi bench exploration --seeds {seed}",
                "config": {"seeds": [seed], "grpo": {"lr": lr}}, "rows": [row], "base": [{"seed": seed}],
                "points": [point], "seeds": {str(seed): {}}, "seconds": 10.0, "smoke": False}  # fmt: skip

    both = combine_summaries([bench(1, 0.2), bench(0, -0.2)])
    assert both["config"]["seeds"] == [0, 1] and [r["seed"] for r in both["rows"]] == [0, 1]
    (m,) = both["methods"]
    assert m["pool_gain_mean"] == pytest.approx(0.0) and m["target_seeds"] == [1]
    assert both["correlations"]["checkpoints"]["distinct_2"]["coverage_k"] == {
        "rho": pytest.approx(1.0),
        "n": 2,
    }
    assert both["seconds"] == 20.0 and len(both["command"]) == 2
    with pytest.raises(SeffiError, match="differ in"):
        combine_summaries([bench(0, 0.1), bench(1, 0.1, lr=1e-3)])
    with pytest.raises(SeffiError, match="more than one"):
        combine_summaries([bench(0, 0.1), bench(0, 0.1)])
