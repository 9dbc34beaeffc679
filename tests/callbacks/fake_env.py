"""A tiny env with the seffi final-info contract, independent of seffi.envs (for ingestion tests)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

STRATEGIES = ("a", "b", "c")


class FakeCoverageEnv(gym.Env):
    """Episodes of 1-3 steps; the last step's info carries a seffi-style result.

    Every finished episode is appended to ``self.log`` as (input_id, matches, valid), so tests have
    an independent record of what the monitor should have seen.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, inputs: tuple[str, ...] = ("x0", "x1"), drop_key: str | None = None) -> None:
        self.observation_space = gym.spaces.Discrete(4)
        self.action_space = gym.spaces.Discrete(3)
        self.inputs = inputs
        self.drop_key = drop_key
        self.log: list[tuple[str, tuple[str, ...], bool]] = []
        self._next = 0
        self._t = 0
        self._len = 1
        self._input = inputs[0]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if options and "input_id" in options:
            self._input = options["input_id"]
        else:
            self._input = self.inputs[self._next % len(self.inputs)]
            self._next += 1
        self._t = 0
        self._len = int(self.np_random.integers(1, 4))
        return 0, {"reset_note": 1}

    def step(self, action):
        self._t += 1
        if self._t < self._len:
            return self._t, 0.0, False, False, {"step_note": 1.0}
        k = int(self.np_random.integers(0, 4))
        matches = tuple(sorted({STRATEGIES[int(action) % 3], STRATEGIES[k % 3]} if k < 3 else ()))
        valid = bool(self.np_random.random() < 0.8)
        info = {
            "input_id": self._input,
            "y_text": "trace",
            "strategy_matches": matches,
            "valid": valid,
            "parse_ok": True,
            "num_strategies": 3,
            "sample_index": len([e for e in self.log if e[0] == self._input]),
        }
        if self.drop_key:
            info.pop(self.drop_key)
        self.log.append((self._input, matches, valid))
        return 3, 1.0, True, False, info
