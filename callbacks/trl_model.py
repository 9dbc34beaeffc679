"""The trainer's model as TRL's GRPOTrainer drives it: prompt tokens, sampling, log-probabilities.

torch, transformers and accelerate are imported inside the functions that need them.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from seffi._io import write_atomic
from seffi.errors import SeffiError


def generation_config(args: Any, model: Any, tokenizer: Any) -> Any:
    """The ``GenerationConfig`` GRPOTrainer builds from ``args`` (TRL's regular generation path)."""
    from transformers import GenerationConfig

    # Every id that ends a completion, as GRPOTrainer collects them: the tokenizer's, then the model's.
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    kw: dict[str, Any] = {
        "max_new_tokens": int(getattr(args, "max_completion_length", 32) or 32),
        "do_sample": True,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": eos if tokenizer.eos_token_id in eos else [tokenizer.eos_token_id, *eos],
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
    """The token ids GRPOTrainer generates from for each dataset prompt (``_tokenize_prompts``, TRL 1.x)."""
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


def trainer_prompt_ids(
    tokenizer: Any, prompts: Sequence[Any], trainer: Any, args: Any = None
) -> list[list[int]]:
    """`prompt_token_ids` with the trainer's tools, chat template and kwargs (else ``args``')."""
    args = getattr(trainer, "args", None) if args is None else args
    kwargs = getattr(trainer, "chat_template_kwargs", None) or getattr(args, "chat_template_kwargs", None)
    tools, template = getattr(trainer, "tools", None), getattr(trainer, "chat_template", None)
    return prompt_token_ids(
        tokenizer, list(prompts), tools=tools, chat_template=template, chat_template_kwargs=kwargs
    )


@contextmanager
def generation_mode(model: Any, training: bool | None, checkpointing_kwargs: Any = None) -> Iterator[None]:
    """The model in train (``training``) or eval mode, checkpointing off, as GRPOTrainer samples."""
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


def left_padded(rows: Sequence[Sequence[int]], pad_id: int, *, left: bool = True) -> tuple[Any, Any]:
    """(input ids, attention mask): long tensors of shape (len(rows), longest row), padded on the left."""
    import torch

    width = max(len(p) for p in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, p in enumerate(rows):
        cols = slice(width - len(p), width) if left else slice(0, len(p))
        ids[r, cols] = torch.tensor(list(p), dtype=torch.long)
        mask[r, cols] = 1
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
    """(``counts[i]`` completions of prompt i as token ids, cut after the first eos, ``generate`` calls).

    Seeded inside ``torch.random.fork_rng``: the caller's torch random stream never moves.
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


def decode_completion(
    tokenizer: Any, ids: Sequence[int], decode: Callable[[Sequence[int]], str] | None
) -> str:
    """A completion's text as the reward function sees it (``decode``, else TRL's decoding)."""
    return decode(ids) if decode else tokenizer.decode(ids, skip_special_tokens=True)


def sequence_logprobs(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    *,
    reduction: str = "sum",
    batch_size: int = 64,
    temperature: float = 1.0,
) -> np.ndarray:
    """The policy's log-probability (B,) of each completion given its prompt, in eval mode, no grad.

    ``log p(c | p) = sum_t log softmax(logits(p + c[:t]) / temperature)[c_t]`` (``reduction="sum"``),
    or that over the completion length (``"mean"``); an empty completion scores 0. Rows are
    right-padded, so a causal model's real tokens never see padding.
    """
    if reduction not in ("sum", "mean"):
        raise SeffiError(f"reduction must be 'sum' or 'mean', got {reduction!r}")
    if len(prompt_ids) != len(completion_ids):
        raise SeffiError(f"{len(prompt_ids)} prompts for {len(completion_ids)} completions")
    if any(len(p) == 0 for p in prompt_ids):
        raise SeffiError("every prompt needs at least one token to condition the completion on")
    import torch

    out = np.zeros(len(prompt_ids), dtype=np.float64)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for b in range(0, len(prompt_ids), batch_size):
                pairs = zip(prompt_ids[b : b + batch_size], completion_ids[b : b + batch_size], strict=True)
                ids, mask = left_padded([list(p) + list(c) for p, c in pairs], 0, left=False)
                logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
                logp = torch.log_softmax(logits.float() / temperature, dim=-1)
                for r in range(len(ids)):
                    i = b + r
                    start, n = len(prompt_ids[i]), len(completion_ids[i])
                    if n == 0:
                        continue
                    pos = torch.arange(start - 1, start + n - 1, device=logp.device)
                    tok = ids[r, start : start + n].to(logp.device)
                    total = float(logp[r, pos, tok].sum())
                    out[i] = total / n if reduction == "mean" else total
    finally:
        model.train(was_training)
    return out


def policy_logprobs(
    trainer: Any, prompts: Sequence[Any], completion_ids: Sequence[Sequence[int]], reduction: str = "mean"
) -> np.ndarray:
    """Each completion's `sequence_logprobs` under the trainer's policy at ``GRPOConfig.temperature``.

    Prompt tokens are re-derived from TRL's ``prompts`` as GRPOTrainer tokenises them.
    """
    model, tokenizer = getattr(trainer, "model", None), getattr(trainer, "processing_class", None)
    if completion_ids is None or model is None or tokenizer is None:
        raise SeffiError(
            "the unlikeliness reward needs the completions' token ids and the trainer's model and tokenizer "
            "(TRL's GRPOTrainer passes them); outside a trainer pass logprob_fn=fn(prompts, completion_ids)"
        )
    prompt_ids = trainer_prompt_ids(tokenizer, prompts, trainer)
    temperature = float(getattr(getattr(trainer, "args", None), "temperature", 1.0) or 1.0)
    completions = [list(c) for c in completion_ids]
    return sequence_logprobs(model, prompt_ids, completions, reduction=reduction, temperature=temperature)


def resolve_prompts(
    explicit: Mapping[str, Any] | None, dataset: Any, id_column: str, task: Any, inputs: Mapping[str, Any]
) -> dict[str, Any]:
    """``{input id: prompt}``: given, else the dataset's ``prompt`` by ``id_column``, else the task's."""
    if explicit:
        return {str(k): v for k, v in explicit.items()}
    cols = getattr(dataset, "column_names", None) or []
    found: dict[str, Any] = {}
    if "prompt" in cols and id_column in cols:
        for pid, p in zip(dataset[id_column], dataset["prompt"], strict=True):
            if isinstance(p, str) or is_conversational(p):
                found.setdefault(str(pid), p)
    if found:
        return found
    if task is None or not inputs:
        raise SeffiError(
            "the reference iid needs the prompts: a train dataset with 'prompt' (strings or chat messages) "
            f"and {id_column!r} columns (this one has {cols or None}), iid_prompts={{input_id: prompt}}, or "
            "a task and inputs"
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
    """Reference completions as token ids (valid across labelers), one JSON file per key; damage ignored."""

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
        """Up to ``n`` cached completions of a prompt."""
        return self.entries.get(prompt_key, [])[:n]

    def put(self, prompt_key: str, completions: Sequence[Sequence[int]]) -> None:
        """Append completions of a prompt (in memory; `save` writes)."""
        self.entries.setdefault(prompt_key, []).extend([list(map(int, c)) for c in completions])

    def save(self) -> None:
        """Write the file; an unwritable folder is skipped with a warning."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps({"format": self.FORMAT, "entries": self.entries}))
        except OSError as exc:
            warnings.warn(
                f"reference-iid cache not written to {self.path}: {exc}", RuntimeWarning, stacklevel=2
            )


def rank_and_world() -> tuple[int, int]:
    """(rank, world size) of an initialised ``torch.distributed`` group, else (0, 1)."""
    # Not accelerate's PartialState(): it would create its process-global singleton as a side effect.
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
