"""``seffi ladder`` (rungs 1-3) end to end on the ``--smoke`` config."""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from tests.experiment._smoke import isolated_run
from tests.helpers import require

# The imports below need the lm extra: require() skips (or, in CI, fails) first.
# ruff: noqa: E402
require("torch", "lm")
require("transformers", "lm")

from seffi.cli import main
from seffi.experiment.ladder import LadderConfig, round_robin_act, smoke_config

#: What the smoke run printed and warned (filled by the ``smoke_run`` fixture).
SMOKE_OUTPUT: dict[str, object] = {}


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("ladder")
    stdout = io.StringIO()
    with isolated_run(root):
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(stdout):
            warnings.simplefilter("always")
            code = main(["ladder", "--smoke", "--out", str(root / "run"), "--no-progress"])
    said = [f"{w.category.__name__}: {w.message}" for w in caught]
    SMOKE_OUTPUT.update(stdout=stdout.getvalue(), warnings=said)
    return root / "run", code


def test_smoke_runs_three_rungs_and_writes_the_run_folder(smoke_run: tuple[Path, int]) -> None:
    """`seffi ladder --smoke` (rungs 1-3) exits 0 and writes its reports, plots and offline W&B run."""
    out, code = smoke_run
    assert code == 0
    for name in ("report.json", "report.md", "ladder.json", "timings.json", "routers.json", "rung3.json"):
        assert (out / name).is_file(), name
    plots = ("ladder_coverage", "ladder_latent_vs_strategy", "ladder_purity", "ladder_valid_at_k")
    plots += ("ladder_passk",)
    for plot in plots:
        assert (out / f"{plot}.png").stat().st_size > 1000, plot
    assert list(out.parent.glob("wandb/offline-run-*")), "no offline W&B run"


def test_smoke_says_its_numbers_are_not_results_and_raises_no_deprecation_warning(
    smoke_run: tuple[Path, int],
) -> None:
    """The smoke run's last line, report.md's title and report.json's meta say it is a check; no Future-
    or DeprecationWarning reaches the user."""
    from seffi.experiment.ladder_report import SMOKE_NOTE
    from seffi.report.files import load_report

    out, code = smoke_run
    assert code == 0
    assert (out / "report.md").read_text().splitlines()[0].endswith("on grid_routes (--smoke)")
    meta = load_report(out).meta
    assert meta["smoke"] is True and meta["note"] == SMOKE_NOTE
    assert (
        str(SMOKE_OUTPUT["stdout"])
        .rstrip()
        .splitlines()[-1]
        .endswith("its numbers are not results (run without --smoke for them)")
    )
    kinds = ("FutureWarning", "DeprecationWarning")
    deprecations = [w for w in SMOKE_OUTPUT["warnings"] if w.startswith(kinds)]
    assert not deprecations, deprecations


def test_report_has_both_rungs_tagged_with_the_same_pool(smoke_run: tuple[Path, int]) -> None:
    """report.json in `seffi run`'s schema, comparisons tagged rung and iid_source."""
    from seffi.report.files import load_report

    out, _ = smoke_run
    report = load_report(out)
    one, two, _ = report.comparisons
    assert (one.rung, one.iid_source, one.env_id) == (1, "exact", "seffi/GridRoutesRouter-v0")
    assert (two.rung, two.iid_source, two.env_id) == (2, "samples", "seffi/GridRoutesLatentLM-v0")
    labels = ["trained router", "untrained router", "round-robin latents"]
    for comp in (one, two):
        assert [p.curves.label for p in comp.policies] == labels
        assert comp.budget == 4 and comp.n_inputs == 4 and comp.oracle is not None and comp.iid is not None
        assert all(p.gain is not None for p in comp.policies)
        assert all(p.latent is not None and p.latent.num_codes == 8 for p in comp.policies)
    # The same pool on both rungs: the barcodes list the same input ids.
    assert one.policies[0].barcode.input_ids == two.policies[0].barcode.input_ids
    m = json.loads((out / "ladder.json").read_text())
    assert m["n_codes"] == 8 and len(m["purity"]) == 8 and len(m["purity"][0]) == 5
    assert 0.0 <= m["rows_valid_rate"] <= 1.0 and 0.0 <= m["tv_vs_law"] <= 1.0
    assert m["prior_kind"] == "input" and len(m["prior"]) == 8
    assert sum(m["prior"]) == pytest.approx(1, abs=1e-3)
    assert "nmi_joint" in m and 0.0 <= m["mixture_valid_rate"] <= 1.0
    assert report.meta["command"] == "seffi ladder"
    assert "## Rung 2 models" in (out / "report.md").read_text()


