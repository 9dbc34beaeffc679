"""Sampling of ``seffi bench exploration``: forced latent codes, and curves of non-exchangeable samples.

* `Sampler`: a policy's own sampling (``seffi.models.grpo.sample_completions``), or a router's
  code as the completion's first token, then the mixture's trace (`generate_forced` with the
  `FirstToken` logits processor; ``rollout_func`` for TRL's GRPOTrainer).
* `ordered_eval`: valid@k and C(k) of samples drawn in runs whose order matters.
* `group_surface`: surface diversity of each group of K samples, averaged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi._seeding import seed_of
from seffi.callbacks import trl_model
from seffi.errors import SeffiError
from seffi.group_scoring import split_groups
from seffi.models import grpo
from seffi.models.surface import SURFACE_KEYS, surface_metrics

if TYPE_CHECKING:  # passk imports transformers: only when a bench runs, not for `seffi bench --help`
    from seffi.models.passk import EvalResult

# -- sampling -------------------------------------------------------------------------------------------


class FirstToken:
    """A logits processor forcing each row's first generated token (``codes[r]``) and nothing after."""

    def __init__(self, codes: Sequence[int], prompt_width: int) -> None:
        import torch

        self.codes = torch.tensor(list(codes), dtype=torch.long)
        self.width = prompt_width

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if input_ids.shape[1] != self.width:
            return scores
        forced = scores.new_full(scores.shape, float("-inf"))
        forced[range(len(self.codes)), self.codes] = 0.0
        return forced


def generate_forced(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    first: Sequence[int],
    gen: Any,
    *,
    seed: int,
    batch_size: int = 256,
) -> list[list[int]]:
    """One completion per prompt row whose first token is ``first[row]`` (eos kept, as TRL keeps it).

    Rows are left-padded with ``gen.pad_token_id``; seeded inside ``torch.random.fork_rng`` so the
    caller's random stream is left alone.
    """
    import torch
    from transformers import LogitsProcessorList

    eos = set(gen.eos_token_id if isinstance(gen.eos_token_id, list) else [gen.eos_token_id])
    out: list[list[int]] = []
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(seed)
        for b in range(0, len(prompt_ids), batch_size):
            ids, mask = trl_model.left_padded(prompt_ids[b : b + batch_size], gen.pad_token_id)
            width = ids.shape[1]
            procs = LogitsProcessorList([FirstToken(first[b : b + batch_size], width)])
            got = model.generate(
                input_ids=ids, attention_mask=mask, generation_config=gen, logits_processor=procs
            )
            for row in got[:, width:].tolist():
                cut = next((j for j, t in enumerate(row) if t in eos), len(row))
                out.append(row[: cut + 1])
    return out


