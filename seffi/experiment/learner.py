"""A learned exploration router: a small numpy REINFORCE policy over latent codes.

This is the seed's "learned latent factorization on synthetic data" rung. A router env
(``seffi/<Name>Router-v0``) turns a latent code ``z`` into a trace through a hidden, noisy latent ->
strategy mapping; the iid base model draws ``z`` from the router prior, so it keeps re-drawing the
common latents. This router learns, from the env's *novelty reward* alone (the number of strategies a
sample adds to its input's run), to spread its budget over latents that reveal new strategies.

Policy. A softmax over the ``Z`` latents whose logits are the base model's plus a learned linear
correction:

```text
pi(z | obs) = softmax(log prior_x + W @ phi(obs))[z],      W: float array, shape (Z, F)
```

``W`` starts at zero, so an untrained router *is* the iid base model. ``phi`` (shape ``(F,)``) is read
from the router env's observation (its ``obs_layout``) and holds the *per-input history* of the
current run — which latents were already tried, which strategies already found, the fraction of the
budget spent — and, optionally, the one-hot of the input's pool position. Every latent has its own
weight on "latent j was tried", so the policy can learn ``W[z, tried_z] << 0`` (do not repeat
yourself), which a history-free sampler cannot express; with the input one-hot it can also learn,
per input of the fixed pool, which latents tend to reveal strategies the others miss (the latent
factorization). That is trained and evaluated on the same fixed pool: it is exploration of known
inputs, not generalisation to unseen ones.

Learning. REINFORCE with a baseline (Williams 1992): for each run (one input's ``K`` one-step
episodes) ``G_t = sum_{t' >= t} gamma^(t'-t) r_t'`` and:

```text
W += lr * mean_runs sum_t (G_t - b_t) * (onehot(a_t) - pi(. | obs_t)) outer phi_t
```

with ``b_t`` a running mean of ``G_t`` per sample index ``t`` (the novelty expected at step ``t``
falls with ``t``, so one scalar baseline would bias early steps up and late steps down). ``gamma``
defaults to 0: a repeat is already punished by its own zero reward, and immediate rewards keep the
variance low enough for a few dozen updates to suffice.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

#: Smallest prior probability used inside ``log`` (the env's priors are strictly positive anyway).
_TINY = 1e-12


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


class RouterFeatures:
    """Turns router-env observations into ``(phi, base_logits)`` for `ReinforceRouter`.

    Layout of ``phi`` (shape ``(F,)``): ``tried`` (1.0 for each latent already tried in this run),
    ``found`` (1.0 for each strategy already found), ``used`` (fraction of the budget spent) and, with
    ``use_input``, the one-hot of the input's pool position.

    Args:
        obs_layout: The env's ``obs_layout`` (name -> slice of the flat observation); it must hold the
            history (``history=True``, the router env's default).
        use_input: Append the input one-hot (lets the router learn each pool input's latents).

    Raises:
        ValueError: The layout lacks the history or the prior.
    """

    def __init__(self, obs_layout: Mapping[str, slice], *, use_input: bool = True) -> None:
        missing = [k for k in ("prior", "tried", "found", "used", "input") if k not in obs_layout]
        if missing:
            raise ValueError(f"the router observation lacks {missing}; make the env with history=True")
        self.layout = dict(obs_layout)
        self.use_input = bool(use_input)
        width = {k: s.stop - s.start for k, s in self.layout.items()}
        self.n_latents = width["prior"]
        self.size = width["tried"] + width["found"] + 1 + (width["input"] if use_input else 0)

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Features and base-model logits of a batch of observations.

        Args:
            obs: float array, shape (B, D): flat router-env observations.

        Returns:
            ``(phi, base)``: float arrays, shapes (B, F) and (B, Z); ``base = log prior``.
        """
        obs = np.asarray(obs, dtype=np.float64)
        if obs.ndim == 1:
            obs = obs[None, :]
        lay = self.layout
        parts = [obs[:, lay["tried"]] > 0, obs[:, lay["found"]], obs[:, lay["used"]]]
        if self.use_input:
            parts.append(obs[:, lay["input"]])
        phi = np.concatenate([np.asarray(p, dtype=np.float64) for p in parts], axis=1)
        base = np.log(np.maximum(obs[:, lay["prior"]], _TINY))
        return phi, base


class ReinforceRouter:
    """Softmax policy over latents, ``log prior + W @ phi``, trained with REINFORCE and a per-step baseline.

    Args:
        n_latents: Z, the number of latent codes (actions).
        n_features: F, the length of ``phi``.
        lr: Step size of the policy-gradient update.
        gamma: Discount of future novelty in the return (0 = immediate reward only).
        baseline_decay: Exponential-moving-average factor of the per-step baseline ``b_t``.
    """

    def __init__(
        self,
        n_latents: int,
        n_features: int,
        *,
        lr: float = 0.5,
        gamma: float = 0.0,
        baseline_decay: float = 0.9,
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
        self.baseline = np.zeros(0)
        self.updates = 0

    def probs(self, phi: np.ndarray, base: np.ndarray) -> np.ndarray:
        """pi(. | obs).

        Args:
            phi: float array, shape (..., F).
            base: float array, shape (..., Z): the base model's logits (``log prior``).

        Returns:
            float array, shape (..., Z).
        """
        # einsum, not @: a matmul goes to BLAS, whose kernel (chosen per CPU) orders the sums its own
        # way, so the trained weights, and seffi run's report, would differ between machines.
        logits = np.asarray(base, dtype=np.float64) + np.einsum("...f,zf->...z", phi, self.weights)
        return softmax(logits)

    def act(self, phi: np.ndarray, base: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One latent per row, drawn from pi(. | obs) by inverse CDF (one uniform per row).

        Args:
            phi: float array, shape (B, F).
            base: float array, shape (B, Z).
            rng: The generator of the draws.

        Returns:
            int array, shape (B,).
        """
        cdf = np.cumsum(self.probs(phi, base), axis=1)
        u = rng.random((cdf.shape[0], 1)) * cdf[:, -1:]
        return np.minimum((cdf <= u).sum(axis=1), self.n_latents - 1).astype(np.int64)

    def returns(self, rewards: np.ndarray) -> np.ndarray:
        """Discounted returns ``G_t`` along the last axis: float array, same shape as ``rewards``."""
        r = np.asarray(rewards, dtype=np.float64)
        g = np.zeros_like(r)
        acc = np.zeros(r.shape[:-1])
        for t in range(r.shape[-1] - 1, -1, -1):
            acc = r[..., t] + self.gamma * acc
            g[..., t] = acc
        return g

    def update(self, phi: np.ndarray, base: np.ndarray, actions: np.ndarray, rewards: np.ndarray) -> float:
        """One policy-gradient step from a batch of ``R`` runs of ``T`` samples each.

        The baseline used is the one *before* this batch (the batch's own mean would correlate
        baseline and action and bias the gradient).

        Args:
            phi: float array, shape (R, T, F): features before each sample.
            base: float array, shape (R, T, Z): base logits before each sample.
            actions: int array, shape (R, T): the latents drawn.
            rewards: float array, shape (R, T): the rewards received.

        Returns:
            The mean return of a run (total reward), before the update.
        """
        phi = np.asarray(phi, dtype=np.float64)
        actions = np.asarray(actions, dtype=np.int64)
        R, T = actions.shape
        if phi.shape[:2] != (R, T) or np.shape(base)[:2] != (R, T) or np.shape(rewards) != (R, T):
            raise ValueError("phi, base, actions and rewards must share their first two dimensions (R, T)")
        if R == 0 or T == 0:
            return 0.0
        if self.baseline.size < T:
            self.baseline = np.concatenate([self.baseline, np.zeros(T - self.baseline.size)])
        g = self.returns(rewards)  # (R, T)
        adv = g - self.baseline[:T]
        # d log pi(a|obs) / dW = (onehot(a) - pi) outer phi
        score = -self.probs(phi, base)  # (R, T, Z)
        taken = actions[..., None]
        np.put_along_axis(score, taken, np.take_along_axis(score, taken, 2) + 1.0, 2)
        grad = np.einsum("rtz,rtf->zf", score * adv[..., None], phi)
        self.weights += self.lr * grad / R
        # The first update sets the baseline outright; afterwards an EMA tracks the improving policy.
        d = self.baseline_decay if self.updates else 0.0
        self.baseline[:T] = d * self.baseline[:T] + (1 - d) * g.mean(axis=0)
        self.updates += 1
        return float(np.asarray(rewards, dtype=np.float64).sum(axis=1).mean())

    def state_dict(self) -> dict[str, object]:
        """Weights and baseline as JSON-ready lists (saved in the run folder)."""
        return {
            "weights": self.weights.tolist(),
            "baseline": self.baseline.tolist(),
            "updates": self.updates,
            "lr": self.lr,
            "gamma": self.gamma,
            "baseline_decay": self.baseline_decay,
        }