def test_rung3_grpo_runs_share_the_pool_and_report_passk(smoke_run: tuple[Path, int]) -> None:
    """Rung 3 = GRPO validity / diversity / lr=0 on the pool, iid from samples."""
    from seffi.report.files import load_report

    out, _ = smoke_run
    report = load_report(out)
    one, _, three = report.comparisons
    assert (three.rung, three.iid_source, three.budget) == (3, "samples", 4)
    labels = ["GRPO validity reward", "GRPO diversity reward", "GRPO lr=0 (sanity)"]
    assert [p.curves.label for p in three.policies] == labels
    assert all(p.gain is not None and p.latent is None for p in three.policies)
    assert three.policies[0].barcode.input_ids == one.policies[0].barcode.input_ids  # the same pool
    r3 = json.loads((out / "rung3.json").read_text())
    assert r3["base"]["n"] == 8 and len(r3["base"]["valid_at_k"]) == 8 and len(r3["base"]["coverage"]) == 8
    assert list(r3["runs"]) == labels
    assert [r3["runs"][lab]["lr"] for lab in labels] == [3e-4, 3e-4, 0.0]
    assert [r3["runs"][lab]["reward"] for lab in labels] == ["valid", "diversity", "valid"]
    for lab in labels:
        ev = r3["runs"][lab]["eval"]
        assert {"valid@1", "valid@8", "coverage@8", "solvable", "crossover_k", "crossover_found"} <= set(ev)
        assert [h["step"] for h in r3["runs"][lab]["history"]] == [2]
    md = (out / "report.md").read_text()
    assert "## Rung 3: GRPO on the base LM" in md and "| GRPO diversity reward |" in md
    assert json.loads((out / "timings.json").read_text())["rung3_seconds"] > 0
    assert report.title == "seffi ladder: rungs 1-3 on grid_routes (--smoke)"


