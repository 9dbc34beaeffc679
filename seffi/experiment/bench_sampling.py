"""Sampling of ``seffi bench exploration``: forced latent codes, and curves of non-exchangeable samples.

* `Sampler`: a policy's own sampling (``seffi.models.grpo.sample_completions``), or a router's
  code as the completion's first token, then the mixture's trace (`generate_forced` with the
  `FirstToken` logits processor; ``rollout_func`` for TRL's GRPOTrainer).
* `train_router`: rung 2's REINFORCE router (`seffi.experiment.learner`) trained on the mixture's
  latent-LM env, with features that carry over to prompts it never saw (`CodeRouter`).
* `ordered_eval`: valid@k and C(k) of samples drawn in runs whose order matters.
* `group_surface`: surface diversity of each group of K samples, averaged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi._seeding import seed_of
from seffi.callbacks import trl_model
from seffi.envs.router import observation_layout
from seffi.errors import SeffiError
from seffi.experiment.config import RunConfig
from seffi.experiment.ladder import latent_vec
from seffi.experiment.learner import ReinforceRouter, RouterFeatures
from seffi.experiment.runner import Runner
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


@dataclass
class CodeRouter:
    """A trained REINFORCE router over the mixture's codes, acting on any prompt's prior and run history.

    Attributes:
        router: The `ReinforceRouter` (logits ``log p(z | x) + W @ phi``).
        strategies: The task's strategies, in the order of the ``found`` features.
        budget: K, the run length it was trained on (``tried`` and ``used`` are fractions of it).
        facts: Training facts (seconds, settings, novelty per run in each round).
    """

    router: ReinforceRouter
    strategies: tuple[str, ...]
    budget: int
    facts: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.layout = observation_layout(0, self.router.n_latents, len(self.strategies))
        self.features_of = RouterFeatures(self.layout, use_input=False)
        if self.features_of.size != self.router.n_features:
            raise SeffiError(
                f"the router has {self.router.n_features} features, the history of {self.router.n_latents} "
                f"codes and {len(self.strategies)} strategies gives {self.features_of.size}"
            )

    def features(
        self, prior: np.ndarray, tried: np.ndarray, found: np.ndarray, used: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(phi, log prior)`` of runs, as `RouterFeatures` reads them from the router env's observation.

        Args:
            prior: float array, shape (R, L): each run's prompt's p(z | x).
            tried: int array, shape (R, L): times each code was tried in the run so far.
            found: bool array, shape (R, M): strategies followed by the run's valid completions so far.
            used: Samples of each run so far.

        Returns:
            float arrays, shapes (R, F) and (R, L).
        """
        lay, k = self.layout, float(self.budget)
        obs = np.zeros((len(prior), lay["used"].stop), dtype=np.float32)  # the env's dtype, as trained
        obs[:, lay["prior"]] = prior
        obs[:, lay["tried"]] = np.asarray(tried) / k
        obs[:, lay["found"]] = found
        obs[:, lay["used"]] = used / k
        return self.features_of(obs)

    def choose(
        self, prior: np.ndarray, tried: np.ndarray, found: np.ndarray, used: int, rng: np.random.Generator
    ) -> np.ndarray:
        """The next code of each run (int array, shape (R,)): `ReinforceRouter.act` on `features`."""
        return self.router.act(*self.features(prior, tried, found, used), rng)


class _NoveltyLog:
    """The training stream's strategies found per run, each round (the monitor `Runner.train` feeds)."""

    def __init__(self, runs: int) -> None:
        self.runs, self.per_round, self._new = runs, [], 0

    def update_infos(self, infos: dict[str, Any], done: np.ndarray) -> None:
        self._new += int(np.asarray(infos["num_new_strategies"])[np.asarray(done, dtype=bool)].sum())

    def maybe_log(self, step: int) -> None:
        self.per_round.append(self._new / self.runs)
        self._new = 0


