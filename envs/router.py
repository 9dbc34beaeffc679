"""Router envs ``seffi/<Name>Router-v0``: the action is a latent code, a hidden generator writes the trace.

The generator, its exact iid law and the observation layout: docs/integrations.md ("seffi's envs").
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import accumulate
from typing import Any

import numpy as np
from gymnasium import spaces

from seffi._seeding import seed_from_text
from seffi.tasks.base import ValidationResult

from .base import SeffiEnv, SeffiVectorEnv
from .config import RouterEnvConfig
from .core import Life, Outcomes, PoolSpec, cached_spec, pool_fields


def observation_layout(
    n_inputs: int, n_latents: int, n_strategies: int, *, history: bool = True
) -> dict[str, slice]:
    """Name -> slice of a router env's flat observation, in order (``n_inputs`` 0 leaves ``input`` out)."""
    sizes = [("input", n_inputs), ("prior", n_latents)]
    if history:
        sizes += [("tried", n_latents), ("found", n_strategies), ("used", 1)]
    starts = list(accumulate((size for _, size in sizes), initial=0))
    return {name: slice(starts[i], starts[i + 1]) for i, (name, _) in enumerate(sizes)}


class RouterSpec(PoolSpec):
    """Router pool data: ``prior`` (N, Z), ``branch_probs`` (N, Z, K), ``outcomes`` (row n * K + k)."""

    def __init__(self, cfg: RouterEnvConfig) -> None:
        super().__init__(cfg)
        z_count = self.n_latents = cfg.n_latents or max(4, 2 * len(self.strategies))
        n = self.n_inputs
        # An input has at most 2M + 1 branches: its strategies, each with a wrong answer, off-strategy.
        self.prior = np.empty((n, z_count))
        probs_all = np.zeros((n, z_count, 2 * len(self.strategies) + 1))
        texts_per_input: list[list[str]] = []
        for i, x in enumerate(self.inputs):
            self.prior[i], probs, texts = self._input_law(x, cfg, z_count)
            probs_all[i, :, : probs.shape[1]] = probs
            texts_per_input.append(texts)
        k_max = self.n_branches = max(len(texts) for texts in texts_per_input)
        self.branch_probs = np.ascontiguousarray(probs_all[:, :, :k_max])
        del probs_all
        # Padded with each input's last text: zero probability, never drawn.
        texts_all = [t for texts in texts_per_input for t in texts + [texts[-1]] * (k_max - len(texts))]
        self.outcomes = Outcomes.from_results(self, texts_all, self._validated(texts_per_input, k_max))
        cdf = np.cumsum(self.branch_probs, axis=2)
        # Inverse-CDF sampling draws the first branch with u < cdf; pinning the tail to 1 makes
        # rounding unable to push a draw past the last real branch.
        for i, texts in enumerate(texts_per_input):
            cdf[i, :, len(texts) - 1 :] = 1.0
        self.cdf = cdf

    def _validated(self, texts_per_input: list[list[str]], k_max: int) -> Iterator[ValidationResult]:
        # Yielded: a pool of 20,000 inputs never holds its ~180,000 results at once.
        for x, texts in zip(self.inputs, texts_per_input, strict=True):
            results = [self.task.validate_y_text(x, t) for t in texts]
            yield from results + results[-1:] * (k_max - len(texts))

    def _input_law(
        self, x: Any, cfg: RouterEnvConfig, z_count: int
    ) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Router prior (Z,), branch law (Z, K_x) and branch texts (K_x) of one input."""
        task = self.task
        rng = np.random.default_rng(seed_from_text(task.name, x.id, "router-map", cfg.mapping_seed))
        ranks = rng.permutation(z_count)
        prior = (ranks + 1.0) ** (-cfg.prior_skew)
        prior /= prior.sum()
        feasible = task.feasible_strategies(x)
        probe = np.random.default_rng(seed_from_text(task.name, x.id, "router-text"))
        if not feasible:  # nothing to execute: every latent yields an off-strategy trace
            return prior, np.ones((z_count, 1)), [task.off_strategy_trace(x, probe)]
        f = len(feasible)
        # Branches: 0..F-1 strategy s, F..2F-1 strategy s with a wrong answer, 2F off-strategy.
        texts = [task.reference(x, s) or "" for s in feasible]
        texts += [task.invalid_trace(x, s, probe) for s in feasible]
        texts.append(task.off_strategy_trace(x, probe))
        inv, off = task.config.invalid_rate, task.config.off_strategy_rate
        assign = rng.permutation(z_count) % f  # latent -> feasible strategy, each strategy hit
        execute = np.zeros((z_count, 2 * f + 1))
        execute[np.arange(z_count), assign] = 1.0 - inv - off
        execute[np.arange(z_count), f + assign] = inv
        execute[:, 2 * f] = off
        base = np.zeros(2 * f + 1)
        position = {s: i for i, s in enumerate(feasible)}
        for mode in task.base_modes(x):  # into the branches above
            if mode.kind == "off_strategy" or mode.strategy is None:
                base[2 * f] += mode.probability
            else:
                base[position[mode.strategy] + (f if mode.kind == "invalid" else 0)] += mode.probability
        probs = (1.0 - cfg.noise) * execute + cfg.noise * base[None, :]
        return prior, probs / probs.sum(axis=1, keepdims=True), texts

    def base_match_distribution(self, input_id: str, valid_only: bool = False) -> dict[frozenset[str], float]:
        """Law of the match set when z is drawn from the router prior (exact, by enumeration)."""
        n = self.index_of(input_id)
        branch = np.einsum("z,zb->b", self.prior[n], self.branch_probs[n])  # not BLAS: same bits on every CPU
        law: dict[frozenset[str], float] = {}
        for k in np.flatnonzero(branch > 0.0):
            row = n * self.n_branches + k
            keep = self.outcomes.valid[row] or not valid_only
            matches = frozenset(self.outcomes.matches[row] if keep else ())
            law[matches] = law.get(matches, 0.0) + float(branch[k])
        return law


class LatentCodeEngine:
    """What engines whose action is a latent code share: the observation and the run bookkeeping.

    Subclasses build a spec with ``n_inputs``, ``n_latents``, ``strategies`` and ``prior`` (N, Z), call
    `_init_codes`, and say in `_outcomes` how a latent becomes a trace.
    """

    code_names: tuple[str, str] = ("latents", "Z")

    def _init_codes(self, spec: Any, cfg: Any, num_envs: int) -> None:
        n, z, m = spec.n_inputs, spec.n_latents, len(spec.strategies)
        self.life = Life(spec, cfg, num_envs, n_latents=z)
        self.obs_layout = observation_layout(n, z, m, history=cfg.history)
        self._obs_dim = max(s.stop for s in self.obs_layout.values())
        # The one-hot is written per observed row: an (N, N) table at N = 100,000 would take 40 GB.
        self._prior = spec.prior.astype(np.float32)
        self.single_observation_space = spaces.Box(0.0, 1.0, shape=(self._obs_dim,), dtype=np.float32)
        self.single_action_space = spaces.Discrete(z)

    def restart(self, row: int, gen: np.random.Generator) -> None:
        self.life.restart(row, gen)

    def reset_rows(self, rows: np.ndarray, explicit: np.ndarray | None) -> None:
        self.life.begin(rows, explicit)

    def observe(self, rows: np.ndarray) -> np.ndarray:
        life, lay = self.life, self.obs_layout
        cur = life.cur[rows]
        obs = np.empty((rows.size, self._obs_dim), dtype=np.float32)
        onehot = obs[:, lay["input"]]  # a view: the writes below fill obs
        onehot[:] = 0.0
        onehot[np.arange(rows.size), cur] = 1.0
        obs[:, lay["prior"]] = self._prior[cur]
        if self.cfg.history:
            budget = float(self.cfg.budget)
            obs[:, lay["tried"]] = life.tried[rows, cur] / budget
            obs[:, lay["found"]] = life.seen[rows, cur]
            obs[:, lay["used"]] = (life.counts[rows, cur] / budget)[:, None]
        return obs

    def step_rows(
        self, rows: np.ndarray, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """End the one-step episodes of ``rows`` with latent codes ``actions``."""
        out = self._outcomes(rows, self.life.cur[rows], actions)
        rewards, cols = self.life.finish(rows, out, latents=actions)
        return rewards, np.ones(rows.size, dtype=bool), np.zeros(rows.size, dtype=bool), rows, cols

    def _outcomes(self, rows: np.ndarray, inputs: np.ndarray, actions: np.ndarray) -> Outcomes:
        """The validated traces of ``rows`` on pool ``inputs`` for latent codes ``actions``."""
        raise NotImplementedError

    def episode_lines(self, row: int) -> list[str]:
        """``"ansi"`` lines of a running episode: the codes tried on its input this run."""
        noun, symbol = self.code_names
        tried = self.life.tried[row, self.life.cur[row]]
        listed = ", ".join(f"z={z}\u00d7{int(tried[z])}" for z in np.flatnonzero(tried))
        return [f"{noun} tried this run: {listed or 'none yet'} ({symbol}={self.spec.n_latents})"]


class RouterEngine(LatentCodeEngine):
    """Batched one-step router episodes of E rows (see the module docstring for the observation)."""

    kind = "router"

    def __init__(self, cfg: RouterEnvConfig, num_envs: int) -> None:
        self.cfg = cfg
        self.spec: RouterSpec = cached_spec("router", pool_fields(cfg), lambda: RouterSpec(cfg))
        self._init_codes(self.spec, cfg, num_envs)

    def _outcomes(self, rows: np.ndarray, inputs: np.ndarray, actions: np.ndarray) -> Outcomes:
        spec = self.spec
        u = self.life.uniform(rows)
        branch = (spec.cdf[inputs, actions] <= u[:, None]).sum(axis=1)
        return spec.outcomes.take(inputs * spec.n_branches + branch)


class RouterAPI:
    """The router env kind's extras, engine and config, mixed into the single and the vector env."""

    _engine: RouterEngine

    @property
    def n_latents(self) -> int:
        """Z, the number of latent codes (the action count)."""
        return self._engine.spec.n_latents

    @property
    def obs_layout(self) -> dict[str, slice]:
        """Name -> slice of the flat observation."""
        return dict(self._engine.obs_layout)

    def latent_prior(self, input_id: str) -> np.ndarray:
        """The router prior (the iid base model): float array, shape (Z,)."""
        spec = self._engine.spec
        return spec.prior[spec.index_of(input_id)].copy()

    def sample_base_action(self, input_id: str, rng: np.random.Generator) -> int:
        """One latent drawn from the router prior of ``input_id`` (an iid base-model action)."""
        prior = self.latent_prior(input_id)
        return int(rng.choice(prior.size, p=prior))

    engine_cls = RouterEngine
    config_cls = RouterEnvConfig


class RouterEnv(RouterAPI, SeffiEnv):
    """Single router env; see the module docstring. Keyword arguments: `RouterEnvConfig`."""


class RouterVectorEnv(RouterAPI, SeffiVectorEnv):
    """Native vector router env (``num_envs`` rows); same infos as ``SyncVectorEnv(RouterEnv)``."""
