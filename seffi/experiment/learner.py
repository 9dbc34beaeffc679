"""A learned exploration router: a small numpy REINFORCE policy over latent codes.

This is the seed's "learned latent factorization on synthetic data" rung. A router env turns a
latent code ``z`` into a trace through a hidden, noisy latent -> strategy mapping; the base model
samples ``z`` from a fixed prior, so it keeps re-drawing the common latents. The router here learns,
from the *novelty reward* alone (1 when a sample adds a strategy not yet seen for its input), to
spread its budget over latents that reveal new strategies.

Policy. A linear softmax over the ``Z`` latents::

    logits = W @ phi,   pi(z | phi) = softmax(logits / 1)[z],   W: float array, shape (Z, F)

where ``phi`` (shape ``(F,)``) concatenates a bias, optional input features, and the *per-input
history*: which latents were already tried and which strategies were already found for this input.
Because every latent has its own weight on "latent j was tried", the policy can learn
``W[z, tried_z] << 0`` — do not repeat yourself — and ``W[z, found_s] < 0`` for latents that tend to
produce an already-found strategy ``s``. That is all an exploration router needs, and it is what a
history-free policy (like the base sampler) cannot express.

Learning. REINFORCE with a baseline (Williams 1992): for each sample-sequence of one input (an
"episode" of ``K`` one-step env episodes), ``G_t = sum_{t' >= t} gamma^(t'-t) r_t'`` and::

    W += lr * mean_episodes sum_t (G_t - b_t) * (onehot(a_t) - pi(. | phi_t)) outer phi_t

with ``b_t`` a running mean of ``G_t`` per sample index ``t`` (the novelty expected at step ``t``
falls with ``t``, so one scalar baseline would bias early steps up and late steps down). ``gamma``
defaults to 0: a repeat is already punished by its own zero reward, and immediate rewards keep the
variance low enough for a few hundred updates to suffice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


def softmax(logits: np.ndarray) -> np.ndarray:
    """Numerically stable softmax over the last axis.

    Args:
        logits: float array, shape (..., Z).

    Returns:
        float array, shape (..., Z), rows summing to 1.
    """
    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


class HistoryFeatures:
    """Builds ``phi`` for one input from its history of latents tried and strategies found.

    Layout of ``phi`` (shape ``(F,)``, ``F = 1 + n_input_features + Z + M + 1``): a bias 1, the input
    features, ``tried`` (1.0 for each latent already tried on this input), ``found`` (1.0 for each
    strategy already found) and the fraction of the budget already spent.

    Args:
        n_latents: Z, the number of latent codes.
        strategies: The declared strategy ids (M of them), in a fixed order.
        n_input_features: Length of the optional per-input feature vector.
    """

    def __init__(self, n_latents: int, strategies: Sequence[str], n_input_features: int = 0) -> None:
        if n_latents < 1:
            raise ValueError(f"n_latents must be >= 1, got {n_latents}")
        if n_input_features < 0:
            raise ValueError(f"n_input_features must be >= 0, got {n_input_features}")
        self.n_latents = int(n_latents)
        self.strategies = tuple(strategies)
        self._index = {s: i for i, s in enumerate(self.strategies)}
        self.n_input_features = int(n_input_features)
        self.size = 1 + self.n_input_features + self.n_latents + len(self.strategies) + 1

    def new_history(self) -> History:
        """An empty per-input history (nothing tried, nothing found)."""
        return History(
            tried=np.zeros(self.n_latents, dtype=np.float64),
            found=np.zeros(len(self.strategies), dtype=np.float64),
        )

    def __call__(self, history: History, budget: int, input_features: np.ndarray | None = None) -> np.ndarray:
        """``phi`` for the next sample of an input.

        Args:
            history: That input's history so far.
            budget: K, the per-input budget (normalises the "budget spent" feature).
            input_features: float array, shape (n_input_features,), or None when there are none.

        Returns:
            float array, shape (F,).
        """
        x = np.zeros(self.n_input_features) if input_features is None else np.asarray(input_features, float)
        if x.shape != (self.n_input_features,):
            raise ValueError(f"input_features must have shape ({self.n_input_features},), got {x.shape}")
        spent = history.steps / max(budget, 1)
        return np.concatenate(([1.0], x, history.tried, history.found, [spent]))

    def record(self, history: History, latent: int, matches: Sequence[str]) -> float:
        """Add one sample to ``history``; return its novelty reward (1.0 when it found a new strategy).

        Unknown strategy ids raise: a silently dropped match would under-count novelty.
        """
        new = 0.0
        for s in matches:
            try:
                i = self._index[s]
            except KeyError:
                raise ValueError(f"unknown strategy {s!r}; known: {self.strategies}") from None
            if history.found[i] == 0.0:
                history.found[i] = 1.0
                new = 1.0
        history.tried[int(latent)] = 1.0
        history.steps += 1
        return new


@dataclass
class History:
    """One input's exploration history (mutable; owned by the loop that samples the input).

    Attributes:
        tried: float array, shape (Z,): 1.0 for latents already tried.
        found: float array, shape (M,): 1.0 for strategies already found.
        steps: Samples spent on this input so far.
    """

    tried: np.ndarray
    found: np.ndarray
    steps: int = 0


@dataclass
class Episode:
    """One input's sample sequence, as the learner needs it.

    Attributes:
        features: float array, shape (T, F): ``phi`` before each sample.
        actions: int array, shape (T,): the latent chosen at each sample.
        rewards: float array, shape (T,): the novelty reward of each sample.
    """

    features: list[np.ndarray] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)

    def add(self, phi: np.ndarray, action: int, reward: float) -> None:
        self.features.append(phi)
        self.actions.append(int(action))
        self.rewards.append(float(reward))


class ReinforceRouter:
    """Linear softmax policy over latents trained with REINFORCE and a per-step baseline.

    Args:
        n_latents: Z, the number of latent codes (actions).
        n_features: F, the length of ``phi``.
        lr: Step size of the policy-gradient update.
        gamma: Discount of future novelty in the return (0 = immediate reward only).
        baseline_decay: Exponential-moving-average factor of the per-step baseline ``b_t``.
        prior: float array, shape (Z,), or None: initial policy (the router prior); the bias column of
            ``W`` starts at ``log(prior)`` so an untrained router *is* the base sampler.
        seed: Seed of the generator used by :meth:`act`.
    """

    def __init__(
        self,
        n_latents: int,
        n_features: int,
        *,
        lr: float = 0.5,
        gamma: float = 0.0,
        baseline_decay: float = 0.9,
        prior: np.ndarray | None = None,
        seed: int | np.random.SeedSequence | None = 0,
    ) -> None:
        if n_latents < 1 or n_features < 1:
            raise ValueError(f"n_latents and n_features must be >= 1, got {n_latents}, {n_features}")
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        if not 0.0 <= gamma <= 1.0 or not 0.0 <= baseline_decay < 1.0:
            raise ValueError(f"need 0 <= gamma <= 1, 0 <= baseline_decay < 1; got {gamma}, {baseline_decay}")
        self.n_latents, self.n_features = int(n_latents), int(n_features)
        self.lr, self.gamma, self.baseline_decay = float(lr), float(gamma), float(baseline_decay)
        self.weights = np.zeros((self.n_latents, self.n_features))
        if prior is not None:
            p = np.asarray(prior, dtype=np.float64)
            if p.shape != (self.n_latents,) or np.any(p <= 0) or abs(p.sum() - 1) > 1e-6:
                raise ValueError(f"prior must be a positive probability vector of length {self.n_latents}")
            self.weights[:, 0] = np.log(p)  # column 0 of phi is the bias 1
        self.baseline = np.zeros(0)
        self.updates = 0
        self.rng = np.random.default_rng(seed)

    def probs(self, phi: np.ndarray) -> np.ndarray:
        """pi(. | phi): float array, shape (Z,), for phi of shape (F,); or (B, Z) for phi of shape (B, F)."""
        return softmax(np.asarray(phi, dtype=np.float64) @ self.weights.T)

    def act(self, phi: np.ndarray, rng: np.random.Generator | None = None) -> int:
        """Sample a latent from pi(. | phi) (``rng`` defaults to the router's own generator)."""
        p = self.probs(phi)
        return int((rng or self.rng).choice(self.n_latents, p=p))

    def returns(self, rewards: np.ndarray) -> np.ndarray:
        """Discounted returns ``G_t`` of one episode: float array, shape (T,)."""
        g = np.zeros_like(rewards, dtype=np.float64)
        acc = 0.0
        for t in range(len(rewards) - 1, -1, -1):
            acc = rewards[t] + self.gamma * acc
            g[t] = acc
        return g

    def update(self, episodes: Sequence[Episode]) -> float:
        """One policy-gradient step from a batch of episodes; returns the mean episode return.

        The baseline used for an episode is the one *before* this batch (using the batch's own mean
        would correlate baseline and action and bias the gradient).
        """
        episodes = [e for e in episodes if e.actions]
        if not episodes:
            return 0.0
        horizon = max(len(e.actions) for e in episodes)
        if self.baseline.size < horizon:
            self.baseline = np.concatenate([self.baseline, np.zeros(horizon - self.baseline.size)])
        grad = np.zeros_like(self.weights)
        g_sum = np.zeros(horizon)
        g_cnt = np.zeros(horizon)
        totals = []
        for e in episodes:
            phi = np.asarray(e.features, dtype=np.float64)  # (T, F)
            a = np.asarray(e.actions, dtype=np.int64)  # (T,)
            r = np.asarray(e.rewards, dtype=np.float64)  # (T,)
            g = self.returns(r)
            t = np.arange(len(a))
            adv = g - self.baseline[t]
            # d log pi(a|phi) / dW = (onehot(a) - pi) outer phi
            score = -self.probs(phi)
            score[t, a] += 1.0
            grad += (score * adv[:, None]).T @ phi
            g_sum[t] += g
            g_cnt[t] += 1
            totals.append(r.sum())
        self.weights += self.lr * grad / len(episodes)
        seen = g_cnt > 0
        fresh = g_sum[seen] / g_cnt[seen]
        # The first update sets the baseline outright; afterwards an EMA tracks the improving policy.
        d = self.baseline_decay if self.updates else 0.0
        self.baseline[seen] = d * self.baseline[seen] + (1 - d) * fresh
        self.updates += 1
        return float(np.mean(totals))

    def state_dict(self) -> dict[str, object]:
        """Weights and baseline as JSON-ready lists (for the run folder)."""
        return {
            "weights": self.weights.tolist(),
            "baseline": self.baseline.tolist(),
            "updates": self.updates,
            "lr": self.lr,
            "gamma": self.gamma,
            "baseline_decay": self.baseline_decay,
        }
