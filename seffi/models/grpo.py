"""GRPO on a task LM (rung 3): sampling text prompts, the reference model's iid, a task LM as a TRL policy.

* **Sampling** (`sample_completions`): text prompts sampled in eval mode with GRPOTrainer's
  generation (`seffi.callbacks.trl_model.generate_ids`), for evaluations and the ladder's pool.
* **The reference model's iid** (`reference_iid`): n completions per prompt from the model
  before any update, labelled like training completions, as ``IidBaseline.from_samples``; the TRL
  path (`seffi.callbacks.trl.GRPOCoverage`) draws its own with a prompt cap and an on-disk cache.
* **A task LM for TRL** (`trl_policy`): a `seffi.models` folder loaded with
  ``AutoModelForCausalLM`` / ``AutoTokenizer``, the dataset prompt (``prompt <sep>``), the decoder
  that keeps newlines (the HF tokenizer drops the special ``<nl>`` when TRL decodes), and the tokens
  the seffi sampler never emits (suppressed in generation too).

The group rewards are `seffi.group_scoring`'s.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seffi.callbacks.trl_model import decode_completion, generate_ids, generation_config
from seffi.coverage import IidBaseline
from seffi.errors import SeffiError
from seffi.tasks.base import Task, TaskInput, ValidationResult

from .cache import cached_base_folder

#: transformers' deprecation notices that TRL's own code triggers (its config defaults
#: ``gradient_checkpointing``, its trainer reads ``model.is_gradient_checkpointing``): nothing a caller
#: changes.
_TRL_INTERNAL_DEPRECATIONS = r"`(is_)?gradient_checkpointing` is deprecated"


@contextmanager
def quiet_trainer() -> Iterator[None]:
    """Silence the deprecation notices TRL's trainer raises from inside transformers (not the caller's)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_TRL_INTERNAL_DEPRECATIONS, category=FutureWarning)
        yield


def sample_completions(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    n: int,
    gen: Any,
    *,
    seed: int,
    decode: Callable[[Sequence[int]], str] | None = None,
    batch_size: int = 256,
) -> list[list[str]]:
    """``n`` completions of each text prompt (eval mode; decoded as TRL does unless ``decode`` is given).

    Prompts are tokenized without special tokens; seeded inside ``torch.random.fork_rng``: the
    caller's torch random state is left untouched.
    """
    enc = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    ids, _ = generate_ids(model, enc, n, gen, seed=seed, batch_size=batch_size)
    return [[decode_completion(tokenizer, c, decode) for c in row] for row in ids]


def label_samples(
    labeler: Callable[[Any, Any], ValidationResult],
    ids: Sequence[str],
    inputs: Sequence[Any],
    texts: Sequence[Sequence[str]],
) -> tuple[dict[str, list[frozenset[str]]], dict[str, list[bool]]]:
    """Match sets and validity of each input's samples, keyed by input id.

    ``inputs`` are what the labeler is given: task inputs, or the prompts when labelling without a task.
    """
    sets: dict[str, list[frozenset[str]]] = {}
    valid: dict[str, list[bool]] = {}
    for key, x, row in zip(ids, inputs, texts, strict=True):
        results = [labeler(x, t) for t in row]
        sets[key] = [frozenset(r.strategy_matches) for r in results]
        valid[key] = [bool(r.valid) for r in results]
    return sets, valid


def reference_iid(
    model: Any,
    tokenizer: Any,
    args: Any,
    labeler: Any,
    ids: Sequence[str],
    inputs: Sequence[Any],
    prompts: Sequence[str],
    n: int,
    *,
    seed: int,
    decode: Callable[[Sequence[int]], str] | None = None,
) -> Any:
    """``IidBaseline.from_samples`` over ``n`` completions per prompt of ``model`` (the reference)."""
    gen = generation_config(args, model, tokenizer)
    texts = sample_completions(model, tokenizer, prompts, n, gen, seed=seed, decode=decode)
    sets, valid = label_samples(labeler, ids, inputs, texts)
    return IidBaseline.from_samples(sets, strategies=labeler.strategies, valid=valid)


# -- a task LM as a TRL policy ----------------------------------------------------------------------------


