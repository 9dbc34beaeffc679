"""A tiny randomly initialised causal LM for TRL mechanics tests (moved out of ``seffi.callbacks.trl``)."""

from __future__ import annotations

from typing import Any

from seffi.tasks.base import Task


def tiny_causal_lm(task: Task, *, hidden: int = 16, layers: int = 1, seed: int = 0) -> tuple[Any, Any]:
    """A tiny Llama-style causal LM and a word-level tokenizer for ``task`` (nothing downloaded).

    Its completions are near-random word salad: exactly the junk the validator must survive. The
    tokenizer splits on spaces, keeps newlines as tokens and uses the task vocabulary's ids
    (``<pad>`` = 0, ``<eos>`` = 1, ``<unk>`` = 2, newline = 3).
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = task.vocabulary()
    core = Tokenizer(models.WordLevel({t: i for i, t in enumerate(vocab.tokens)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(" ", "removed"), pre_tokenizers.Split("\n", "isolated")]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        pad_token_id=vocab.PAD,
        eos_token_id=vocab.EOS,
        bos_token_id=vocab.EOS,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config), tokenizer
