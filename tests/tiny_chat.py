"""A tiny random Qwen2 chat model: a word-level tokenizer with a ChatML-style chat template.

Built in memory (torch seed 0), small enough that a test samples from it or trains it with GRPO on
the CPU in seconds. Needs the torch, tokenizers and transformers packages (the lm or trl extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SPECIAL = ["<pad>", "<|im_end|>", "<|im_start|>", "<unk>"]
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_chat_model(
    words: Sequence[str], *, intermediate_size: int, max_position_embeddings: int
) -> tuple[Any, Any]:
    """A one-layer Qwen2 (hidden size 16) over ``SPECIAL + words`` and its tokenizer: words split on
    spaces and newlines, joined back with spaces; ``<pad>`` pads and ``<|im_end|>`` ends a turn."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    vocab = {t: i for i, t in enumerate([*SPECIAL, *words])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(" ", "removed"), pre_tokenizers.Split("\n", "isolated")]
    )
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # words joined by spaces
    core.add_special_tokens(SPECIAL)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<|im_end|>", unk_token="<unk>"
    )
    tok.chat_template = TEMPLATE
    config = Qwen2Config(
        vocab_size=len(vocab), hidden_size=16, intermediate_size=intermediate_size, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True, pad_token_id=vocab["<pad>"], eos_token_id=vocab["<|im_end|>"],
        bos_token_id=None,
    )  # fmt: skip
    torch.manual_seed(0)
    return Qwen2ForCausalLM(config), tok