def test_bad_grpo_steps_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """A bad --grpo-steps exits 2 with one line naming the setting."""
    assert main(["ladder", "--smoke", "--grpo-steps", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "grpo.steps" in err[0]


def test_rung3_without_the_trl_extra_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the trl extra, one line naming it (and --no-rung3), exit 2."""
    import sys

    monkeypatch.setitem(sys.modules, "trl", None)  # import trl now raises ImportError
    assert main(["ladder", "--smoke", "--wandb", "disabled", "--out", "unused"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'trl' extra" in err[0] and "--no-rung3" in err[0]


def test_round_robin_follows_prior_order() -> None:
    """The no-learning explorer takes latents in prior order, cycling with k."""
    layout = {"prior": slice(0, 3), "used": slice(3, 4)}
    act = round_robin_act(layout, budget=4)
    prior = [0.2, 0.5, 0.3]
    obs = np.array([[*prior, k / 4] for k in range(4)], dtype=np.float32)
    assert act(obs, np.random.default_rng(0)).tolist() == [1, 2, 0, 1]


def test_rung_configs_share_task_config_and_pool_settings() -> None:
    """Rung 1's router env and rung 2's LM use the same task config and budget."""
    cfg = LadderConfig(task="sort_swaps", budget=6, n_inputs=12)
    run = cfg.run_config()
    lm = cfg.lm_config()
    assert run.tasks == ("sort_swaps",) and run.budget == 6 and run.n_inputs == 12
    assert run.task_options["sort_swaps"] == lm.task_config == {"min_length": 3, "max_length": 4}
    assert smoke_config().lm_config().d_model == 32
    # The full ladder's models are the measured ones (their cache keys match the experiments').
    assert LadderConfig(task="grid_routes").lm_config().task_config is None


def test_bad_settings_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """User errors print one line and exit 2."""
    assert main(["ladder", "--smoke", "--budget", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "budget" in err[0]
    assert main(["ladder", "--smoke", "--lm", "{not json"]) == 2
    assert "--lm" in capsys.readouterr().err


# -- model-training seeds -----------------------------------------------------------------------------------


def test_model_seed_sets_the_training_seeds_and_the_cache_keys() -> None:
    """model_seed is LMConfig.seed and the mixture's seed; the data seed stays; each seed has its own keys."""
    from seffi.experiment.ladder import DEFAULT_LM
    from seffi.models.config import LMConfig

    zero, three = LadderConfig().lm_config(), LadderConfig(model_seed=3).lm_config()
    assert (zero.seed, zero.mixture.seed) == (0, 0)
    assert (three.seed, three.mixture.seed, three.data_seed) == (3, 3, 0)
    assert three.model_copy(update={"seed": 0, "mixture": zero.mixture}) == zero  # nothing else moves
    keys = {(c.base_key(), c.mixture_key()) for c in (zero, three, LadderConfig(model_seed=4).lm_config())}
    assert len({k for pair in keys for k in pair}) == 6
    # Seed 0 is the configuration the ladder always trained: its cached models keep their keys.
    measured = LMConfig(task="grid_routes", **DEFAULT_LM["grid_routes"])
    assert (zero.base_key(), zero.mixture_key()) == (measured.base_key(), measured.mixture_key())
    assert LadderConfig(model_seed=3).public_dict()["model_seed"] == 3
    assert smoke_config(model_seed=2).lm_config().mixture.seed == 2


def test_lm_mixture_override_keeps_the_other_default_mixture_fields() -> None:
    """`--lm '{"mixture": {...}}'` changes the fields it names and keeps the task's other mixture defaults."""
    from seffi.experiment.ladder import DEFAULT_LM, merge_lm

    before = json.dumps(DEFAULT_LM, sort_keys=True)
    mix = LadderConfig(lm={"epochs": 4, "mixture": {"final_epochs": 5, "capacity": 1.5}}).lm_config().mixture
    assert (mix.final_epochs, mix.capacity) == (5, 1.5)
    # The ladder's defaults, not MixtureConfig's (prior "global", max_rows None, final_epochs 0).
    assert (mix.prior, mix.max_rows, mix.mode, mix.rounds, mix.lr) == ("input", 4000, "online", 8, 0.001)
    assert json.dumps(DEFAULT_LM, sort_keys=True) == before  # the defaults are not mutated
    merged = merge_lm({"epochs": 10, "mixture": {"a": 1, "b": 2}}, {"mixture": {"b": 3}, "lr": 0.1})
    assert merged == {"epochs": 10, "lr": 0.1, "mixture": {"a": 1, "b": 3}}


def test_lm_seed_other_than_model_seed_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """A seed inside --lm that contradicts model_seed is one line and exit 2; an equal one is accepted."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="model_seed"):
        LadderConfig(lm={"mixture": {"seed": 1}})
    assert LadderConfig(model_seed=2, lm={"seed": 2, "mixture": {"seed": 2}}).lm_config().seed == 2
    assert main(["ladder", "--smoke", "--lm", '{"seed": 5}', "--model-seed", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lm.seed" in err[0] and "--model-seed" in err[0]
    assert main(["ladder", "--smoke", "--model-seed", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model_seed" in err[0]


def test_model_seed_option_reaches_the_ladder_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """`seffi ladder --model-seed 4` runs the ladder with model_seed 4 (models seeded 4, root seed 0)."""
    import seffi.experiment.ladder as ladder

    seen: list[LadderConfig] = []
    monkeypatch.setattr(ladder, "run_ladder", lambda config, **_: seen.append(config))
    assert main(["ladder", "--model-seed", "4", "--no-rung3"]) == 0
    assert main(["ladder", "--no-rung3"]) == 0
    (four, default) = seen
    assert (four.model_seed, four.seed, four.lm_config().seed, four.lm_config().mixture.seed) == (4, 0, 4, 4)
    assert default.model_seed == 0


# -- scripts/ladder_seeds.py ------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def seeds_script():
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("ladder_seeds", ROOT / "scripts" / "ladder_seeds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ladder_seeds"] = module
    spec.loader.exec_module(module)
    return module


def _fake_run(
    folder: Path,
    model_seed: int,
    nmi: float,
    rr: tuple[float, float, float],
    rr_valid: float,
    trained: tuple[float, float, float],
    untrained: tuple[float, float, float],
) -> Path:
    """A run folder with the parts of report.json / ladder.json / timings.json the script reads."""

    def policy(label: str, gain: tuple[float, float, float], valid: float) -> dict:
        return {
            "curves": {"label": label, "valid_rate": valid},
            "gain": dict(zip(("value", "lo", "hi"), gain, strict=True)),
        }

    decoy = {"rung": 1, "policies": [policy("round-robin latents", (9.0, 9.0, 9.0), 0.0)]}
    rung2 = {
        "rung": 2,
        "policies": [
            policy("trained router", trained, 0.75),
            policy("untrained router", untrained, 0.8),
            policy("round-robin latents", rr, rr_valid),
        ],
    }
    folder.mkdir(parents=True)
    report = {"config": {"seed": 0, "model_seed": model_seed}, "comparisons": [decoy, rung2]}
    ladder = {
        "base_valid_rate": 0.85,
        "rows_valid_rate": 0.9,
        "nmi_joint": nmi,
        "nmi": nmi / 2,
        "mixture_valid_rate": 0.8,
        "cache_keys": {"base": f"b{model_seed}", "mixture": f"m{model_seed}"},
    }
    timings = {"models_cached": 0.0, "models_seconds": 500.0 + model_seed, "total_seconds": 600.0}
    for name, body in (("report.json", report), ("ladder.json", ladder), ("timings.json", timings)):
        (folder / name).write_text(json.dumps(body))
    return folder


def test_ladder_seeds_table_of_two_runs_has_hand_computed_mean_and_sd(seeds_script, tmp_path: Path) -> None:
    """Two fake runs: per-seed cells, mean, sample sd, CI half-widths and per-seed conclusions by hand."""
    s = seeds_script
    a = s.collect(
        _fake_run(tmp_path / "seed-0", 0, 0.62, (0.8, 0.6, 1.0), 0.82, (0.5, 0.3, 0.7), (0.1, -0.2, 0.4))
    )
    b = s.collect(
        _fake_run(tmp_path / "seed-1", 1, 0.40, (0.9, 0.8, 1.0), 0.61, (0.7, 0.6, 0.8), (-0.3, -0.5, -0.1))
    )
    assert a["round_robin_gain"] == {"value": 0.8, "lo": 0.6, "hi": 1.0} and a["round_robin_valid"] == 0.82
    data = s.build([b, a], "cmd", {"torch": "x"})
    assert data["model_seeds"] == [0, 1]
    summary = data["summary"]
    assert summary["nmi"]["mean"] == pytest.approx(0.51)
    assert summary["nmi"]["sd"] == pytest.approx(0.22 / 2**0.5)  # two values: |a - b| / sqrt(2)
    assert summary["trained_gain"]["mean"] == pytest.approx(0.6)
    assert summary["trained_gain"]["sd"] == pytest.approx(0.2 / 2**0.5)
    assert summary["trained_gain"]["mean_ci_half_width"] == pytest.approx((0.2 + 0.1) / 2)
    assert summary["round_robin_valid"]["mean"] == pytest.approx(0.715)
    assert summary["models_seconds"]["sd"] == pytest.approx(2**-0.5)
    holds = {c["claim"]: c["holds"] for c in data["conclusions"]}
    assert holds["NMI (z ~ prior) >= 0.6"] == [0]
    assert holds["the round-robin's valid rate >= 0.8"] == [0]
    assert holds["the trained router's gain CI lies above 0"] == [0, 1]
    assert holds["the untrained router's gain CI contains 0"] == [0]
    assert holds["the round-robin's gain exceeds the trained router's"] == [0, 1]
    table = s.table(data)
    assert (
        "| trained router gain [95% CI] | 0.500 [0.300, 0.700] | 0.700 [0.600, 0.800] "
        "| 0.600 ± 0.141 | 0.150 |" in table
    )
    assert "| untrained router gain [95% CI] | 0.100 [\u22120.200, 0.400] |" in table
    text = s.conclusion_text(data)
    assert "NMI (z ~ prior) >= 0.6 on 1 of 2 model seeds (seed 0)" in text
    assert "the trained router's gain CI lies above 0 on all 2 model seeds" in text


def test_ladder_seeds_check_catches_an_edited_page(seeds_script, tmp_path: Path) -> None:
    """--check passes on the page it wrote and fails on a changed number or an inconsistent JSON."""
    s = seeds_script
    runs = tmp_path / "runs"
    for seed, nmi in ((0, 0.6), (1, 0.5)):
        _fake_run(runs / f"seed-{seed}", seed, nmi, (0.8, 0.6, 1.0), 0.8, (0.5, 0.3, 0.7), (0.0, -0.2, 0.2))
    js, md = tmp_path / "d.json", tmp_path / "d.md"
    args = ["--seeds", "0,1", "--from-runs", str(runs), "--json", str(js), "--md", str(md)]
    assert s.main(args) == 0
    assert s.main(["--check", "--json", str(js), "--md", str(md)]) == 0
    md.write_text(md.read_text().replace("0.550 ± 0.071", "0.560 ± 0.071"))
    assert s.main(["--check", "--json", str(js), "--md", str(md)]) == 1
    data = json.loads(js.read_text())
    md.write_text(s.render_md(data))
    data["records"][0]["nmi"] = 0.7
    js.write_text(json.dumps(data))
    assert s.check(js, md)[0].endswith("the summary does not follow from the per-seed records")


def test_ladder_seeds_reads_a_real_ladder_run(seeds_script, smoke_run: tuple[Path, int]) -> None:
    """The script's reader takes rung 2's policies and the model measurements from a real run folder."""
    from seffi.report.files import load_report

    out, _ = smoke_run
    record = seeds_script.collect(out)
    report = load_report(out)
    (two,) = [c for c in report.comparisons if c.rung == 2]
    rr = next(p for p in two.policies if p.curves.label == "round-robin latents")
    assert record["round_robin_gain"] == {"value": rr.gain.value, "lo": rr.gain.lo, "hi": rr.gain.hi}
    assert record["round_robin_valid"] == rr.curves.valid_rate
    m = json.loads((out / "ladder.json").read_text())
    assert (record["nmi"], record["nmi_uniform"], record["base_valid"]) == (
        m["nmi_joint"],
        m["nmi"],
        m["base_valid_rate"],
    )
    assert record["model_seed"] == 0 and record["models_cached"] is False


def test_ladder_seeds_docs_agree_with_their_json(seeds_script) -> None:
    """docs/ladder-seeds.md is what docs/ladder_seeds.json generates (the drift check, no retraining)."""
    assert seeds_script.check(seeds_script.DOCS_JSON, seeds_script.DOCS_MD) == []
