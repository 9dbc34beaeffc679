"""Wrappers that add a novelty bonus to any seffi env (single or vector).

The bonus is ``bonus`` per strategy a finished trace adds to those found for its input in the
current run (which restarts at ``info["sample_index"] == 1``), read from the final-step ``info``
alone. With ``valid_only`` (default) only valid traces count: wrapping a ``reward="valid"`` env
reproduces its ``reward="novel"`` mode.

Examples:
    >>> import gymnasium as gym, seffi.envs
    >>> env = NoveltyBonus(gym.make("seffi/HanoiRouter-v0", n_inputs=2), bonus=0.5)
    >>> _ = env.reset(seed=0)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import VectorWrapper

from seffi.errors import SeffiError

_READ = ("input_id", "strategy_matches", "valid", "sample_index")


class _BonusWrapper:
    """What both wrappers share: the strategies found per (stream, input) in the current run."""

    env: Any

    def __init__(self, env: Any, bonus: float = 1.0, valid_only: bool = True) -> None:
        super().__init__(env)  # type: ignore[call-arg]
        if not np.isfinite(bonus):
            raise SeffiError(f"bonus must be finite, got {bonus!r}")
        self._bonus, self._valid_only = float(bonus), valid_only
        self._seen: dict[tuple[int, str], set[str]] = {}

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if seed is not None:  # a seeded reset restarts the env's runs, so forget what was found
            self._seen.clear()
        return self.env.reset(seed=seed, options=options)

    def _novelty(self, stream: int, input_id: str, matches: Any, valid: bool, sample_index: int) -> float:
        key = (stream, input_id)
        if sample_index == 1 or key not in self._seen:
            self._seen[key] = set()
        if self._valid_only and not valid:
            return 0.0
        new = set(matches) - self._seen[key]
        self._seen[key] |= new
        return self._bonus * len(new)


class NoveltyBonus(_BonusWrapper, gym.Wrapper[Any, Any, Any, Any]):
    """Add ``bonus`` per newly found strategy to the final reward; ``info["novelty_bonus"]`` says how much.

    Args:
        env: A seffi env (anything whose final ``info`` follows the seffi contract).
        bonus: Reward per strategy new to this input's run.
        valid_only: Count strategies of valid traces only.
    """

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "strategy_matches" in info:
            extra = self._novelty(0, *(info[k] for k in _READ))
            reward = float(reward) + extra
            info = {**info, "novelty_bonus": extra}
        return obs, reward, terminated, truncated, info


class VectorNoveltyBonus(_BonusWrapper, VectorWrapper):
    """`NoveltyBonus` for vector envs (every autoreset mode).

    ``infos["novelty_bonus"]`` (and its mask) sits beside the final-step keys, as a ``SyncVectorEnv``
    over [`NoveltyBonus`][seffi.envs.NoveltyBonus]-wrapped envs puts it.
    """

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        same_step = isinstance(infos.get("final_info"), dict)
        final = infos["final_info"] if same_step else infos
        mask = final.get("_strategy_matches")
        if mask is not None and mask.any():
            rewards = np.asarray(rewards, dtype=np.float64).copy()
            extra = np.zeros(self.num_envs)
            for i in np.flatnonzero(mask):
                extra[i] = self._novelty(int(i), *(final[k][i] for k in _READ))
            rewards += extra
            final = {**final, "novelty_bonus": extra, "_novelty_bonus": mask.copy()}
            infos = {**infos, "final_info": final} if same_step else final
        return obs, rewards, terminated, truncated, infos