def train_router(
    task: str,
    mixture_dir: Path,
    pool_ids: Sequence[str],
    input_seed: int,
    budget: int,
    learner: Any,
    seed: int,
    progress: Any,
) -> CodeRouter:
    """Rung 2's router (`seffi ladder`'s ``run_rung``): REINFORCE on the mixture's latent-LM env.

    The env (``seffi/<Name>LatentLM-v0``, ``reward="novel"``: a valid trace plus one per strategy new to
    its run) runs the mixture on the pool; `Runner.train` makes ``learner.rounds`` policy-gradient
    updates, each after ``learner.train_runs`` runs of K per pool prompt.

    Args:
        task: The task's name.
        mixture_dir: The cached mixture's folder.
        pool_ids: The pool's input ids (the env's pool must be the same prompts).
        input_seed: The pool's seed (``task.make_inputs(len(pool_ids), seed=input_seed)``).
        budget: K.
        learner: A `LearnerConfig`; ``input_features`` must be off (a pool position means nothing on
            another prompt).
        seed: Seed of the env's sampling and the router's draws.
        progress: A rich ``Progress``.

    Raises:
        SeffiError: ``input_features`` on, or an env pool that is not ``pool_ids``.
    """
    if learner.input_features:
        raise SeffiError("the bench's router reads the prior and the run's history: input_features=False")
    started = time.perf_counter()
    runs = len(pool_ids) * learner.train_runs
    env = latent_vec(
        task,
        runs,
        model_dir=str(mixture_dir),
        n_inputs=len(pool_ids),
        input_seed=input_seed,
        budget=budget,
        reward="novel",
    )
    u = env.unwrapped
    if list(u.input_ids) != list(pool_ids):
        raise SeffiError("the router's env drew another pool than the bench's")
    feats = RouterFeatures(u.obs_layout, use_input=False)
    learned = ReinforceRouter(
        u.n_latents, feats.size, lr=learner.lr, gamma=learner.gamma, baseline_decay=learner.baseline_decay
    )
    router = CodeRouter(learned, tuple(u.strategies), budget)
    runner = Runner(RunConfig(tasks=(task,), budget=budget, learner=learner), None, progress)
    log = _NoveltyLog(runs)
    bar = progress.add_task("router", total=learner.rounds, status="training")
    runner.train(learned, feats, env, log, np.random.SeedSequence(seed), bar)
    env.close()
    router.facts = {
        "seconds": time.perf_counter() - started,
        "learner": learner.model_dump(),
        "samples": runner.step,
        "new_strategies_per_run": log.per_round,
    }
    return router


