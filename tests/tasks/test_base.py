"""The base contract (seffi/tasks/base.py), exercised through a tiny task with known answers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from seffi.tasks import (
    MAX_TRACE_CHARS,
    Task,
    TaskConfig,
    TaskInput,
    ValidationResult,
    Vocabulary,
    get_task,
)
from seffi.tasks._steps import StepTask
from seffi.tasks.coin_sum import CoinSum, CoinSumConfig, CoinSumInput

# -- Vocabulary -----------------------------------------------------------------------------------


def test_vocabulary_specials_and_ids():
    v = Vocabulary(("swap", "0", "1", "swap"))
    assert v.tokens == ("<pad>", "<eos>", "<unk>", "\n", "swap", "0", "1")
    assert (v.PAD, v.EOS, v.UNK, v.NEWLINE) == (0, 1, 2, 3)
    assert len(v) == 7 and v == Vocabulary(("swap", "0", "1")) and v != Vocabulary(("0", "swap", "1"))
    assert hash(v) == hash(Vocabulary(("swap", "0", "1")))


@pytest.mark.parametrize("bad", [("",), ("a b",), ("x\n",), ("<eos>",), ("\n",)])
def test_vocabulary_rejects_bad_words(bad):
    with pytest.raises(ValueError):
        Vocabulary(bad)


def test_vocabulary_encode_decode():
    v = Vocabulary(("swap", "0", "1"))
    assert v.encode("swap 0 1\nswap 1 0") == [4, 5, 6, 3, 4, 6, 5]
    assert v.encode("swap 7") == [4, v.UNK]
    assert v.encode("") == []
    # Non-canonical whitespace collapses to the canonical form.
    assert v.decode(v.encode("  swap   0\t1 \n swap 1 ")) == "swap 0 1\nswap 1"
    # decode stops at <eos>, skips <pad>, keeps <unk> and maps out-of-range ids to <unk>.
    assert v.decode([0, 4, 0, 5, 1, 6]) == "swap 0"
    assert v.decode([4, 2, 99, -1]) == "swap <unk> <unk> <unk>"
    assert v.decode(np.array([4, 3, 5], dtype=np.int64)) == "swap\n0"


# -- ValidationResult and configs -----------------------------------------------------------------


def test_validation_result_constructors_and_invariants():
    assert ValidationResult.correct({"a"}) == ValidationResult(
        parse_ok=True, valid=True, strategy_matches=frozenset({"a"})
    )
    r = ValidationResult.invalid("wrong answer", frozenset({"a"}))
    assert r.parse_ok and not r.valid and r.strategy_matches == {"a"}
    u = ValidationResult.unparsable("junk")
    assert not u.parse_ok and not u.valid and not u.strategy_matches and u.error == "junk"
    with pytest.raises(ValidationError):
        ValidationResult(parse_ok=False, valid=False, strategy_matches=frozenset({"a"}))
    with pytest.raises(ValidationError):
        ValidationResult(parse_ok=False, valid=True)
    with pytest.raises(ValidationError):
        r.valid = True  # frozen


def test_task_config_validation():
    with pytest.raises(ValidationError):
        TaskConfig(invalid_rate=0.6, off_strategy_rate=0.4)
    with pytest.raises(ValidationError):
        TaskConfig(skew=-1)
    with pytest.raises(ValidationError):
        TaskConfig(unknown=1)
    with pytest.raises(ValueError):
        get_task("sort_swaps", config=TaskConfig())
    task = get_task("sort_swaps", skew=2.0)
    with pytest.raises(ValueError):
        type(task)(task.config, skew=1.0)  # config object and overrides together


# -- a tiny task with hand-computable laws ---------------------------------------------------------


class PickInput(TaskInput):
    n: int


class Pick(Task[PickInput, TaskConfig]):
    """Say a number: strategy 'even' says 2n, 'odd' says 2n+1, 'same' says 2n as well (ambiguous)."""

    name = "pick_test"

    def strategies(self) -> tuple[str, ...]:
        return ("even", "odd", "same", "never")

    def _generate(self, rng: np.random.Generator) -> dict[str, Any]:
        return {"n": int(rng.integers(0, 10_000))}

    def prompt(self, x: PickInput) -> str:
        return f"pick {x.n}"

    def solve(self, x: PickInput, strategy: str) -> str | None:
        return None if strategy == "never" else f"answer {2 * x.n + (strategy == 'odd')}"

    def _validate(self, x: PickInput, y_text: str) -> ValidationResult:
        words = y_text.split()
        if len(words) != 2 or words[0] != "answer" or not words[1].isdecimal() or len(words[1]) > 9:
            return ValidationResult.unparsable("expected 'answer <n>'")
        value = int(words[1])
        if value == -1:
            return ValidationResult.invalid("never")
        if value > 2 * x.n + 1:
            return ValidationResult.invalid("too big", frozenset({"odd"}))
        matches = {"even", "same"} if value == 2 * x.n else {"odd"} if value == 2 * x.n + 1 else set()
        return ValidationResult.correct(matches)

    def off_strategy_trace(self, x: PickInput, rng: np.random.Generator) -> str:
        return "answer 0" if x.n else "answer 1"

    def invalid_trace(self, x: PickInput, strategy: str, rng: np.random.Generator) -> str:
        return f"answer {2 * x.n + 5 + int(rng.integers(3))}" if strategy == "odd" else "answer -1"

    def vocabulary(self) -> Vocabulary:
        return Vocabulary(("pick", "answer"))


class RangeConfig(TaskConfig):
    low: int = 0
    high: int = 9

    ordered_fields = (("low", "high"),)


def test_ordered_fields_are_checked():
    assert (RangeConfig(low=3, high=3).low, RangeConfig().high) == (3, 9)
    with pytest.raises(ValidationError, match="low must be <= high"):
        RangeConfig(low=4, high=3)
    assert "ordered_fields" not in RangeConfig.model_fields  # a class setting, not a config field
    assert "ordered_fields" not in RangeConfig().model_dump()
    with pytest.raises(ValidationError, match="min_disks must be <= max_disks"):
        get_task("hanoi", min_disks=3, max_disks=2)


def test_input_and_config_classes_come_from_the_type_parameters():
    class Ranged(Task[PickInput, RangeConfig]):  # abstract: only its class attributes are read
        name = "ranged_test"

    class Declared(Task[PickInput, RangeConfig]):
        name = "declared_test"
        config_cls = TaskConfig

    class Child(Ranged):
        name = "child_test"

    assert (Pick.input_cls, Pick.config_cls) == (PickInput, TaskConfig)
    assert (Ranged.input_cls, Ranged.config_cls) == (PickInput, RangeConfig)
    assert (Declared.input_cls, Declared.config_cls) == (PickInput, TaskConfig)  # the class body wins
    assert (Child.input_cls, Child.config_cls) == (PickInput, RangeConfig)
    assert "input_cls" not in vars(StepTask)  # a generic subclass leaves them to its subclasses
    assert (CoinSum.input_cls, CoinSum.config_cls) == (CoinSumInput, CoinSumConfig)


def test_make_inputs_prefix_and_ids():
    task = Pick()
    ten = task.make_inputs(10, seed=3)
    assert [x.id for x in task.make_inputs(4, seed=3)] == [x.id for x in ten[:4]]
    assert len({x.id for x in ten}) == 10
    assert task.make_input(n=ten[0].n).id == ten[0].id
    assert task.make_inputs(0) == []
    for bad in (-1, 2.5, "3"):
        with pytest.raises(ValueError):
            task.make_inputs(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        task.make_inputs(2, seed=-1)


def test_validate_guard():
    task = Pick()
    x = task.make_input(n=3)
    assert task.validate_y_text(x, b"answer 6").strategy_matches == {"even", "same"}
    assert not task.validate_y_text(x, b"\xff").parse_ok
    assert "expected text" in task.validate_y_text(x, 6).error
    assert "too long" in task.validate_y_text(x, "a" * (MAX_TRACE_CHARS + 1)).error
    assert "empty" in task.validate_y_text(x, " \n\t").error


def test_reference_and_feasibility():
    task = Pick()
    x = task.make_input(n=3)
    assert task.feasible_strategies(x) == ("even", "odd", "same")
    assert task.reference_match_sets(x) == {
        "even": frozenset({"even", "same"}),
        "odd": frozenset({"odd"}),
        "same": frozenset({"even", "same"}),
    }
    with pytest.raises(ValueError):
        task.reference(x, "nope")


@pytest.mark.parametrize("skew", [0.0, 1.0, 2.5])
def test_strategy_weights_are_zipf_over_feasible(skew):
    task = Pick(skew=skew)
    x = task.make_input(n=3)
    w = task.strategy_weights(x)
    assert set(w) == {"even", "odd", "same"}
    expected = np.array([1.0, 2.0, 3.0]) ** -skew
    assert sorted(w.values(), reverse=True) == pytest.approx(list(expected / expected.sum()))


def test_rare_strategy_varies_by_input():
    task = Pick()
    rarest = {min(task.strategy_weights(x), key=task.strategy_weights(x).get) for x in task.make_inputs(30)}
    assert rarest == {"even", "odd", "same"}


def test_exact_laws_by_hand():
    task = Pick(skew=0.0, invalid_rate=0.2, off_strategy_rate=0.1)
    x = task.make_input(n=3)
    on = 0.7 / 3
    assert task.base_distribution(x) == pytest.approx({"even": on, "odd": on, "same": on, "never": 0.0})
    assert task.base_match_distribution(x) == pytest.approx(
        {
            frozenset({"even", "same"}): 2 * on,
            frozenset({"odd"}): on + 0.2 / 3,  # the odd invalid trace keeps its match
            frozenset(): 0.1 + 2 * 0.2 / 3,
        }
    )
    assert task.base_match_distribution(x, valid_only=True) == pytest.approx(
        {frozenset({"even", "same"}): 2 * on, frozenset({"odd"}): on, frozenset(): 0.3}
    )
    modes = task.base_modes(x)
    assert sum(m.probability for m in modes) == pytest.approx(1.0)
    assert {m.kind for m in modes} == {"strategy", "invalid", "off_strategy"}


def test_sample_mode_frequencies():
    task = Pick(skew=1.0, invalid_rate=0.2, off_strategy_rate=0.1)
    x = task.make_input(n=3)
    rng = np.random.default_rng(0)
    n = 20_000
    counts: dict[tuple[str, str | None], int] = {}
    for _ in range(n):
        m = task.sample_mode(x, rng)
        counts[(m.kind, m.strategy)] = counts.get((m.kind, m.strategy), 0) + 1
    for m in task.base_modes(x):
        p = m.probability
        assert abs(counts.get((m.kind, m.strategy), 0) / n - p) < 5 * np.sqrt(p * (1 - p) / n)


def test_training_rows():
    task = Pick()
    rows = list(task.training_rows(3, 5, seed=1))
    assert len(rows) == 15 and rows == list(task.training_rows(3, 5, seed=1))
    assert [r.input_id for r in rows[::5]] == [
        r.input_id for r in list(task.training_rows(3, 2, seed=1))[::2]
    ]
    for r in rows:
        assert r.prompt.startswith("pick ")
        assert (r.strategy is None) == (r.kind == "off_strategy")


def test_describe():
    d = get_task("coin_sum").describe()
    assert d["name"] == "coin_sum" and d["strategies"][0] == "greedy" and d["config"]["skew"] == 1.0
