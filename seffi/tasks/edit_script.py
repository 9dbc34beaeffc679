"""Turn a source word into a target word with an edit script."""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from pydantic import Field

from seffi.tasks._steps import Answer, Step, StepTask, parse_int
from seffi.tasks.base import TaskConfig, TaskInput, Vocabulary, register_task

#: ("M"|"S", i, j) match/substitute, ("D", i, -1) delete, ("I", i, j) insert t[j] before source i.
Column = tuple[str, int, int]


class EditScriptConfig(TaskConfig):
    """Words of ``min_length..max_length`` of the first ``alphabet_size`` letters."""

    alphabet_size: int = Field(3, ge=2, le=26)
    min_length: int = Field(3, ge=1, le=8)
    max_length: int = Field(5, ge=1, le=8)

    ordered_fields = (("min_length", "max_length"),)


class EditScriptInput(TaskInput):
    """Edit ``source`` into ``target``."""

    source: str
    target: str


def _align(s: str, t: str, substitutions: bool) -> list[Column]:
    """A minimum-cost alignment; backtrace prefers match/substitute, then delete, then insert."""
    n, m = len(s), len(t)
    big = n + m + 1
    d = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 or j == 0:
                d[i][j] = i + j
                continue
            diag = d[i - 1][j - 1] + (0 if s[i - 1] == t[j - 1] else (1 if substitutions else big))
            d[i][j] = min(diag, d[i - 1][j] + 1, d[i][j - 1] + 1)
    cols: list[Column] = []
    i, j = n, m
    while i or j:
        same = i and j and s[i - 1] == t[j - 1]
        cost = 0 if same else (1 if substitutions else big)
        if i and j and d[i][j] == d[i - 1][j - 1] + cost:
            cols.append(("M" if same else "S", i - 1, j - 1))
            i, j = i - 1, j - 1
        elif i and d[i][j] == d[i - 1][j] + 1:
            cols.append(("D", i - 1, -1))
            i -= 1
        else:
            cols.append(("I", i, j - 1))
            j -= 1
    return cols[::-1]


def _left_to_right(cols: list[Column], t: str, kinds: str = "SDI") -> list[Step]:
    """Edits of the ``kinds`` columns applied from the left (``pos`` in the current word)."""
    out: list[Step] = []
    pos = 0
    for kind, _, j in cols:
        if kind not in kinds:  # not edited here: pos passes its letter, unless one still to insert
            if kind != "I":
                pos += 1
        elif kind == "D":
            out.append(("del", pos))  # the next letter moves to pos
        else:
            out.append(("sub" if kind == "S" else "ins", pos, t[j]))
            pos += 1
    return out


def _right_to_left(cols: list[Column], t: str) -> list[Step]:
    # Positions left of i are untouched, so the source position i is the current index.
    ops = {"S": "sub", "I": "ins"}
    return [("del", i) if k == "D" else (ops[k], i, t[j]) for k, i, j in reversed(cols) if k != "M"]


@register_task
class EditScript(StepTask[EditScriptInput, EditScriptConfig]):
    """Edit scripts with four alignment/ordering procedures."""

    name = "edit_script"
    strategy_names = ("left_to_right", "right_to_left", "delete_then_insert", "substitution_preferring")
    step_format = "sub <i> <letter> | del <i> | ins <i> <letter>"
    answer_format = "answer <letters of the final word>"

    @property
    def alphabet(self) -> str:
        """The letters words are drawn from."""
        return string.ascii_lowercase[: self.config.alphabet_size]

    def _draw(self, rng: np.random.Generator) -> dict[str, Any]:
        cfg = self.config

        def word() -> str:
            n = int(rng.integers(cfg.min_length, cfg.max_length + 1))
            return "".join(self.alphabet[int(i)] for i in rng.integers(cfg.alphabet_size, size=n))

        return {"source": word(), "target": word()}

    def prompt(self, x: EditScriptInput) -> str:
        return f"edit {' '.join(x.source)} to {' '.join(x.target)}"

    def vocabulary(self) -> Vocabulary:
        top = 2 * self.config.max_length + 1
        words = ("edit", "to", "sub", "del", "ins", "answer", *self.alphabet, *map(str, range(top + 1)))
        return Vocabulary(words)

    def _strategy_steps(self, x: EditScriptInput, strategy: str) -> list[Step] | None:
        s, t = x.source, x.target
        if strategy == "left_to_right":
            return _left_to_right(_align(s, t, substitutions=True), t)
        if strategy == "right_to_left":
            return _right_to_left(_align(s, t, substitutions=True), t)
        if strategy == "delete_then_insert":
            cols = _align(s, t, substitutions=False)
            return _left_to_right(cols, t, "D") + _left_to_right([c for c in cols if c[0] != "D"], t, "I")
        k = min(len(s), len(t))
        out: list[Step] = [("sub", i, t[i]) for i in range(k) if s[i] != t[i]]
        out += [("del", k)] * (len(s) - k) + [("ins", i, t[i]) for i in range(k, len(t))]
        return out

    def _parse_step(self, x: EditScriptInput, words: list[str]) -> Step | None:
        arity = {"del": 2, "ins": 3, "sub": 3}.get(words[0] if words else "")
        i = parse_int(words[1]) if arity == len(words) else None
        if i is None or (arity == 3 and not (len(words[2]) == 1 and words[2] in string.ascii_lowercase)):
            return None
        return (words[0], i, *words[2:])

    def _check(self, x: EditScriptInput, steps: list[Step]) -> str | None:
        word = list(x.source)
        for k, step in enumerate(steps, 1):
            op, i = step[0], step[1]
            last = len(word) if op == "ins" else len(word) - 1  # an insert may also append
            if i > last:
                return f"step {k}: {op} {i}: the word has {len(word)} letters"
            if op == "del":
                del word[i]
            elif op == "ins":
                word.insert(i, step[2])
            else:
                word[i] = step[2]
        if "".join(word) != x.target:
            return f"the script gives {''.join(word) or 'the empty word'}, not {x.target}"
        return None

    def _answer(self, x: EditScriptInput, steps: list[Step]) -> Answer:
        return tuple(x.target)

    def _parse_answer(self, x: EditScriptInput, words: list[str]) -> Answer | None:
        ok = words and all(len(w) == 1 and w in string.ascii_lowercase for w in words)
        return tuple(words) if ok else None

    def _wrong_answer(self, x: EditScriptInput, steps: list[Step], rng: np.random.Generator) -> Answer:
        word = list(x.target)
        i = int(rng.integers(len(word)))
        word[i] = str(rng.choice([a for a in self.alphabet if a != word[i]]))
        return tuple(word)

    def _max_steps(self, x: EditScriptInput) -> int:
        return 2 * (len(x.source) + len(x.target)) + 4

    def _off_candidates(self, x: EditScriptInput) -> list[list[Step]]:
        # A reference with an insert-then-delete spliced in: correct, never a procedure.
        base = self._strategy_steps(x, "right_to_left") or []
        return [
            [*base[:p], ("ins", 0, letter), ("del", 0), *base[p:]]
            for p in range(len(base) + 1)
            for letter in self.alphabet[:2]
        ]
