"""A task's small causal LM: word-level tokenizer, transformers model, SFT loop, scoring and sampling.

A sequence is ``prompt <sep> [<zC>] trace <eos>``: the prompt's words, a separator, for the latent
mixture one code token, then the trace's words (newlines are the token ``<nl>``). The loss covers the
trace and ``<eos>`` (and the code token for a mixture that learns its per-input prior). Token ids
``0 .. V-1`` are exactly the ids of ``task.vocabulary()``, so ``Vocabulary.encode`` / ``decode`` and the
saved Hugging Face tokenizer agree; ``<sep>`` and ``MAX_CODES`` code tokens follow. The base LM never
sees a code token; the mixture uses the first L.

Determinism: everything runs on CPU with one torch thread (`torch_setup`), initialisation and
shuffling are seeded, so the same config and seed give bit-identical weights on one machine and torch
version. Sampling draws one uniform per generated token from the caller's per-row stream, so a row's
trace depends only on its own stream, not on which other rows share the batch (up to float rounding of
batched matmuls, which can flip a draw only when a uniform lands within ~1e-6 of a CDF boundary).
"""

from __future__ import annotations

import inspect
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from seffi._io import write_atomic
from seffi.errors import SeffiError
from seffi.tasks.base import Task, Vocabulary

#: Code tokens reserved in every tokenizer, so the base LM does not depend on the mixture's L.
MAX_CODES = 64
SEP = "<sep>"
NEWLINE = "<nl>"
META_FILE = "seffi_meta.json"

#: Called after each optimiser step with (step, total_steps, loss).
StepHook = Callable[[int, int, float], None]


def torch_setup() -> None:
    """One CPU thread (bit-reproducible training; fair on a shared machine) unless SEFFI_TORCH_THREADS."""
    torch.set_num_threads(int(os.environ.get("SEFFI_TORCH_THREADS", "1")))
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # weight loading/saving bars would garble rich progress displays
    hf_logging.set_verbosity_error()


def _cache_arg() -> str:
    """Name of the KV-cache argument and output (transformers 5.x renamed ``past_key_values``)."""
    from transformers import GPT2LMHeadModel

    return "cache" if "cache" in inspect.signature(GPT2LMHeadModel.forward).parameters else "past_key_values"


_CACHE_ARG = _cache_arg()


class Layout:
    """Token ids of a task's LM: the task vocabulary's ids, then ``<sep>``, then the code tokens.

    Args:
        vocab: ``task.vocabulary()``.
        code_slot: Where a code token goes: ``"after_sep"`` (``prompt <sep> <z> trace``) or ``"sep"``
            (``prompt <z> trace``: the code takes the separator's place, so the trace keeps the positions
            the base LM was trained on). Read from a model's meta by `TaskLM.load`.
    """

    def __init__(self, vocab: Vocabulary, code_slot: str = "after_sep") -> None:
        if code_slot not in ("after_sep", "sep"):
            raise SeffiError(f"unknown code_slot {code_slot!r} (after_sep or sep)")
        self.vocab = vocab
        self.code_slot = code_slot
        self.words: list[str] = [NEWLINE if t == "\n" else t for t in vocab.tokens]
        self.sep = len(self.words)
        self.code0 = self.sep + 1
        self.words += [SEP] + [f"<z{i}>" for i in range(MAX_CODES)]
        self.size = len(self.words)
        #: Tokens a sampler must never emit: padding, unknown, separator and codes.
        self.banned = np.array([Vocabulary.PAD, Vocabulary.UNK, *range(self.sep, self.size)])

    def code(self, z: int) -> int:
        """Token id of latent code ``z``."""
        if not 0 <= z < MAX_CODES:
            raise SeffiError(f"latent code {z} is outside 0..{MAX_CODES - 1}")
        return self.code0 + z

    def prefix(self, prompt: str, code: int | None = None) -> list[int]:
        """Ids of ``prompt <sep> [<z code>]`` (``prompt <z code>`` with ``code_slot="sep"``)."""
        ids = [*self.vocab.encode(prompt), self.sep]
        if code is not None:
            if self.code_slot == "sep":
                ids[-1] = self.code(code)
            else:
                ids.append(self.code(code))
        return ids

    def target(self, y_text: str) -> list[int]:
        """Ids of ``trace <eos>``."""
        return [*self.vocab.encode(y_text), Vocabulary.EOS]

    def decode(self, ids: Sequence[int]) -> str:
        """Trace text of generated ids (up to ``<eos>``)."""
        return self.vocab.decode([i if i < self.sep else Vocabulary.UNK for i in ids])