#: ``GRPOConfig`` fields for these small models on CPU. Recent TRL defaults to bf16 autocast and gradient
#: checkpointing; on CPU bf16 changes the training numerics and, with checkpointing, made each 60-step
#: rung-3 run 5-8x slower (TRL 1.16: 220-290 s instead of about 30 s). Both are memory savings that a
#: 0.4 M-parameter model does not need, so they are off, whatever the installed TRL's defaults.
def cpu_training() -> dict[str, Any]:
    """``GRPOConfig`` keyword arguments: full precision, no checkpointing (see above).

    Checkpointing is named ``activation_checkpointing`` where the installed transformers has it
    (``gradient_checkpointing`` is its deprecated alias there) and ``gradient_checkpointing`` before.
    """
    from transformers import TrainingArguments

    new_name = "activation_checkpointing" in TrainingArguments.__dataclass_fields__
    checkpointing = "activation_checkpointing" if new_name else "gradient_checkpointing"
    return {"bf16": False, "fp16": False, checkpointing: False}


@dataclass
class TRLPolicy:
    """A `seffi.models` folder ready for GRPOTrainer.

    Attributes:
        model: ``AutoModelForCausalLM.from_pretrained(folder)``.
        tokenizer: ``AutoTokenizer.from_pretrained(folder)`` (word level, left padding).
        decode: Completion ids -> trace text (newlines kept; pass as ``GRPOCoverage(decode=...)``).
        suppress: Token ids the seffi sampler never emits (``GRPOConfig(generation_kwargs=
            {"suppress_tokens": suppress})``).
        folder: Where the model lives.
        max_new_tokens: The trace length the model was sized for (``GRPOConfig.max_completion_length``).
    """

    model: Any
    tokenizer: Any
    decode: Callable[[Sequence[int]], str]
    suppress: list[int]
    folder: Path
    max_new_tokens: int

    @staticmethod
    def prompt(task: Task[Any, Any], x: TaskInput) -> str:
        """The dataset prompt of ``x``: the task prompt and the separator the LM was trained after."""
        from .lm import SEP

        return f"{task.prompt(x)} {SEP}"


def positions_from_mask(model: Any) -> Any:
    """Make a full-sequence forward without ``position_ids`` number positions from the attention mask.

    GRPOTrainer left-pads prompts of different lengths and scores completions with ``model(input_ids,
    attention_mask)``; transformers then numbers positions 0..L-1 *including* the padding, while
    ``generate`` numbered them from the mask. For absolute-position models (GPT-2, the task LMs) the
    policy would be trained on other positions than it sampled with — measured here: correctness-only
    GRPO *lowered* the valid rate (0.88 -> 0.79 in 60 steps). RoPE models are unaffected (relative).
    Forwards with a cache or explicit ``position_ids`` are left alone.
    """

    def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        if (
            kwargs.get("position_ids") is None
            and ids is not None
            and mask is not None
            and mask.shape == ids.shape
        ):
            kwargs["position_ids"] = (mask.long().cumsum(-1) - 1).clamp(min=0)
        return args, kwargs

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return model


def trl_policy(folder: str | Path, task: Task[Any, Any]) -> TRLPolicy:
    """Load a base LM folder (``seffi.models``) as a TRL policy for ``task`` (positions from the mask)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .lm import Layout, torch_setup

    torch_setup()
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise SeffiError(f"{folder} is not a saved model folder (no config.json)")
    layout = Layout(task.vocabulary())
    model = positions_from_mask(AutoModelForCausalLM.from_pretrained(folder))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.padding_side = "left"
    meta_file = folder / "seffi_meta.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    max_new = int(meta.get("max_new_tokens", 32))
    return TRLPolicy(model, tokenizer, layout.decode, [int(t) for t in layout.banned], folder, max_new)


def base_lm_folder(cfg: Any, cache_dir: str | Path | None = None, hook: Any = None) -> Path:
    """The cached base LM folder of ``cfg`` (an `LMConfig`), trained if missing.

    Only the base LM: the latent mixture is not needed for GRPO. The folder, checks and manifest of
    `seffi.models.cache.cached_base_folder`, so the ladder and GRPO reuse each other's model.
    """
    return cached_base_folder(cfg, cache_dir, hook=hook)