class Sampler:
    """How a method's policy draws completions: its own sampling, or a router's codes then the trace.

    Args:
        policy: The `TRLPolicy` (base LM or mixture).
        codes: None (plain sampling), ``"distinct"`` or ``"iid"`` (mixture).
        priors: ``{dataset prompt: p(z | x)}`` of the untrained mixture (mixture only).
        code0: Token id of code 0 (mixture only).
        budget: K (a run's length: ``"distinct"`` restarts its order every K samples).
    """

    def __init__(
        self,
        policy: Any,
        codes: str | None = None,
        priors: dict[str, np.ndarray] | None = None,
        code0: int = 0,
        budget: int = 1,
    ) -> None:
        if codes not in (None, "distinct", "iid"):
            raise SeffiError(f"codes must be None, 'distinct' or 'iid', got {codes!r}")
        if codes is not None and not priors:
            raise SeffiError("a code sampler needs the mixture's prior of every prompt")
        self.policy, self.codes, self.priors, self.code0, self.budget = (
            policy,
            codes,
            priors or {},
            code0,
            budget,
        )
        self.ordered = codes == "distinct"

    def decode(self, ids: Sequence[int]) -> str:
        """Trace text of completion ids (a leading code token dropped)."""
        ids = list(ids)
        if self.codes is not None and ids and ids[0] >= self.code0:
            ids = ids[1:]
        return self.policy.decode(ids)

    def pick(self, prompt: str, positions: Sequence[int], rng: np.random.Generator) -> list[int]:
        """The code of each listed sample position of ``prompt`` (position = index within its run of K)."""
        prior = self.priors.get(prompt)
        if prior is None:
            raise SeffiError(f"no mixture prior for prompt {prompt!r:.60}")
        if self.codes == "distinct":
            order = np.argsort(-prior, kind="stable")
            return [int(order[(p % self.budget) % len(order)]) for p in positions]
        return [int(z) for z in rng.choice(len(prior), size=len(positions), p=prior / prior.sum())]

    def texts(
        self, model: Any, tokenizer: Any, prompts: Sequence[str], n: int, gen: Any, seed: int
    ) -> list[list[str]]:
        """``n`` completions of each dataset prompt as trace texts (runs of K consecutive samples)."""
        if self.codes is None:
            return grpo.sample_completions(
                model, tokenizer, list(prompts), n, gen, seed=seed, decode=self.policy.decode
            )
        rng = np.random.default_rng(seed_of(seed, 1))
        prompt_ids = trl_model.prompt_token_ids(tokenizer, list(prompts))
        rows, first = [], []
        for p, ids in zip(prompts, prompt_ids, strict=True):
            for z in self.pick(p, range(n), rng):
                rows.append(ids)
                first.append(self.code0 + z)
        done = generate_forced(model, rows, first, gen, seed=seed)
        return [[self.decode(done[i * n + j]) for j in range(n)] for i in range(len(prompts))]

    def rollout_func(self, seed: int) -> Callable[[list[Any], Any], dict[str, Any]]:
        """TRL's ``rollout_func``: each group's completions, their codes forced and masked from the loss."""
        calls = [0]

        def rollout(prompts: list[Any], trainer: Any) -> dict[str, Any]:
            size = int(trainer.num_generations)
            records = [(p, (), True) for p in prompts]
            rng = np.random.default_rng(seed_of(seed, 2, calls[0]))
            first = [0] * len(prompts)
            for group in split_groups(records, size):
                for i, z in zip(group, self.pick(prompts[group[0]], range(len(group)), rng), strict=True):
                    first[i] = self.code0 + z
            tok = trainer.processing_class
            prompt_ids = trl_model.prompt_token_ids(tok, prompts)
            gen = trl_model.generation_config(trainer.args, trainer.model, tok)
            done = generate_forced(trainer.model, prompt_ids, first, gen, seed=seed_of(seed, 3, calls[0]))
            calls[0] += 1
            return {
                "prompt_ids": prompt_ids,
                "completion_ids": done,
                "logprobs": None,
                "env_mask": [[0] + [1] * (len(c) - 1) for c in done],  # the router's code: not trained
            }

        return rollout


# -- held-out evaluation --------------------------------------------------------------------------------


def ordered_eval(
    sets: dict[str, Sequence[frozenset[str]]],
    valid: dict[str, Sequence[bool]],
    strategies: Sequence[str],
    run: int,
) -> EvalResult:
    """valid@k and C(k) of a policy whose samples come in runs of ``run`` that are not exchangeable.

    Each prompt's n samples are n / run runs in sampling order. C(k) and valid@k are the share
    covered (solved) by the first k samples of the runs laid end to end, averaged over the n / run
    cyclic orders of the runs: for k <= run the mean over runs of their first k samples (unbiased for
    the policy's own C(k)), beyond it whole runs followed by part of the next.

    Raises:
        SeffiError: No prompt, unequal sample counts, or n not a multiple of ``run``.
    """
    ids = sorted(sets)
    if not ids:
        raise SeffiError("no prompts to evaluate")
    n = len(sets[ids[0]])
    if n < 1 or n % run or any(len(sets[i]) != n or len(valid[i]) != n for i in ids):
        raise SeffiError(f"every prompt needs the same number n of samples, a multiple of {run}")
    from seffi.models.passk import match_tensor

    x = match_tensor(sets, ids, strategies)
    v = np.array([[bool(b) for b in valid[i]] for i in ids], dtype=bool)
    runs = n // run
    order = np.array(
        [np.concatenate([np.arange(run) + ((t + j) % runs) * run for j in range(runs)]) for t in range(runs)]
    )  # (runs, n): sample index by position
    cov = np.logical_or.accumulate(x[:, order], axis=2).mean(axis=3).mean(axis=1)  # (prompts, n)
    vk = np.logical_or.accumulate(v[:, order], axis=2).mean(axis=1)
    c = v.sum(axis=1)
    from seffi.models.passk import EvalResult

    return EvalResult(
        n=n,
        valid_at_k=vk.mean(axis=0),
        coverage=cov.mean(axis=0),
        valid_rate=float(c.sum() / v.size),
        solvable=float((c > 0).mean()),
        per_prompt_coverage=cov,
        prompt_ids=ids,
        per_prompt_valid_at_k=vk,
        sample_sets=None,
    )


def group_surface(texts: Sequence[Sequence[str]], budget: int) -> dict[str, float]:
    """Surface metrics of every group of K consecutive samples of each prompt, averaged over groups."""
    rows = [surface_metrics(list(row[s : s + budget])) for row in texts for s in range(0, len(row), budget)]
    return {k: float(np.mean([r[k] for r in rows])) if rows else float("nan") for k in SURFACE_KEYS}
