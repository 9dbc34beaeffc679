"""A tiny chat model trained here to answer as a strategy judge, for tests against a real server.

It reads a judge prompt whose completion names ``for`` (the loop strategy) and/or ``fib(n-1)``
(recursion) and answers ``{"strategies": [...]}`` in JSON; a completion that says ``hmm`` gets an
answer that is not JSON. Trained on the CPU in seconds (torch seed 0) and saved with
``save_pretrained`` for ``transformers serve``.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from seffi.score.judge import JudgeLabeler
from tests.tiny_chat import SPECIAL, tiny_chat_model

STRATEGIES = ("loop", "recursion")
FILLER = ("def", "fib(n):", "return", "n", "+", "a", "b", "x", "=", "1", "if", "else", "print(x)")
TRIGGERS = {"for": "loop", "fib(n-1)": "recursion"}
#: Answer words: joined by spaces they are the JSON the judge parses.
ANSWERS = {
    (): ['{"strategies":', "[]}"],
    ("loop",): ['{"strategies":', '["loop"]}'],
    ("recursion",): ['{"strategies":', '["recursion"]}'],
    ("loop", "recursion"): ['{"strategies":', '["loop",', '"recursion"]}'],
}
MALFORMED = ["I", "think", "it", "is", "a", "loop"]


def judge_words(template_words: list[str]) -> list[str]:
    words = [*template_words, *FILLER, *TRIGGERS, "hmm", *MALFORMED, "user", "assistant"]
    words += [w for answer in ANSWERS.values() for w in answer]
    return list(dict.fromkeys(w for w in words if w not in SPECIAL))


def judge_cases() -> list[tuple[str, tuple[str, ...] | None]]:
    """Every completion the judge is trained on, with the strategies it answers (None: not JSON)."""
    cases = []
    for n, picks in itertools.product((2, 3), itertools.product((0, 1), (0, 1), (0, 1))):
        for start in range(0, len(FILLER) - n, 3):
            body = list(FILLER[start : start + n])
            found = tuple(s for s, on in zip(STRATEGIES, picks[:2], strict=True) if on)
            body += [w for w, on in zip(TRIGGERS, picks[:2], strict=True) if on]
            malformed = picks[2] and not any(picks[:2])  # "hmm" alone: an answer that is not JSON
            if malformed:
                body.append("hmm")
            if picks[2] and not malformed:
                continue
            cases.append((" ".join(body), None if malformed else found))
    return cases


#: The task prompt of every sample the judge sees in the tests.
TASK_PROMPT = "write fib"


def train_tiny_judge(out: Path, template: str, *, steps: int = 300) -> Path:
    """Train the judge on every completion of 2-4 filler words with triggers inserted; save to ``out``."""
    import torch
    from transformers import GraniteConfig, GraniteForCausalLM

    words = judge_words(template.replace("{strategies}", ", ".join(STRATEGIES)).split() + TASK_PROMPT.split())
    _, tok = tiny_chat_model(words, intermediate_size=8, max_position_embeddings=8)  # its tokenizer
    config = GraniteConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
        bos_token_id=None,
    )  # fmt: skip  # granite: AutoTokenizer loads tokenizer.json as saved (qwen2 would rebuild a BPE)
    torch.manual_seed(0)
    model = GraniteForCausalLM(config)
    judge = JudgeLabeler("http://unused", STRATEGIES, model="tiny", template=template, cache=None)
    examples = []
    for completion, found in judge_cases():
        answer = MALFORMED if found is None else ANSWERS[found]
        chat = tok.apply_chat_template(
            [{"role": "user", "content": judge.prompt(TASK_PROMPT, completion)}],
            tokenize=False,
            add_generation_prompt=True,
        )
        ids = tok(chat + " ".join(answer) + " <|im_end|>", add_special_tokens=False)["input_ids"]
        examples.append((ids, len(tok(chat, add_special_tokens=False)["input_ids"])))
    width = max(len(ids) for ids, _ in examples)
    x = torch.full((len(examples), width), tok.pad_token_id)
    labels = torch.full_like(x, -100)
    mask = torch.zeros_like(x)
    for row, (ids, n_prompt) in enumerate(examples):
        x[row, : len(ids)] = torch.tensor(ids)
        labels[row, n_prompt : len(ids)] = x[row, n_prompt : len(ids)]
        mask[row, : len(ids)] = 1
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=x, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
