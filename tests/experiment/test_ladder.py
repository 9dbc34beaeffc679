"""Issues 15 item 5 and 16 item 6: ``seffi ladder`` (rungs 1-3) end to end on the ``--smoke`` config."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import require

# The imports below need the lm extra: require() skips (or, in CI, fails) first.
# ruff: noqa: E402
require("torch", "lm")
require("transformers", "lm")

from seffi.cli import main
from seffi.experiment.ladder import LadderConfig, round_robin_act, smoke_config


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float, int]:
    root = tmp_path_factory.mktemp("ladder")
    mp = pytest.MonkeyPatch()
    mp.setenv("SEFFI_CACHE", str(root / "cache"))
    mp.setenv("WANDB_DIR", str(root))
    mp.setenv("WANDB_MODE", "offline")
    mp.chdir(root)
    started = time.perf_counter()
    code = main(["ladder", "--smoke", "--out", str(root / "run"), "--no-progress"])
    seconds = time.perf_counter() - started
    mp.undo()
    return root / "run", seconds, code


def test_smoke_runs_three_rungs_within_90_seconds(smoke_run: tuple[Path, float, int]) -> None:
    """Issue 16 Done-when: `seffi ladder --smoke` (rungs 1-3) runs in <= 90 s and writes the run folder."""
    out, seconds, code = smoke_run
    assert code == 0
    assert seconds <= 90, f"--smoke took {seconds:.1f} s"
    for name in ("report.json", "report.md", "ladder.json", "timings.json", "routers.json", "rung3.json"):
        assert (out / name).is_file(), name
    plots = ("ladder_coverage", "ladder_latent_vs_strategy", "ladder_purity", "ladder_valid_at_k")
    plots += ("ladder_passk",)
    for plot in plots:
        assert (out / f"{plot}.png").stat().st_size > 1000, plot
    assert list(out.parent.glob("wandb/offline-run-*")), "no offline W&B run"


def test_report_has_both_rungs_tagged_with_the_same_pool(smoke_run: tuple[Path, float, int]) -> None:
    """Issue 15 item 5: report.json in `seffi run`'s schema, comparisons tagged rung and iid_source."""
    from seffi.report.files import load_report

    out, _, _ = smoke_run
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


def test_rung3_grpo_runs_share_the_pool_and_report_passk(smoke_run: tuple[Path, float, int]) -> None:
    """Issue 16 items 3, 4, 6: rung 3 = GRPO validity / diversity / lr=0 on the pool, iid from samples."""
    from seffi.report.files import load_report

    out, _, _ = smoke_run
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
    assert report.title == "seffi ladder: rungs 1-3 on grid_routes"


def test_bad_grpo_steps_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 16 item 6: a bad --grpo-steps exits 2 with one line naming the setting."""
    assert main(["ladder", "--smoke", "--grpo-steps", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "grpo.steps" in err[0]


def test_rung3_without_the_trl_extra_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 16 item 6: without the trl extra, one line naming it (and --no-rung3), exit 2."""
    import sys

    monkeypatch.setitem(sys.modules, "trl", None)  # import trl now raises ImportError
    assert main(["ladder", "--smoke", "--wandb", "disabled", "--out", "unused"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'trl' extra" in err[0] and "--no-rung3" in err[0]


def test_round_robin_follows_prior_order() -> None:
    """Issue 15 item 5: the no-learning explorer takes latents in prior order, cycling with k."""
    layout = {"prior": slice(0, 3), "used": slice(3, 4)}
    act = round_robin_act(layout, budget=4)
    prior = [0.2, 0.5, 0.3]
    obs = np.array([[*prior, k / 4] for k in range(4)], dtype=np.float32)
    assert act(obs, np.random.default_rng(0)).tolist() == [1, 2, 0, 1]


def test_rung_configs_share_task_config_and_pool_settings() -> None:
    """Issue 15 item 5: rung 1's router env and rung 2's LM use the same task config and budget."""
    cfg = LadderConfig(task="sort_swaps", budget=6, n_inputs=12)
    run = cfg.run_config()
    lm = cfg.lm_config()
    assert run.tasks == ("sort_swaps",) and run.budget == 6 and run.n_inputs == 12
    assert run.task_options["sort_swaps"] == lm.task_config == {"min_length": 3, "max_length": 4}
    assert smoke_config().lm_config().d_model == 32
    # The full ladder's models are the measured ones (their cache keys match the experiments').
    assert LadderConfig(task="grid_routes").lm_config().task_config is None


def test_bad_settings_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 15 item 5: user errors print one line and exit 2."""
    assert main(["ladder", "--smoke", "--budget", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "budget" in err[0]
    assert main(["ladder", "--smoke", "--lm", "{not json"]) == 2
    assert "--lm" in capsys.readouterr().err