def build_tokenizer(layout: Layout) -> Any:
    """A ``PreTrainedTokenizerFast`` with the layout's ids (word level; newline -> ``<nl>``)."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(layout.words)}, unk_token="<unk>"))
    tok.normalizer = normalizers.Replace("\n", f" {NEWLINE} ")
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
        sep_token=SEP,
        additional_special_tokens=[SEP, NEWLINE] + [f"<z{i}>" for i in range(MAX_CODES)],
    )
    fast.padding_side = "left"  # generation pads prompts on the left
    return fast


@dataclass(frozen=True)
class Example:
    """One training sequence: prefix ids (no loss) and target ids (loss), with its input id."""

    input_id: str
    prefix: tuple[int, ...]
    target: tuple[int, ...]


def make_model(cfg: Any, layout: Layout, n_positions: int) -> Any:
    """A freshly initialised causal LM from a transformers config (seeded by the caller)."""
    common = {"vocab_size": layout.size, "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": None}
    if cfg.arch == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        conf = LlamaConfig(
            hidden_size=cfg.d_model,
            intermediate_size=cfg.d_model * 4,
            num_hidden_layers=cfg.n_layer,
            num_attention_heads=cfg.n_head,
            num_key_value_heads=cfg.n_head,
            max_position_embeddings=n_positions,
            tie_word_embeddings=False,
            **common,
        )
        return LlamaForCausalLM(conf)
    from transformers import GPT2Config, GPT2LMHeadModel

    conf = GPT2Config(
        n_embd=cfg.d_model,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        n_positions=n_positions,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        # Untied: code tokens get fresh input embeddings without changing any output logit.
        tie_word_embeddings=False,
        **common,
    )
    return GPT2LMHeadModel(conf)


def _batch(
    examples: Sequence[Example], with_labels: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``(input_ids, attention_mask, labels)``; labels are -100 outside targets."""
    length = max(len(e.prefix) + len(e.target) for e in examples)
    ids = torch.zeros((len(examples), length), dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for r, e in enumerate(examples):
        seq = e.prefix + e.target
        ids[r, : len(seq)] = torch.tensor(seq)
        mask[r, : len(seq)] = 1
        if with_labels:
            labels[r, len(e.prefix) : len(seq)] = torch.tensor(e.target)
    return ids, mask, labels


def _left_padded(prefixes: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Left-padded ``(input_ids, attention_mask, position_ids)`` of prefixes (positions skip the padding)."""
    width = max(len(p) for p in prefixes)
    ids = torch.zeros((len(prefixes), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, p in enumerate(prefixes):
        ids[r, width - len(p) :] = torch.tensor(list(p))
        mask[r, width - len(p) :] = 1
    return ids, mask, (mask.cumsum(1) - 1).clamp(min=0)


def _label_log_likelihood(logits: torch.Tensor, labels: torch.Tensor) -> np.ndarray:
    """Sum of log p(label) over each row's labelled positions (``logits[:, t]`` predicts token ``t + 1``).

    Args:
        logits: Float tensor, shape (B, T, V).
        labels: Long tensor, shape (B, T); -100 where nothing is scored.

    Returns:
        Float array, shape (B,), in nats.
    """
    tgt = labels[:, 1:]
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    picked = logp.gather(2, tgt.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (picked * (tgt >= 0)).sum(dim=1).double().numpy()


def _batches(examples: Sequence[Example], size: int, rng: np.random.Generator) -> list[list[int]]:
    """Shuffled batches of similar length (sorted within chunks of 32 batches) for less padding."""
    order = rng.permutation(len(examples))
    chunk = size * 32
    batches: list[list[int]] = []
    for start in range(0, len(order), chunk):
        part = order[start : start + chunk]
        lengths = np.array([len(examples[i].prefix) + len(examples[i].target) for i in part])
        part = part[np.argsort(lengths, kind="stable")]
        batches += [part[b : b + size].tolist() for b in range(0, len(part), size)]
    return [batches[i] for i in rng.permutation(len(batches))]


class TaskLM:
    """A task's causal LM with its token layout.

    Args:
        model: A transformers causal LM.
        layout: The token layout.
        meta: Facts saved next to the weights (config, data statistics, training history).
    """

    def __init__(self, model: Any, layout: Layout, meta: dict[str, Any]) -> None:
        self.model = model
        self.layout = layout
        self.meta = meta

    # -- construction -------------------------------------------------------------------------------

    @classmethod
    def create(cls, cfg: Any, task: Task[Any, Any], examples: Sequence[Example]) -> TaskLM:
        """A new model sized for ``examples`` (positions for the longest prompt and trace plus a margin)."""
        torch_setup()
        layout = Layout(task.vocabulary())
        longest_prefix = max(len(e.prefix) for e in examples) + 1  # + a code token
        longest_target = max(len(e.target) for e in examples)
        max_new = longest_target + max(4, longest_target // 4)
        n_positions = 2 * (longest_prefix + max_new)  # room for longer prompts than in training
        torch.manual_seed(cfg.seed)
        model = make_model(cfg, layout, n_positions)
        meta = {"task": task.name, "max_new_tokens": max_new, "n_positions": n_positions}
        return cls(model, layout, meta)

    def copy(self) -> TaskLM:
        """An independent copy (weights and meta)."""
        clone = type(self.model)(self.model.config)
        clone.load_state_dict(self.model.state_dict())
        return TaskLM(clone, self.layout, json.loads(json.dumps(self.meta)))

    def n_params(self) -> int:
        """Number of parameters."""
        return int(sum(p.numel() for p in self.model.parameters()))

    def save(self, path: str | Path) -> None:
        """``save_pretrained`` of model and tokenizer plus ``seffi_meta.json`` into ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path, safe_serialization=True)
        build_tokenizer(self.layout).save_pretrained(path)
        write_atomic(path / META_FILE, json.dumps(self.meta, indent=2, sort_keys=True))

    @classmethod
    def load(cls, path: str | Path, task: Task[Any, Any]) -> TaskLM:
        """Load a folder written by `save` (any ``AutoModelForCausalLM`` folder with the meta)."""
        from transformers import AutoModelForCausalLM

        torch_setup()
        path = Path(path)
        if not (meta_file := path / META_FILE).is_file():
            raise SeffiError(f"{path} is not a seffi model folder (no {META_FILE})")
        try:
            meta = json.loads(meta_file.read_text())
        except (OSError, ValueError) as exc:
            raise SeffiError(f"cannot read {meta_file}: {exc}") from None
        meta = meta if isinstance(meta, dict) else {}
        if meta.get("task") != task.name:
            raise SeffiError(f"{path} holds a model of task {meta.get('task')!r}, not {task.name!r}")
        try:
            model = AutoModelForCausalLM.from_pretrained(path)
        except Exception as exc:  # SafetensorError, OSError, JSON and config errors: a damaged folder
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise SeffiError(f"cannot load the model in {path}: {type(exc).__name__}: {msg}") from None
        model.eval()
        return cls(model, Layout(task.vocabulary(), meta.get("code_slot", "after_sep")), meta)

    # -- training -----------------------------------------------------------------------------------

    def train(
        self,
        examples: Sequence[Example],
        *,
        epochs: float,
        batch_size: int,
        lr: float,
        seed: int,
        weight_decay: float = 0.0,
        schedule: str = "cosine",
        hook: StepHook | None = None,
    ) -> list[float]:
        """Supervised fine-tuning on ``examples`` (loss on targets only); returns the loss per step.

        Args:
            examples: The sequences.
            epochs: Passes over them (fractional: the last pass stops early).
            batch_size: Sequences per step.
            lr: Peak learning rate.
            seed: Seed of the batch order.
            weight_decay: AdamW weight decay.
            schedule: ``"cosine"`` (5 % linear warm-up, cosine decay to 10 %) or ``"constant"``.
            hook: Called after every step with (step, total steps, loss).
        """
        torch_setup()
        rng = np.random.default_rng(seed)
        per_epoch = math.ceil(len(examples) / batch_size)
        total = max(1, round(per_epoch * epochs))
        plan: list[list[int]] = []
        while len(plan) < total:
            plan += _batches(examples, batch_size, rng)
        plan = plan[:total]
        model = self.model
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.98))
        warm = max(1, total // 20)

        def factor(step: int) -> float:
            if schedule == "constant":
                return 1.0
            if step < warm:
                return (step + 1) / warm
            t = (step - warm) / max(1, total - warm)
            return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * t))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        losses: list[float] = []
        for step, idx in enumerate(plan):
            ids, mask, labels = _batch([examples[i] for i in idx])
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            losses.append(float(out.loss.detach()))
            if hook is not None:
                hook(step + 1, total, losses[-1])
        model.eval()
        return losses

    # -- scoring ------------------------------------------------------------------------------------

    @torch.no_grad()
    def score(self, examples: Sequence[Example], batch_size: int = 256) -> np.ndarray:
        """Log p(target | prefix) of each example, in nats: float array, shape (len(examples),)."""
        torch_setup()
        self.model.eval()
        out = np.zeros(len(examples))
        order = np.argsort([len(e.prefix) + len(e.target) for e in examples], kind="stable")
        for b in range(0, len(order), batch_size):
            idx = order[b : b + batch_size]
            ids, mask, labels = _batch([examples[i] for i in idx])
            out[idx] = _label_log_likelihood(self.model(input_ids=ids, attention_mask=mask).logits, labels)
        return out

    @torch.no_grad()
    def score_codes(
        self, prompts: Sequence[str], targets: Sequence[Sequence[int]], n_codes: int, batch_size: int = 128
    ) -> np.ndarray:
        """Log p(target | prompt, z) of each row under each of the first ``n_codes`` codes, in nats.

        `score` of the L sequences ``prefix(prompt, z) + target`` of a row (the code token itself is
        not scored: a uniform prior), up to float rounding (~1e-6 nats), with the prompt computed once
        instead of L times: the part before the code token runs once, and its KV cache is shared by the
        row's L branches.

        Args:
            prompts: Each row's prompt text.
            targets: Each row's target ids (`Layout.target`).
            n_codes: L.
            batch_size: Sequences (rows x L) per forward pass.

        Returns:
            Float array, shape (len(prompts), L).
        """
        torch_setup()
        self.model.eval()
        # Identical rows are scored once, so they get identical scores: a row's floats depend on the
        # padding of the batch it lands in, and hard EM breaks ties between equal rows by position.
        distinct: dict[tuple[str, tuple[int, ...]], int] = {}
        keys = zip(prompts, map(tuple, targets), strict=True)
        copy_of = np.array([distinct.setdefault(k, len(distinct)) for k in keys])
        unique = np.unique(copy_of, return_index=True)[1]  # the first row of each distinct (prompt, target)
        out = np.zeros((len(unique), n_codes))
        per_batch = max(1, batch_size // n_codes)
        order = unique[np.argsort([len(targets[r]) for r in unique], kind="stable")]  # less padding
        for b in range(0, len(order), per_batch):
            rows = order[b : b + per_batch]
            # Left-padded: every prefix ends in the last column, where the branches continue.
            ids, mask, pos = _left_padded([self.layout.prefix(prompts[r], 0)[:-1] for r in rows])
            head = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
            past = head[_CACHE_ARG]
            past.batch_repeat_interleave(n_codes)  # row i's cache becomes rows i L .. i L + L - 1
            # Each branch is the code token (context, not scored) and the row's target.
            tail, tail_mask, labels = _batch(
                [Example("", (self.layout.code(z),), tuple(targets[r])) for r in rows for z in range(n_codes)]
            )
            logits = self.model(
                input_ids=tail,
                attention_mask=torch.cat([mask.repeat_interleave(n_codes, dim=0), tail_mask], dim=1),
                position_ids=pos[:, -1:].repeat_interleave(n_codes, dim=0) + 1 + torch.arange(tail.shape[1]),
                **{_CACHE_ARG: past},
            ).logits
            out[copy_of[rows]] = _label_log_likelihood(logits, labels).reshape(len(rows), n_codes)
        return out[copy_of]

    # -- sampling -----------------------------------------------------------------------------------

    @torch.no_grad()
    def sample(
        self,
        prefixes: Sequence[Sequence[int]],
        uniforms: Callable[[np.ndarray], np.ndarray],
        *,
        max_new_tokens: int | None = None,
        temperature: float = 1.0,
        batch_size: int = 512,
    ) -> list[list[int]]:
        """Sample a continuation of each prefix in batched generation (KV cache, left padding).

        Args:
            prefixes: Token ids of each row's prefix (``Layout.prefix``).
            uniforms: ``uniforms(rows)`` returns the next uniform of each listed row's own stream
                (int array of row indices into ``prefixes``); one is drawn per generated token of a
                row until its ``<eos>``, so a row's sample does not depend on the other rows.
            max_new_tokens: Tokens per row at most, ``<eos>`` included (default: the model's).
            temperature: Softmax temperature (1 = the model's distribution).
            batch_size: Rows per generation batch.

        Returns:
            The generated ids of each row, without the final ``<eos>`` (truncated rows have none).
        """
        torch_setup()
        self.model.eval()
        limit = int(max_new_tokens or self.meta["max_new_tokens"])
        out: list[list[int]] = [[] for _ in prefixes]
        for b in range(0, len(prefixes), batch_size):
            rows = np.arange(b, min(b + batch_size, len(prefixes)))
            self._sample_batch([prefixes[r] for r in rows], rows, uniforms, limit, temperature, out)
        return out

    def _sample_batch(
        self,
        prefixes: list[Sequence[int]],
        rows: np.ndarray,
        uniforms: Callable[[np.ndarray], np.ndarray],
        limit: int,
        temperature: float,
        out: list[list[int]],
    ) -> None:
        n = len(prefixes)
        width = max(len(p) for p in prefixes)
        if width + limit > self.meta["n_positions"]:
            raise SeffiError(
                f"prompt of {width} tokens + {limit} new tokens exceeds the model's "
                f"{self.meta['n_positions']} positions"
            )
        ids, mask, pos = _left_padded(prefixes)
        banned = torch.from_numpy(self.layout.banned)
        active = np.ones(n, dtype=bool)
        past = None
        step_ids, step_pos = ids, pos
        for _ in range(limit):
            res = self.model(
                input_ids=step_ids,
                attention_mask=mask,
                position_ids=step_pos,
                use_cache=True,
                **{_CACHE_ARG: past},
            )
            past = res[_CACHE_ARG]
            logits = res.logits[:, -1].double() / temperature
            logits[:, banned] = -math.inf
            probs = torch.softmax(logits, dim=-1).numpy()
            live = np.flatnonzero(active)
            cdf = np.cumsum(probs[live], axis=1)
            u = uniforms(rows[live]) * cdf[:, -1]
            tok = np.minimum((cdf <= u[:, None]).sum(axis=1), probs.shape[1] - 1)
            nxt = np.full(n, Vocabulary.EOS, dtype=np.int64)
            nxt[live] = tok
            for j, r in enumerate(live.tolist()):
                if tok[j] == Vocabulary.EOS:
                    active[r] = False
                else:
                    out[rows[r]].append(int(tok[j]))
            if not active.any():
                break
            step_ids = torch.from_numpy(nxt)[:, None]
            step_pos = step_pos[:, -1:] + 1
            mask = torch.cat([mask, torch.ones((n, 1), dtype=mask.dtype)], dim=1)

    @torch.no_grad()
    def code_distribution(self, prompts: Sequence[str], n_codes: int, batch_size: int = 512) -> np.ndarray:
        """The model's ``p(z | x)`` over the first ``n_codes`` codes: float array, shape (len(prompts), L).

        Read from the logits at the code token's position (renormalised over the L codes); meaningful for
        a mixture trained with ``learn_code`` (`MixtureConfig` ``prior="input"``).
        """
        torch_setup()
        self.model.eval()
        codes = np.arange(self.layout.code0, self.layout.code0 + n_codes)
        prefixes = [self.layout.prefix(p, 0)[:-1] for p in prompts]  # everything before the code token
        out = np.zeros((len(prompts), n_codes))
        for b in range(0, len(prefixes), batch_size):
            part = prefixes[b : b + batch_size]
            ids, mask, pos = _left_padded(part)  # the last position is every row's last token
            logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -1].double()
            out[b : b + len(part)] = torch.softmax(logits[:, codes], dim=-1).numpy()
        return out

    def sample_texts(
        self,
        prompts: Sequence[str],
        rng: np.random.Generator,
        codes: Sequence[int] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Sampled traces for ``prompts`` (optionally conditioned on ``codes``), rows sharing ``rng``.

        Convenience for measurements; the envs pass per-row streams to `sample` instead.
        """
        prefixes = [
            self.layout.prefix(p, None if codes is None else int(codes[i])) for i, p in enumerate(prompts)
        ]
        buf = rng.random((len(prompts), self.meta["max_new_tokens"] + 1))
        pos = np.zeros(len(prompts), dtype=np.int64)

        def uniforms(rows: np.ndarray) -> np.ndarray:
            u = buf[rows, pos[rows]]
            pos[rows] += 1
            return u

        ids = self.sample(prefixes, uniforms, **kwargs)
        return [self.layout.decode(i) for i in ids]


def examples_from_rows(
    layout: Layout, rows: Sequence[Any], codes: Sequence[int] | None = None, *, learn_code: bool = False
) -> list[Example]:
    """Training sequences of rows (``input_id``, ``prompt``, ``y_text``); no other row field is read.

    Args:
        layout: The token layout.
        rows: The rows.
        codes: One latent code per row (``None``: no code token, the base LM's sequences).
        learn_code: Put the code token in the target, so training also fits ``p(z | x)`` (the mixture's
            per-input latent prior) and `TaskLM.score` returns ``log p(z | x) + log p(y | x, z)``.
    """
    out = []
    for i, r in enumerate(rows):
        prefix = layout.prefix(r.prompt, None if codes is None else int(codes[i]))
        target = layout.target(r.y_text)
        if learn_code and codes is not None:
            prefix, target = prefix[:-1], [prefix[-1], *target]
        out.append(Example(r.input_id, tuple(prefix), tuple(target)))
    return out