class Sampler:
    """How a method's policy draws completions: its own sampling, or a router's codes then the trace.

    Args:
        policy: The `TRLPolicy` (base LM or mixture).
        codes: None (plain sampling), ``"distinct"``, ``"iid"`` or ``"router"`` (mixture).
        priors: ``{dataset prompt: p(z | x)}`` of the untrained mixture (mixture only).
        code0: Token id of code 0 (mixture only).
        budget: K (a run's length: ``"distinct"`` restarts its order every K samples, ``"router"`` its
            history).
        router: The trained router (``"router"`` only).
        labeler: ``labeler(x, text)`` -> validation result, for the router's ``found`` features
            (``"router"`` only).
        inputs: ``{dataset prompt: task input}`` of every prompt the router samples (``"router"`` only).
    """

    def __init__(
        self,
        policy: Any,
        codes: str | None = None,
        priors: dict[str, np.ndarray] | None = None,
        code0: int = 0,
        budget: int = 1,
        *,
        router: CodeRouter | None = None,
        labeler: Any = None,
        inputs: dict[str, Any] | None = None,
    ) -> None:
        if codes not in (None, "distinct", "iid", "router"):
            raise SeffiError(f"codes must be None, 'distinct', 'iid' or 'router', got {codes!r}")
        if codes is not None and not priors:
            raise SeffiError("a code sampler needs the mixture's prior of every prompt")
        if codes == "router" and (router is None or labeler is None or inputs is None):
            raise SeffiError("codes='router' needs the trained router, a labeler and the prompts' inputs")
        self.policy, self.codes, self.priors, self.code0, self.budget = (
            policy,
            codes,
            priors or {},
            code0,
            budget,
        )
        self.router, self.labeler, self.inputs = router, labeler, inputs or {}
        self.ordered = codes in ("distinct", "router")

    def decode(self, ids: Sequence[int]) -> str:
        """Trace text of completion ids (a leading code token dropped)."""
        ids = list(ids)
        if self.codes is not None and ids and ids[0] >= self.code0:
            ids = ids[1:]
        return self.policy.decode(ids)

    def prior(self, prompt: str) -> np.ndarray:
        """p(z | x) of a dataset prompt."""
        prior = self.priors.get(prompt)
        if prior is None:
            raise SeffiError(f"no mixture prior for prompt {prompt!r:.60}")
        return prior

    def pick(self, prompt: str, positions: Sequence[int], rng: np.random.Generator) -> list[int]:
        """The code of each listed sample position of ``prompt`` (position = index within its run of K)."""
        prior = self.prior(prompt)
        if self.codes == "distinct":
            order = np.argsort(-prior, kind="stable")
            return [int(order[(p % self.budget) % len(order)]) for p in positions]
        return [int(z) for z in rng.choice(len(prior), size=len(positions), p=prior / prior.sum())]

    def routed(
        self,
        model: Any,
        runs: Sequence[tuple[str, Sequence[int], int]],
        gen: Any,
        seed: int,
        rng: np.random.Generator,
    ) -> list[list[list[int]]]:
        """Runs whose codes the router chooses one sample at a time, as it acts in its env.

        Before sample t of a run the router sees the run's history (codes tried, strategies the
        validator found in its valid completions, t); the t-th samples of every run are generated in
        one batch, then labelled.

        Args:
            model: The mixture.
            runs: ``(dataset prompt, prompt token ids, length)`` of each run.
            gen: The generation config.
            seed: Seed of the generation (one per position).
            rng: The generator of the router's draws.

        Returns:
            Each run's completions (token ids, the code first).
        """
        router = self.router
        assert router is not None
        column = {s: j for j, s in enumerate(router.strategies)}
        prior = np.stack([self.prior(p) for p, _, _ in runs]) if runs else np.zeros((0, 0))
        tried = np.zeros(prior.shape, dtype=np.int64)
        found = np.zeros((len(runs), len(column)), dtype=bool)
        out: list[list[list[int]]] = [[] for _ in runs]
        for t in range(max((n for _, _, n in runs), default=0)):
            rows = [r for r, (_, _, n) in enumerate(runs) if t < n]
            codes = router.choose(prior[rows], tried[rows], found[rows], t, rng)
            first = [self.code0 + int(z) for z in codes]
            done = generate_forced(model, [runs[r][1] for r in rows], first, gen, seed=seed_of(seed, t))
            for r, z, ids in zip(rows, codes.tolist(), done, strict=True):
                out[r].append(ids)
                tried[r, z] += 1
                result = self.labeler(self.inputs[runs[r][0]], self.decode(ids))
                if result.valid:
                    found[r, [column[s] for s in result.strategy_matches]] = True
        return out

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
        if self.codes == "router":
            runs = [
                (p, ids, min(self.budget, n - s))
                for p, ids in zip(prompts, prompt_ids, strict=True)
                for s in range(0, n, self.budget)
            ]
            done = [c for run in self.routed(model, runs, gen, seed, rng) for c in run]
        else:
            rows, first = [], []
            for p, ids in zip(prompts, prompt_ids, strict=True):
                for z in self.pick(p, range(n), rng):
                    rows.append(ids)
                    first.append(self.code0 + z)
            done = generate_forced(model, rows, first, gen, seed=seed)
        return [[self.decode(done[i * n + j]) for j in range(n)] for i in range(len(prompts))]

    def rollout_func(self, seed: int) -> Callable[[list[Any], Any], dict[str, Any]]:
        """TRL's ``rollout_func``: each group's completions, their codes forced and masked from the loss.

        With ``"router"`` each group is one run of the router (its codes chosen one completion at a
        time); otherwise every code is known before generation and the batch is one generation.
        """
        calls = [0]

        def rollout(prompts: list[Any], trainer: Any) -> dict[str, Any]:
            size = int(trainer.num_generations)
            groups = split_groups([(p, (), True) for p in prompts], size)
            rng = np.random.default_rng(seed_of(seed, 2, calls[0]))
            tok = trainer.processing_class
            prompt_ids = trl_model.prompt_token_ids(tok, prompts)
            gen = trl_model.generation_config(trainer.args, trainer.model, tok)
            gen_seed = seed_of(seed, 3, calls[0])
            if self.codes == "router":
                runs = [(prompts[g[0]], prompt_ids[g[0]], len(g)) for g in groups]
                done: list[list[int]] = [[] for _ in prompts]
                for g, run in zip(groups, self.routed(trainer.model, runs, gen, gen_seed, rng), strict=True):
                    for i, ids in zip(g, run, strict=True):
                        done[i] = ids
            else:
                first = [0] * len(prompts)
                for g in groups:
                    for i, z in zip(g, self.pick(prompts[g[0]], range(len(g)), rng), strict=True):
                        first[i] = self.code0 + z
                done = generate_forced(trainer.model, prompt_ids, first, gen, seed=gen_seed)
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
