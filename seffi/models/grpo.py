"""GRPO on a task LM (rung 3): group rewards, sampling with GRPO's settings, the reference model's iid.

* **Reward modes** (`group_rewards`). ``"valid"`` (1 for a correct completion) and ``"matched"``
  (1 for following any strategy) score each completion alone. ``"diversity"`` scores a completion
  within its GRPO group of G completions of one prompt:

  ```text
  r_i = valid_i * ((1 - w) + w * [A_i != {}] / c_i),   c_i = #{j in group : valid_j and A_j = A_i}
  ```

  where ``A_i`` is completion i's match set (its strategy set) and ``w`` the diversity weight
  (default 0.5). A valid completion whose strategy set no other valid completion of the group shares
  scores 1; one of c valid completions sharing a set scores ``1 - w + w/c``; an invalid one 0. A valid
  completion that follows no declared strategy gets no diversity bonus (``1 - w``), so an off-strategy
  trace is never the cheapest way to be unique. The reward depends on the group only through the
  multiset of (valid, match set), so the order of the completions within a group changes nothing.
* **Sampling as GRPOTrainer does** (`generate_ids`): the prompt tokens TRL generates from
  (`prompt_token_ids`: a conversational prompt through the chat template with the generation
  prompt, a string through the tokenizer), the generation config it builds (`generation_config`:
  ``max_completion_length``, temperature, top-p/k, min-p, repetition penalty, its eos ids,
  ``generation_kwargs``) and its train-mode generation, seeded inside ``torch.random.fork_rng`` so
  drawing baselines never moves the trainer's random stream. `sample_completions` samples text
  prompts in eval mode (evaluations, the ladder's pool).
* **The reference model's iid** (`reference_iid`): n completions per prompt from the model
  before any update, labelled like training completions, as ``IidBaseline.from_samples``; the TRL
  path (`seffi.callbacks.groups.GroupCoverage`) adds a prompt cap (`subsample_ids`)
  and an on-disk cache of completions (`ReferenceCache`, keyed by `weights_digest`).
* **A task LM for TRL** (`trl_policy`): a `seffi.models` folder loaded with
  ``AutoModelForCausalLM`` / ``AutoTokenizer``, the dataset prompt (``prompt <sep>``), the decoder
  that keeps newlines (the HF tokenizer drops the special ``<nl>`` when TRL decodes), and the tokens
  the seffi sampler never emits (suppressed in generation too).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from seffi.errors import SeffiError
from seffi.tasks.base import Task, TaskInput, ValidationResult

#: Record of one completion: (input id, sorted match set, valid).
Record = tuple[str, tuple[str, ...], bool]
#: Group reward rules (`seffi.models.rewards.METHODS`, ``"valid"`` aside): scored over a whole group.
GROUP_MODES = ("diversity", "unlikeliness", "passk", "outcome_ucb", "outcome_batch")
REWARD_MODES = ("valid", "matched", *GROUP_MODES)


def split_groups(records: Sequence[Record], size: int | None) -> list[list[int]]:
    """Indices of each GRPO group: consecutive records of one prompt, at most ``size`` each.

    TRL lays a generation batch out prompt by prompt (each prompt's G completions adjacent, rank 0's
    share first), so a group is a maximal run of one input id, cut every ``size`` records (the same
    prompt drawn twice in a row makes two groups).
    """
    groups: list[list[int]] = []
    for i, rec in enumerate(records):
        last = groups[-1] if groups else None
        if last is None or records[last[0]][0] != rec[0] or (size is not None and len(last) >= size):
            groups.append([i])
        else:
            last.append(i)
    return groups


def diversity_rewards(group: Sequence[Record], weight: float = 0.5) -> list[float]:
    """``valid_i * ((1 - w) + w * [A_i != {}] / c_i)`` for each completion of one group (module docstring)."""
    if not 0.0 <= weight <= 1.0:
        raise SeffiError(f"diversity weight must be in [0, 1], got {weight!r}")
    counts: dict[tuple[str, ...], int] = {}
    for _, matches, valid in group:
        if valid:
            counts[matches] = counts.get(matches, 0) + 1
    return [(1.0 - weight) + (weight / counts[m] if m else 0.0) if v else 0.0 for _, m, v in group]


def reward_function(spec: Any) -> Callable[[ValidationResult], float] | None:
    """The per-completion reward of ``spec``; None for a group mode (`GROUP_MODES`)."""
    if spec == "valid":
        return lambda r: 1.0 if r.valid else 0.0
    if spec == "matched":  # following any strategy, correct or not (a shaping option)
        return lambda r: 1.0 if r.strategy_matches else 0.0
    if isinstance(spec, str) and spec in GROUP_MODES:
        return None
    if callable(spec):
        return spec
    raise SeffiError(
        f"reward must be one of {REWARD_MODES} or a callable(ValidationResult) -> float, got {spec!r}"
    )


def group_rewards(records: Sequence[Record], size: int | None, weight: float = 0.5) -> list[float]:
    """Diversity rewards of a whole (gathered) generation batch, group by group."""
    out = [0.0] * len(records)
    for idx in split_groups(records, size):
        for i, r in zip(idx, diversity_rewards([records[i] for i in idx], weight), strict=True):
            out[i] = r
    return out


# -- sampling with GRPO's settings ------------------------------------------------------------------------


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


def eos_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """Every id that ends a completion, as GRPOTrainer collects them: the tokenizer's, then the model's."""
    ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    return ids if tokenizer.eos_token_id in ids else [tokenizer.eos_token_id, *ids]


def generation_config(args: Any, model: Any, tokenizer: Any) -> Any:
    """The ``GenerationConfig`` GRPOTrainer builds from ``args`` (TRL's regular generation path)."""
    from transformers import GenerationConfig

    kw: dict[str, Any] = {
        "max_new_tokens": int(getattr(args, "max_completion_length", 32) or 32),
        "do_sample": True,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": eos_token_ids(model, tokenizer),
        "temperature": getattr(args, "temperature", 1.0),
        "top_p": getattr(args, "top_p", 1.0),
        "top_k": getattr(args, "top_k", 0),
        "min_p": getattr(args, "min_p", None),
        "repetition_penalty": getattr(args, "repetition_penalty", 1.0),
        "cache_implementation": getattr(args, "cache_implementation", None),
    }
    kw.update(getattr(args, "generation_kwargs", None) or {})
    return GenerationConfig(**kw, disable_compile=True)


def is_conversational(prompt: Any) -> bool:
    """Whether a dataset prompt is a list of chat messages (TRL's conversational format)."""
    return (
        isinstance(prompt, list) and bool(prompt) and isinstance(prompt[0], Mapping) and "role" in prompt[0]
    )


def prompt_token_ids(
    tokenizer: Any,
    prompts: Sequence[Any],
    *,
    tools: Any = None,
    chat_template: str | None = None,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> list[list[int]]:
    """The token ids GRPOTrainer generates from for each dataset prompt (``_tokenize_prompts``, TRL 1.x).

    A conversational prompt (a list of ``{"role", "content"}`` messages) goes through the tokenizer's
    chat template with ``add_generation_prompt=True`` (and the trainer's ``tools``, ``chat_template``
    and ``chat_template_kwargs``); a string prompt through the tokenizer itself, special tokens
    included, as TRL calls it.
    """
    out: list[list[int]] = []
    for p in prompts:
        if is_conversational(p):
            enc = tokenizer.apply_chat_template(
                conversation=[p],
                tools=tools or None,  # as TRL: an empty tool list renders tool boilerplate on some templates
                chat_template=chat_template,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=True,
                **dict(chat_template_kwargs or {}),
            )["input_ids"]
            out.append([int(t) for t in (enc[0] if enc and isinstance(enc[0], list) else enc)])
        elif isinstance(p, str):
            out.append([int(t) for t in tokenizer(text=[p])["input_ids"][0]])
        else:
            raise SeffiError(
                f"a reference prompt must be a string or a list of chat messages, got {type(p).__name__}"
            )
    return out


@contextmanager
def generation_mode(model: Any, training: bool | None, checkpointing_kwargs: Any = None) -> Iterator[None]:
    """The model in the mode it samples in: ``training`` True/False, or None for eval (the default).

    GRPOTrainer generates with the model in train mode (dropout as the trainer left it) and activation
    (gradient) checkpointing switched off for the generation; ``training=True`` reproduces that.
    """
    names = (
        "is_activation_checkpointing",
        "activation_checkpointing_disable",
        "activation_checkpointing_enable",
    )
    if not hasattr(type(model), names[0]):  # transformers < 5.20 names it gradient checkpointing
        names = tuple(n.replace("activation", "gradient") for n in names)
    was_training, checkpointing = model.training, bool(getattr(model, names[0], False))
    model.train(bool(training))
    if checkpointing:
        getattr(model, names[1])()
    try:
        yield
    finally:
        if checkpointing:
            getattr(model, names[2])(checkpointing_kwargs)
        model.train(was_training)


def left_padded(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[Any, Any]:
    """(input ids, attention mask): long tensors, shape (len(prompts), longest prompt), padded on the left."""
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, p in enumerate(prompts):
        ids[r, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
        mask[r, width - len(p) :] = 1
    return ids, mask


def generate_ids(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    counts: Sequence[int] | int,
    gen: Any,
    *,
    seed: int,
    batch_size: int = 256,
    training: bool | None = None,
    checkpointing_kwargs: Any = None,
) -> tuple[list[list[list[int]]], int]:
    """``counts[i]`` completions of prompt i as token ids (cut after the first eos, which is kept).

    Prompts are left-padded with ``gen.pad_token_id`` in rows of at most ``batch_size``, seeded inside
    ``torch.random.fork_rng`` (the caller's torch random state is left untouched); ``training`` and
    ``checkpointing_kwargs`` as `generation_mode`.

    Returns:
        (completions per prompt, number of ``model.generate`` calls).
    """
    import torch

    counts = [counts] * len(prompt_ids) if isinstance(counts, int) else list(counts)
    eos = set(gen.eos_token_id if isinstance(gen.eos_token_id, list) else [gen.eos_token_id])
    rows = [i for i, c in enumerate(counts) for _ in range(c)]
    out: list[list[list[int]]] = [[] for _ in prompt_ids]
    calls = 0
    device = next(model.parameters()).device
    with generation_mode(model, training, checkpointing_kwargs), torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(seed)
        for b in range(0, len(rows), batch_size):
            ids, mask = left_padded([prompt_ids[i] for i in rows[b : b + batch_size]], gen.pad_token_id)
            width = ids.shape[1]
            got = model.generate(
                input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=gen
            )
            calls += 1
            for i, row in zip(rows[b : b + batch_size], got[:, width:].tolist(), strict=True):
                cut = next((j for j, t in enumerate(row) if t in eos), len(row))
                out[i].append(row[: cut + 1])  # TRL keeps the eos in completion_ids
    return out, calls


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


def decode_completion(
    tokenizer: Any, ids: Sequence[int], decode: Callable[[Sequence[int]], str] | None
) -> str:
    """A completion's text as the reward function sees it (``decode``, else TRL's decoding)."""
    return decode(ids) if decode else tokenizer.decode(ids, skip_special_tokens=True)


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
    from seffi.coverage import IidBaseline

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
    from .cache import cached_base_folder

    return cached_base_folder(cfg, cache_dir, hook=hook)


def prompts_from_dataset(dataset: Any, id_column: str) -> dict[str, Any]:
    """``{input id: prompt}`` from a dataset with ``prompt`` and ``id_column`` columns (first wins).

    A prompt is a string or a list of chat messages (TRL's conversational format).
    """
    cols = getattr(dataset, "column_names", None) or []
    if "prompt" not in cols or id_column not in cols:
        return {}
    out: dict[str, Any] = {}
    for pid, p in zip(dataset[id_column], dataset["prompt"], strict=True):
        if isinstance(p, str) or is_conversational(p):
            out.setdefault(str(pid), p)
    return out


def resolve_prompts(
    explicit: Mapping[str, Any] | None, dataset: Any, id_column: str, task: Any, inputs: Mapping[str, Any]
) -> dict[str, Any]:
    """Prompts of the reference samples: given, else the training dataset's, else ``task.prompt``."""
    if explicit:
        return {str(k): v for k, v in explicit.items()}
    found = prompts_from_dataset(dataset, id_column) if dataset is not None else {}
    if found:
        return found
    if task is None or not inputs:
        cols = getattr(dataset, "column_names", None)
        raise SeffiError(
            "the reference iid needs the prompts: a train dataset with 'prompt' (strings or chat messages) "
            f"and {id_column!r} columns (this one has {cols}), iid_prompts={{input_id: prompt}}, or a task "
            "and inputs"
        )
    return {k: task.prompt(x) for k, x in inputs.items()}


def subsample_ids(ids: Sequence[str], cap: int | None, seed: int) -> list[str]:
    """``cap`` of the sorted ``ids``, drawn without replacement from ``seed`` (all of them when None)."""
    order = sorted(ids)
    if cap is None or cap >= len(order):
        return order
    pick = np.random.default_rng(seed).choice(len(order), size=cap, replace=False)
    return [order[i] for i in sorted(pick)]


def weights_digest(model: Any) -> str:
    """A hex digest of every parameter and buffer (names, dtypes, shapes, bytes) of ``model``."""
    import torch

    h = hashlib.blake2b(digest_size=16)
    h.update(str(getattr(getattr(model, "config", None), "_name_or_path", "")).encode())
    for name, t in sorted(model.state_dict().items()):
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        flat = t.detach().to("cpu").contiguous().reshape(-1)
        h.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    return h.hexdigest()


def digest(obj: Any) -> str:
    """A short hex digest of a JSON-able object."""
    text = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


class ReferenceCache:
    """Reference completions on disk: ``{prompt digest: [completion ids, ...]}`` in one JSON file per key.

    The key digests the model weights, the generation config, the sampling mode and the seed; a
    prompt's entry is keyed by its token ids (so by the tokenizer, chat template and prompt). Entries
    are token ids, so the labeler and the decoder can change without invalidating them. Written
    atomically by the main process; a damaged file is ignored (and rewritten).
    """

    FORMAT = "seffi.models.reference_cache/1"

    def __init__(self, folder: str | Path, key: str) -> None:
        self.path = Path(folder) / f"{key}.json"
        self.entries: dict[str, list[list[int]]] = {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("format") == self.FORMAT:
                self.entries = {str(k): [list(map(int, c)) for c in v] for k, v in data["entries"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self.entries = {}

    def get(self, prompt_key: str, n: int) -> list[list[int]]:
        """Up to ``n`` cached completions of a prompt (the first ones stored)."""
        return self.entries.get(prompt_key, [])[:n]

    def put(self, prompt_key: str, completions: Sequence[Sequence[int]]) -> None:
        """Append completions of a prompt (in memory; `save` writes)."""
        self.entries.setdefault(prompt_key, []).extend([list(map(int, c)) for c in completions])

    def save(self) -> None:
        """Write the file (tmp + rename); an unwritable folder is skipped with a warning."""
        import os
        import warnings

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.tmp{os.getpid()}")
            tmp.write_text(json.dumps({"format": self.FORMAT, "entries": self.entries}), encoding="utf-8")
            tmp.replace(self.path)
        except OSError as exc:
            warnings.warn(
                f"reference-iid cache not written to {self.path}: {exc}", RuntimeWarning, stacklevel=2
            )


def rank_and_world() -> tuple[int, int]:
    """(rank, world size) of an initialised ``torch.distributed`` group, else (0, 1).

    Read-only on purpose: calling ``accelerate``'s ``PartialState()`` here would *create* its
    process-global singleton as a side effect, which then leaks into whatever builds an
    ``Accelerator`` later in the process. Under a multi-process launch the trainer initialises
    ``torch.distributed`` before any callback or reward function runs.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def default_gather(records: list[Any]) -> list[Any]:
    """All ranks' records in rank order (identity on one process)."""
    if rank_and_world()[1] <= 1:
        return records
    from accelerate.utils import gather_object  # the group exists: accelerate's state is the trainer's

    return list(gather_object(records))


def seed_of(seed: int, *salt: int) -> int:
    """A 31-bit seed derived from ``seed`` and ``salt`` (``SeedSequence``, never ``seed + i``)."""
    return int(np.random.SeedSequence([seed, *salt]).generate_state(1)[0] & 0x7FFFFFFF)
