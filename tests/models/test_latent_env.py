"""``seffi/<Name>LatentLM-v0`` on the tiny learned mixture (checkers, vectors, monitor)."""

from __future__ import annotations

import inspect
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence
from gymnasium.vector import SyncVectorEnv

from tests.helpers import require

# The imports below need the lm extra: require() skips (or, in CI, fails) first.
# ruff: noqa: E402
require("torch", "lm")
require("transformers", "lm")

from seffi.envs import FINAL_INFO_KEYS, AutoresetMode, env_id
from seffi.errors import SeffiError
from tests.models import tiny

EID = env_id("edit_script", "latent_lm")
SYNC_HAS_MODES = "autoreset_mode" in inspect.signature(SyncVectorEnv.__init__).parameters


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tiny.tiny_models(tmp_path_factory).mixture_dir)


def make(model_dir: str, **kwargs):
    return gym.make(EID, model_dir=model_dir, **{"n_inputs": 3, "budget": 4, **kwargs})


def test_registered_with_vector_entry_point() -> None:
    """Every task has a LatentLM id with a native vector entry point."""
    spec = gym.spec(EID)
    assert EID == "seffi/EditScriptLatentLM-v0"
    assert spec.vector_entry_point == "seffi.models.latent_env:LatentLMVectorEnv"
    assert spec.kwargs == {"task": "edit_script"}


def test_episode_info_has_router_keys_and_latent(model_dir: str) -> None:
    """One-step episodes, action = code, same info keys as the router envs."""
    env = make(model_dir)
    u = env.unwrapped
    assert u.n_latents == 8 and env.action_space.n == 8
    obs, _ = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape
    np.testing.assert_allclose(obs[u.obs_layout["prior"]], u.models.prior, rtol=1e-6)
    obs, reward, terminated, truncated, info = env.step(3)
    assert terminated and not truncated
    assert list(info) == [*FINAL_INFO_KEYS, "z"] and info["z"] == 3
    assert reward == float(info["valid"])
    result = u.task.validate_y_text(u.inputs[0], info["y_text"])
    assert info["valid"] == result.valid and info["strategy_matches"] == tuple(
        sorted(result.strategy_matches)
    )


def test_same_seed_same_traces(model_dir: str) -> None:
    """Seeded resets reproduce every sampled trace."""
    env = make(model_dir)

    def rollout() -> list[str]:
        env.reset(seed=7)
        texts = []
        for z in [0, 1, 2, 3, 4, 5, 6, 7]:
            texts.append(env.step(z)[4]["y_text"])
            env.reset()
        return texts

    first = rollout()
    assert first == rollout()
    assert len(set(first)) > 1


def test_gymnasium_check_env_passes_without_warnings(model_dir: str) -> None:
    """Gymnasium's env checker passes without a warning."""
    env = make(model_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []


def test_sb3_check_env_passes(model_dir: str) -> None:
    """SB3's check_env passes without a warning."""
    sb3_checker = require("stable_baselines3.common.env_checker", "sb3")
    env = make(model_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sb3_checker.check_env(env.unwrapped, warn=True)
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.name)
def test_native_vector_equals_sync_vector(model_dir: str, mode: AutoresetMode) -> None:
    """The batched native vector env equals SyncVectorEnv over single envs."""
    if not SYNC_HAS_MODES and mode is not AutoresetMode.NEXT_STEP:
        pytest.skip("SyncVectorEnv: NEXT_STEP only")
    kwargs = {"model_dir": model_dir, "n_inputs": 4, "budget": 3, "schedule": "random", "reward": "novel"}
    native = gym.make_vec(
        EID, num_envs=5, vectorization_mode="vector_entry_point", autoreset_mode=mode, **kwargs
    )
    sync = gym.make_vec(
        EID, num_envs=5, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}, **kwargs
    )
    assert type(native.unwrapped).__name__ == "LatentLMVectorEnv"
    obs_n, _ = native.reset(seed=11)
    obs_s, _ = sync.reset(seed=11)
    assert data_equivalence(obs_n, obs_s, exact=True)
    rng = np.random.default_rng(0)
    texts = set()
    for t in range(8):
        actions = rng.integers(0, 8, size=5)
        out_n = native.step(actions)
        out_s = sync.step(actions)
        for what, a, b in zip(
            ("obs", "rewards", "terminated", "truncated", "infos"), out_n, out_s, strict=True
        ):
            assert data_equivalence(a, b, exact=True), f"step {t} {what} differ"
        infos = out_n[4].get("final_info", out_n[4])
        texts |= {y for y in infos.get("y_text", []) if y is not None}
    assert len(texts) > 3  # real samples, not one repeated trace


