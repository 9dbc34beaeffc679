"""Latent-LM envs ``seffi/<Name>LatentLM-v0``: the exploration ladder's rung 2, on learned generators.

Like the router envs (`seffi.envs.router`) an episode is one step and the action is a latent code
``z`` in ``Discrete(L)`` — but the generator is not hand-written: it is the latent mixture LM of
`seffi.models`, learned by hard EM without strategy labels, and the trace it samples for
``(x, z)`` is attributed by the task's validator. The observation and the ``info`` keys are the router
env's (``z`` included). The latent prior is the mixture's: ``p(z | x)`` read from the mixture LM when it
learned one (``MixtureConfig.prior="input"``, the ladder's default), else the codes' assignment
frequencies, the same for every input. Drawing ``z`` from it and then the trace is the mixture's own
ancestral sampling, the analogue of the router env's iid base model.

**No exact iid law.** The iid base model here is the plain base LM (SFT on the task's training rows),
whose strategy law nobody wrote down. ``base_match_distribution`` therefore raises; the env offers
``sample_base_y_text`` (one base-LM trace) and ``iid_baseline(n)``, an
``IidBaseline.from_samples`` over ``n`` validated base samples per pool input (default ``4 * budget``,
so curves up to K are interpolated, not extrapolated). Pass it to the monitor:
``CoverageMonitor.for_env(env, budget, iid=env.unwrapped.iid_baseline())``. The oracle still comes from
the reference traces (``reference_match_sets``).

**Models.** ``model_dir=`` names a folder holding ``base/`` and ``mixture/`` (or a cached mixture
folder); without it, ``lm=`` (a dict of `seffi.models.LMConfig` fields, ``{}`` for the
defaults; the task is the env's) trains both models, or loads them from the cache (``cache_dir=``,
default ``$SEFFI_CACHE`` or ``~/.cache/seffi/models``); with neither, making the env is one error line.
Needs the ``lm`` extra; without it ``gym.make`` raises one line naming it.

**Registration.** `seffi.envs.register_envs` registers these ids with the string entry points
``seffi.models.latent_env:LatentLMEnv`` / ``LatentLMVectorEnv``, so ``import seffi.envs`` never imports
this module: ``gym.make`` does, when such an env is built.

**Vector env.** The native vector env samples every row's trace in one batched generation; each row
draws its tokens from its own seeded stream, so it equals ``SyncVectorEnv`` over single envs.

Examples:
    >>> import gymnasium as gym, seffi.envs                               # doctest: +SKIP
    >>> env = gym.make("seffi/EditScriptLatentLM-v0", n_inputs=8, lm={"epochs": 1})  # doctest: +SKIP
    >>> obs, _ = env.reset(seed=0)                                        # doctest: +SKIP
    >>> obs, reward, terminated, truncated, info = env.step(0)            # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from seffi.coverage import IidBaseline
from seffi.envs import env_id
from seffi.envs.base import SeffiEnv, SeffiVectorEnv
from seffi.envs.config import EnvConfig
from seffi.envs.core import Outcomes, PoolSpec, cached_spec
from seffi.envs.router import LatentCodeEngine, RouterAPI
from seffi.errors import SeffiError

from . import require_lm
from .cache import load_ladder_models, train_ladder_models
from .config import LMConfig


class LatentLMEnvConfig(EnvConfig):
    """Latent-LM env settings (the shared [`EnvConfig`][seffi.envs.EnvConfig] fields plus the models').

    Attributes:
        model_dir: Folder of trained models (``base/`` + ``mixture/``, or a cached mixture folder).
        lm: `seffi.models.LMConfig` fields (without ``task``) to train or load from the cache
            when ``model_dir`` is not given (``{}``: the defaults). With neither, making the env
            raises one line saying what to pass.
        cache_dir: Model cache root (``None``: ``$SEFFI_CACHE`` or ``~/.cache/seffi/models``).
        n_latents: L; ``None`` takes the mixture's (a different value is an error).
        temperature: Sampling temperature of both LMs (1 = the models' own distributions).
        iid_samples: Base-LM samples per input for `LatentLMAPI.iid_baseline` (``None``: 4 x budget).
        history: Add latents tried, strategies found and budget used to the observation (default on).
    """

    history: bool = True
    model_dir: str | None = None
    lm: dict[str, Any] | None = None
    cache_dir: str | None = None
    n_latents: int | None = Field(None, ge=1, le=64)
    temperature: float = Field(1.0, gt=0.0, le=10.0)
    iid_samples: int | None = Field(None, ge=1, le=100_000)


def load_models(cfg: LatentLMEnvConfig) -> Any:
    """The env's `seffi.models.LadderModels` (loaded from ``model_dir`` or trained/cached)."""
    if cfg.model_dir is None and cfg.lm is None:  # training takes minutes: never started by a bare make
        raise SeffiError(
            f"{env_id(cfg.task, 'latent_lm')} needs trained models: pass model_dir=DIR (a folder with base/ "
            "and mixture/, such as one `seffi ladder` cached) or lm={...} (LMConfig fields, {} for the "
            "defaults) to train them here, minutes on a CPU, cached under cache_dir"
        )
    require_lm()
    if cfg.model_dir is not None:
        return load_ladder_models(cfg.model_dir, task_name=cfg.task)
    fields = dict(cfg.lm)
    if fields.get("task", cfg.task) != cfg.task:
        raise SeffiError(f"lm.task {fields['task']!r} differs from the env's task {cfg.task!r}")
    fields["task"] = cfg.task
    fields.setdefault("task_config", cfg.task_config)
    return train_ladder_models(LMConfig(**fields), cfg.cache_dir)


class LatentLMSpec(PoolSpec):
    """Pool data of a latent-LM env: the models, the latent prior and every (input, code) prefix.

    Attributes:
        models: The base LM and the mixture.
        n_latents: L.
        prior: float array, shape (N, L): the latent prior of each input (see the module docstring).
    """

    def __init__(self, cfg: LatentLMEnvConfig) -> None:
        models = load_models(cfg)
        model_task_config = models.cfg.task_config
        if cfg.task_config is None:
            cfg = cfg.model_copy(update={"task_config": model_task_config})
        elif cfg.task_config != model_task_config:
            raise SeffiError(
                f"task_config {cfg.task_config!r} differs from the one the models were trained with "
                f"({model_task_config!r})"
            )
        super().__init__(cfg)
        self.models = models
        self.n_latents = models.n_codes
        if cfg.n_latents is not None and cfg.n_latents != self.n_latents:
            raise SeffiError(f"n_latents={cfg.n_latents} but the mixture has {self.n_latents} codes")
        layout = models.mixture.layout
        self.prompts = [self.task.prompt(x) for x in self.inputs]
        self.prior = models.input_prior(self.prompts)
        self.code_prefixes = [[layout.prefix(p, z) for z in range(self.n_latents)] for p in self.prompts]
        self.base_prefixes = [layout.prefix(p) for p in self.prompts]
        self.temperature = cfg.temperature
        self._iid_cache: dict[tuple[Any, ...], Any] = {}

    def base_match_distribution(self, input_id: str, valid_only: bool = False) -> dict[frozenset[str], float]:
        """Not available: the base LM's law is unknown (use ``iid_baseline``)."""
        raise SeffiError(
            "a LatentLM env has no exact iid law (its base model is a trained LM): build the iid baseline "
            "from base-LM samples with env.unwrapped.iid_baseline() and pass it as CoverageMonitor(iid=...)"
        )

    def sample_texts(
        self, lm: Any, prefixes: list[list[int]], uniforms: Any, inputs: np.ndarray
    ) -> tuple[list[str], Outcomes]:
        """Sample one trace per prefix with per-row uniforms, decode and validate them."""
        ids = lm.sample(prefixes, uniforms, temperature=self.temperature)
        texts = [lm.layout.decode(i) for i in ids]
        results = [self.task.validate_y_text(self.inputs[n], t) for n, t in zip(inputs, texts, strict=True)]
        return texts, Outcomes.from_results(self, texts, results)


class LatentLMEngine(LatentCodeEngine):
    """Batched one-step episodes on the learned mixture.

    The observation is the router env's (input one-hot, latent prior, and with ``history`` the latents
    tried, strategies found and budget used in this run); only how a trace is produced differs.
    """

    kind = "latent_lm"
    code_names = ("codes", "L")

    def __init__(self, cfg: LatentLMEnvConfig, num_envs: int) -> None:
        fields = {"task", "task_config", "n_inputs", "input_seed", "model_dir", "lm", "cache_dir"}
        key = cfg.model_dump(include=fields | {"n_latents", "temperature"})
        self.cfg = cfg
        self.spec: LatentLMSpec = cached_spec("latent_lm", key, lambda: LatentLMSpec(cfg))
        self._init_codes(self.spec, cfg, num_envs)

    def _outcomes(self, rows: np.ndarray, inputs: np.ndarray, actions: np.ndarray) -> Outcomes:
        spec, life = self.spec, self.life
        prefixes = [spec.code_prefixes[i][a] for i, a in zip(inputs.tolist(), actions.tolist(), strict=True)]
        # Row j of the batch draws its tokens from env row rows[j]'s own stream.
        _, out = spec.sample_texts(spec.models.mixture, prefixes, lambda idx: life.uniform(rows[idx]), inputs)
        return out


class LatentLMAPI(RouterAPI):
    """The latent-LM env kind: its extras (plus the router env's: prior, ``n_latents``), engine and config."""

    _engine: LatentLMEngine

    @property
    def models(self) -> Any:
        """The `seffi.models.LadderModels` (base LM and mixture) behind the env."""
        return self._engine.spec.models

    def sample_base_y_texts(self, input_id: str, n: int, rng: np.random.Generator) -> list[str]:
        """``n`` traces of the plain base LM (the iid base model) for ``input_id``, in one batch."""
        spec = self._engine.spec
        i = spec.index_of(input_id)
        return spec.models.base.sample_texts([spec.prompts[i]] * n, rng, temperature=spec.temperature)

    def sample_base_y_text(self, input_id: str, rng: np.random.Generator) -> str:
        """One trace of the plain base LM for ``input_id``."""
        return self.sample_base_y_texts(input_id, 1, rng)[0]

    def iid_baseline(self, n: int | None = None, *, seed: int = 0, input_ids: list[str] | None = None) -> Any:
        """``IidBaseline.from_samples`` over ``n`` validated base-LM samples per input (cached).

        Args:
            n: Samples per input (default: ``iid_samples`` or ``4 * budget``).
            seed: Seed of the sampling.
            input_ids: Inputs to cover (default: the whole pool).
        """
        spec, cfg = self._engine.spec, self._engine.cfg
        n = int(n or cfg.iid_samples or 4 * cfg.budget)
        ids = list(input_ids or spec.input_ids)
        key = (n, seed, tuple(ids))
        if key not in spec._iid_cache:
            rng = np.random.default_rng(seed)
            xs = np.repeat([spec.index_of(i) for i in ids], n)
            buf = rng.random((xs.size, spec.models.base.meta["max_new_tokens"] + 1))
            pos = np.zeros(xs.size, dtype=np.int64)

            def uniforms(rows: np.ndarray) -> np.ndarray:
                u = buf[rows, pos[rows]]
                pos[rows] += 1
                return u

            _, out = spec.sample_texts(
                spec.models.base, [spec.base_prefixes[i] for i in xs.tolist()], uniforms, xs
            )
            samples = {x: [out.matches[j] for j in range(k * n, (k + 1) * n)] for k, x in enumerate(ids)}
            valid = {x: [bool(v) for v in out.valid[k * n : (k + 1) * n]] for k, x in enumerate(ids)}
            spec._iid_cache[key] = IidBaseline.from_samples(samples, strategies=spec.strategies, valid=valid)
        return spec._iid_cache[key]

    # The engine both envs of this kind run on, and the model that parses their settings.
    engine_cls = LatentLMEngine
    config_cls = LatentLMEnvConfig


class LatentLMEnv(LatentLMAPI, SeffiEnv):
    """Single latent-LM env; see the module docstring. Keyword arguments: `LatentLMEnvConfig`."""


class LatentLMVectorEnv(LatentLMAPI, SeffiVectorEnv):
    """Native vector latent-LM env: one batched generation per step; equals ``SyncVectorEnv``."""
