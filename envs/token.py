"""Token-level envs ``seffi/<Name>-v0``: the agent writes ``y_text`` one vocabulary token at a time.

The action and observation spaces: docs/integrations.md ("seffi's envs").
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from seffi._seeding import seed_from_text
from seffi.tasks.base import ValidationResult

from .base import SeffiEnv, SeffiVectorEnv
from .config import TokenEnvConfig
from .core import Life, Outcomes, PoolSpec, cached_spec, pool_fields
from .render import indented

_CACHE_LIMIT = 200_000


class TokenSpec(PoolSpec):
    """Pool data of a token env: vocabulary, padded prompts, max length, a validation cache."""

    def __init__(self, cfg: TokenEnvConfig) -> None:
        super().__init__(cfg)
        self.vocabulary = self.task.vocabulary()
        prompts = [self.vocabulary.encode(self.task.prompt(x)) for x in self.inputs]
        self.prompt_length = max(1, max(len(p) for p in prompts))
        self.prompt_tokens = np.zeros((self.n_inputs, self.prompt_length), dtype=np.int64)
        for i, p in enumerate(prompts):
            self.prompt_tokens[i, : len(p)] = p
        self.max_length = cfg.max_length or self._derived_max_length()
        self._cache: dict[tuple[int, bytes], tuple[str, ValidationResult]] = {}

    def _derived_max_length(self) -> int:
        """Longest pool trace (references, a few invalid / off-strategy draws) + eos + a margin."""
        longest = 1
        for x in self.inputs:
            probe = np.random.default_rng(seed_from_text(self.task.name, x.id, "token-max-length"))
            feasible = self.task.feasible_strategies(x)
            texts = [self.task.reference(x, s) or "" for s in feasible]
            for _ in range(4):
                texts += [self.task.invalid_trace(x, s, probe) for s in feasible]
                texts.append(self.task.off_strategy_trace(x, probe))
            longest = max(longest, *(len(self.vocabulary.encode(t)) + 1 for t in texts))
        return longest + max(4, longest // 4)

    def outcomes(self, inputs: np.ndarray, tokens: np.ndarray, lengths: np.ndarray) -> Outcomes:
        """Decode and validate the first ``lengths`` of the outputs ``tokens`` (R, L) on ``inputs``."""
        texts, results = [], []
        for n, toks, length in zip(inputs.tolist(), tokens, lengths.tolist(), strict=True):
            written = toks[:length]
            key = (n, written.tobytes())
            hit = self._cache.get(key)
            if hit is None:
                text = self.vocabulary.decode(written)
                hit = (text, self.task.validate_y_text(self.inputs[n], text))
                if len(self._cache) >= _CACHE_LIMIT:
                    self._cache.clear()
                self._cache[key] = hit
            texts.append(hit[0])
            results.append(hit[1])
        return Outcomes.from_results(self, texts, results)


class TokenEngine:
    """Batched token-writing state of E rows."""

    kind = "token"

    def __init__(self, cfg: TokenEnvConfig, num_envs: int) -> None:
        self.cfg = cfg
        self.spec: TokenSpec = cached_spec("token", pool_fields(cfg), lambda: TokenSpec(cfg))
        self.life = Life(self.spec, cfg, num_envs)
        length, v = self.spec.max_length, len(self.spec.vocabulary)
        self.out = np.zeros((num_envs, length), dtype=np.int64)
        self.length = np.zeros(num_envs, dtype=np.int64)
        obs: dict[str, spaces.Space[Any]] = {
            "prompt": spaces.MultiDiscrete(np.full(self.spec.prompt_length, v, dtype=np.int64)),
            "output": spaces.MultiDiscrete(np.full(length, v, dtype=np.int64)),
            "length": spaces.Discrete(length + 1),
        }
        if cfg.history:
            obs["found"] = spaces.MultiBinary(len(self.spec.strategies))
        self.single_observation_space = spaces.Dict(obs)
        self.single_action_space = spaces.Discrete(v)

    def restart(self, row: int, gen: np.random.Generator) -> None:
        self.life.restart(row, gen)
        self.out[row] = self.length[row] = 0

    def reset_rows(self, rows: np.ndarray, explicit: np.ndarray | None) -> None:
        self.life.begin(rows, explicit)
        self.out[rows] = self.length[rows] = 0

    def step_rows(
        self, rows: np.ndarray, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        self.out[rows, self.length[rows]] = actions
        self.length[rows] += 1
        terminated = actions == self.spec.vocabulary.EOS
        truncated = ~terminated & (self.length[rows] >= self.spec.max_length)
        done = terminated | truncated
        rewards = np.zeros(rows.size)
        fin = rows[done]
        cols: dict[str, np.ndarray] = {}
        if fin.size:
            out = self.spec.outcomes(self.life.cur[fin], self.out[fin], self.length[fin])
            rewards[done], cols = self.life.finish(fin, out)
        return rewards, terminated, truncated, fin, cols

    def observe(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        cur = self.life.cur[rows]
        obs = {
            "prompt": self.spec.prompt_tokens[cur],
            "output": self.out[rows],  # fancy indexing copies
            "length": self.length[rows],
        }
        if self.cfg.history:
            obs["found"] = self.life.seen[rows, cur].astype(np.int8)
        return obs

    def episode_lines(self, row: int) -> list[str]:
        """``"ansi"`` lines of a running episode: the output written so far."""
        length = int(self.length[row])
        text = self.spec.vocabulary.decode(self.out[row, :length])
        head = f"output so far ({length}/{self.spec.max_length} tokens):"
        return [head, *(indented(text) if length else ["  (nothing yet)"])]


class TokenAPI:
    """The token env kind's extras, engine and config, mixed into the single and the vector env."""

    _engine: TokenEngine

    @property
    def vocabulary(self) -> Any:
        """The task's word-level [`Vocabulary`][seffi.tasks.Vocabulary] (the action ids)."""
        return self._engine.spec.vocabulary

    @property
    def max_length(self) -> int:
        """L: output tokens per episode, ``<eos>`` included."""
        return self._engine.spec.max_length

    def encode(self, y_text: str) -> list[int]:
        """The action sequence that writes ``y_text`` (its tokens then ``<eos>``)."""
        return [*self._engine.spec.vocabulary.encode(y_text), self._engine.spec.vocabulary.EOS]

    def sample_base_y_text(self, input_id: str, rng: np.random.Generator) -> str:
        """One draw of the task's base sampler (this env's iid base model) for ``input_id``."""
        spec = self._engine.spec
        return spec.task.sample_y_text(spec.inputs[spec.index_of(input_id)], rng)

    engine_cls = TokenEngine
    config_cls = TokenEnvConfig


class TokenEnv(TokenAPI, SeffiEnv):
    """Single token-level env; see the module docstring. Keyword arguments: `TokenEnvConfig`."""


class TokenVectorEnv(TokenAPI, SeffiVectorEnv):
    """Native vector token-level env (``num_envs`` rows); same infos as ``SyncVectorEnv(TokenEnv)``."""