def test_no_exact_iid_law_and_sampled_baseline(model_dir: str) -> None:
    """No exact law; iid_baseline = IidBaseline.from_samples of n >= 4K base samples."""
    env = make(model_dir)
    u = env.unwrapped
    with pytest.raises(SeffiError, match="iid_baseline"):
        u.base_match_distribution(u.input_ids[0])
    iid = u.iid_baseline()
    assert iid.estimated
    curves = iid.curves(4)
    assert curves.extrapolated is None or not np.any(curves.extrapolated)  # n = 16 >= K: interpolated
    assert 0.0 <= curves.coverage[-1] <= 1.0 and curves.valid_coverage is not None
    assert u.iid_baseline() is iid  # cached
    rng = np.random.default_rng(3)
    a = u.sample_base_y_text(u.input_ids[0], rng)
    assert a == u.sample_base_y_text(u.input_ids[0], np.random.default_rng(3))
    assert isinstance(a, str) and a


def test_coverage_monitor_end_to_end(model_dir: str, tmp_path) -> None:
    """CoverageMonitor runs on the LatentLM vector env with the sampled iid baseline."""
    from seffi.callbacks import CoverageMonitor

    budget = 4
    envs = gym.make_vec(
        EID,
        num_envs=3,
        vectorization_mode="vector_entry_point",
        autoreset_mode=AutoresetMode.SAME_STEP,
        model_dir=model_dir,
        n_inputs=3,
        budget=budget,
    )
    iid = envs.unwrapped.iid_baseline()
    monitor = CoverageMonitor.for_env(
        envs, budget, iid=iid, out_dir=tmp_path / "run", wandb="disabled", plots=False, n_boot=20, log_every=6
    )
    envs.reset(seed=0)
    rng = np.random.default_rng(1)
    # A run is one (input, env row) sequence; 16 steps of 3 rows let every run reach K = 4, so the
    # gain is defined (a gain from runs shorter than K would compare different budgets).
    for step in range(16):
        _, _, term, trunc, infos = envs.step(rng.integers(0, 8, size=3))
        monitor.update_infos(infos, term | trunc)
        monitor.maybe_log(step)
    report = monitor.finalize(step=16)
    comp = report.comparisons[0]
    assert comp.task == "edit_script" and comp.budget == budget
    assert comp.iid is not None and comp.oracle is not None
    policy = comp.policies[0]
    assert policy.curves.n_samples == 48
    assert policy.gain is not None and policy.gain.value is not None
    assert policy.latent is not None and policy.latent.num_codes == 8
    assert (tmp_path / "run" / "report.json").is_file()


def test_bad_settings_are_one_line_errors(model_dir: str) -> None:
    """Wrong n_latents or task_config are readable SeffiErrors."""
    with pytest.raises(SeffiError, match="8 codes"):
        make(model_dir, n_latents=5)
    with pytest.raises(SeffiError, match="task_config"):
        make(model_dir, task_config={"alphabet_size": 2})
    with pytest.raises(SeffiError, match="not 'hanoi'"):
        gym.make(env_id("hanoi", "latent_lm"), model_dir=model_dir)


def test_gym_make_without_lm_extra_names_the_extra(model_dir: str) -> None:
    """gym.make of a LatentLM env without torch -> one line naming the 'lm' extra."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import gymnasium as gym, seffi.envs\n"
        "from seffi.errors import SeffiError\n"
        "try:\n"
        f"    gym.make('{EID}', model_dir={model_dir!r})\n"
        "except SeffiError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "'lm' extra" in out.stdout and len(out.stdout.strip().splitlines()) == 1, out.stderr


def test_learned_per_input_prior_is_the_observed_prior(tmp_path_factory: pytest.TempPathFactory) -> None:
    """With a mixture that learned p(z | x) (prior="input") each input's observed prior
    is the mixture's own code distribution for that prompt, and the vector env's rows agree."""
    from seffi.models.cache import train_ladder_models

    cfg = tiny.tiny_cfg(mixture={**tiny.TINY["mixture"], "prior": "input"})
    models = train_ladder_models(cfg, tiny.tiny_cache(tmp_path_factory))
    assert models.per_input_prior
    env = make(str(models.mixture_dir))
    u = env.unwrapped
    expected = models.mixture.code_distribution([u.task.prompt(x) for x in u.inputs], models.n_codes)
    assert not np.allclose(expected[0], expected[1])  # the prior depends on the input
    for i, x in enumerate(u.inputs):
        np.testing.assert_allclose(u.latent_prior(x.id), expected[i], rtol=1e-12)
    obs, _ = env.reset(seed=0, options={"input_id": u.inputs[1].id})
    np.testing.assert_allclose(obs[u.obs_layout["prior"]], expected[1], rtol=1e-6)
