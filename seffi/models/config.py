"""Settings of the base LM and of the latent mixture (no torch import here: envs validate them cheaply).

A model is a pure function of its config, its seed and the library stack that trains it
(single-threaded CPU training), so the cache folder of a model is named by a hash of exactly these
fields and of `seffi._cache.numerics_stack` (`LMConfig.base_key`, `LMConfig.mixture_key`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from seffi import _cache
from seffi._seeding import stable_id

#: Bump when training code changes what a config produces, so stale cache folders are not reused.
MODEL_FORMAT = 1

#: Mixture fields left out of the cache key while unset, so a config without them keeps its key.
_LATE_OPTIONAL = ("max_rows",)
#: Fields whose zero value means "off"; left out of the key while 0, so the key is the one without them.
_LATE_ZERO = ("warm_epochs",)
#: Fields added later with a default that differs from what older caches used.
_LATE_DEFAULTS = {
    "mode": "batch",
    "trainable": "all",
    "code_slot": "after_sep",
    "init": "random",
    "prior": "global",
}


class MixtureConfig(BaseModel):
    """Hard-EM mixture of generators over latent codes (Shen et al. 2019 style).

    Attributes:
        n_codes: Number of latent codes L (``None``: twice the task's strategy count).
        mode: ``"online"`` (E-step per minibatch, then one gradient step: codes specialise within an
            epoch) or ``"batch"`` (E-step over all rows, then an M-step of ``epochs_per_round``).
        trainable: What the M-steps update: ``"all"`` (every weight of the warm-started copy) or
            ``"codes"`` (only the L code-token embeddings; the base LM's weights stay frozen, so each code
            is a learned one-token prompt steering the base LM and the mixture cannot unlearn validity).
        code_slot: Where the code token goes. ``"after_sep"``: ``prompt <sep> <z> trace`` (every trace
            token sits one position later than in the base LM, which the copy relearns). ``"sep"``:
            ``prompt <z> trace``: the code replaces the separator and each code's embedding starts as
            the separator's (plus ``code_init_std`` noise), so the untrained mixture is the base LM.
        init: The codes of the warm-up (``warm_epochs``): ``"random"`` (uniform per row) or ``"kmeans"``
            (k-means with L clusters of the base LM's trace representations, the mean last hidden state
            over the trace, so EM starts from a partition by what the trace does).
        prior: The latent prior. ``"global"``: the codes' assignment frequencies, one distribution for
            every input. ``"input"``: ``p(z | x)``, learned by the mixture itself (the code token is part
            of every M-step's target) and read from its logits at the code position; the E-step still
            scores ``log p(y | x, z)`` under a uniform prior. The strategies a trace can follow depend
            on the input, so under ``p(z | x)`` a code stays rare where its strategy is infeasible and
            ancestral sampling is the joint the LM was trained on.
        warm_epochs: Before EM, passes of the copied base LM (every weight) over the rows with a code drawn
            uniformly at random per row, so the model learns to read a trace after a code token while
            the codes carry no information (0: no warm-up).
        warm_lr: Peak learning rate of the warm-up (cosine schedule).
        rounds: EM rounds (each: E-step, then M-step).
        epochs_per_round: Passes over the rows in each M-step.
        folds: Cross-fitting folds (by input id). With 2 or more, a row's E-step scores it with a model
            whose M-steps never saw that row's input; 1 scores every row with the one model trained on it.
        final_epochs: Passes of model 0 over all rows with the last assignments, learning rate ``lr``
            decaying by a cosine (0: none); online EM stops on a constant rate, and this pass settles it.
        code_init_std: Standard deviation of the fresh code-token embeddings (GPT-2's init scale by
            default).
        capacity: Most rows a code may take in an E-step, as a multiple of R / L (1: equal shares; 0: no
            limit, plain argmax as in Shen et al.).
        revive_below: A code whose share of rows falls below this fraction is re-seeded with a random
            half of the largest code's rows (the usual guard against dead mixture components).
        lr: Learning rate of the M-steps (AdamW, constant).
        max_rows: Learn the mixture on this many training rows (a seeded random subset; ``None``: all).
            The E-step scores every row under every code, L forward passes per row, so it dominates
            the cost of EM.
        seed: Seed of the code embeddings, shuffling and revivals.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="after")
    def _kmeans_needs_warm_up(self) -> MixtureConfig:
        if self.init == "kmeans" and self.warm_epochs <= 0:
            raise ValueError("init='kmeans' needs warm_epochs > 0 (the warm-up teaches the clusters' codes)")
        return self

    n_codes: int | None = Field(None, ge=2, le=64)
    mode: Literal["online", "batch"] = "online"
    trainable: Literal["all", "codes"] = "all"
    code_slot: Literal["after_sep", "sep"] = "after_sep"
    init: Literal["random", "kmeans"] = "random"
    prior: Literal["global", "input"] = "global"
    warm_epochs: float = Field(0.0, ge=0.0, le=20.0)
    warm_lr: float = Field(5e-4, gt=0.0, le=1.0)
    rounds: int = Field(8, ge=1, le=50)
    epochs_per_round: float = Field(1.0, gt=0.0, le=20.0)
    folds: int = Field(1, ge=1, le=5)
    final_epochs: float = Field(0.0, ge=0.0, le=20.0)
    code_init_std: float = Field(0.02, ge=0.0, le=10.0)
    capacity: float = Field(2.0, ge=0.0, le=64.0)
    revive_below: float = Field(0.02, ge=0.0, lt=0.5)
    lr: float = Field(1e-3, gt=0.0, le=1.0)
    max_rows: int | None = Field(None, ge=1, le=10_000_000)
    seed: int = Field(0, ge=0)


class LMConfig(BaseModel):
    """A task's base LM: data, architecture and SFT settings; ``mixture`` configures the latent model.

    Attributes:
        task: Registered task name.
        task_config: Overrides of the task's config (its base law: skew, invalid and off-strategy rates).
        n_train_inputs: Distinct training inputs (thousands: with few, the model memorises inputs).
        rows_per_input: Rows drawn per training input with the task's base law.
        data_seed: Seed of ``task.training_rows``.
        arch: ``"gpt2"`` or ``"llama"`` (a transformers config built from the fields below).
        d_model: Hidden width.
        n_layer: Transformer blocks.
        n_head: Attention heads.
        epochs: SFT passes over the rows.
        batch_size: Rows per optimiser step.
        lr: Peak learning rate (AdamW, linear warm-up then cosine decay to 10 %).
        weight_decay: AdamW weight decay.
        seed: Seed of initialisation and shuffling.
        mixture: The latent mixture's settings.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    task_config: dict[str, Any] | None = None
    n_train_inputs: int = Field(4000, ge=1, le=1_000_000)
    rows_per_input: int = Field(5, ge=1, le=10_000)
    data_seed: int = Field(0, ge=0)
    arch: Literal["gpt2", "llama"] = "gpt2"
    d_model: int = Field(128, ge=8, le=1024)
    n_layer: int = Field(2, ge=1, le=24)
    n_head: int = Field(4, ge=1, le=32)
    epochs: float = Field(2.0, gt=0.0, le=100.0)
    batch_size: int = Field(64, ge=1, le=4096)
    lr: float = Field(2e-3, gt=0.0, le=1.0)
    weight_decay: float = Field(0.01, ge=0.0, le=1.0)
    seed: int = Field(0, ge=0)
    mixture: MixtureConfig = MixtureConfig()

    def sft_settings(self) -> dict[str, Any]:
        """The keyword arguments of ``TaskLM.train`` for SFT: epochs, batch size, lr, seed, weight decay."""
        return self.model_dump(include={"epochs", "batch_size", "lr", "seed", "weight_decay"})

    def base_fields(self) -> dict[str, Any]:
        """Everything the base LM depends on (the mixture settings excluded), the library stack included."""
        return {
            "format": MODEL_FORMAT,
            "stack": _cache.numerics_stack(),
            **self.model_dump(mode="json", exclude={"mixture"}),
        }

    def base_key(self) -> str:
        """Cache key of the base LM: a hash of (task, config, seed, `seffi._cache.numerics_stack`)."""
        return f"{self.task}-base-{stable_id(self.base_fields(), length=16)}"

    def mixture_key(self) -> str:
        """Cache key of the mixture: the base LM's fields (the library stack included) plus the mixture's."""
        mixture = self.mixture.model_dump(mode="json")
        for late in _LATE_OPTIONAL:  # unset, they stay out of the hash: cached models stay valid
            if mixture.get(late) is None:
                mixture.pop(late, None)
        for late in _LATE_ZERO:
            if mixture.get(late) == 0:
                mixture.pop(late)
                mixture.pop("warm_lr", None)
        for late, old in _LATE_DEFAULTS.items():  # the field at its default: the key without it
            if mixture.get(late) == old:
                mixture.pop(late)
        fields = {**self.base_fields(), "mixture": mixture}
        return f"{self.task}-mixture-{stable_id(fields, length=16)}"
