"""The task contract, checked the same way for every registered task (parametrized by task name).

Task-specific tests live in ``test_<task>.py``; this module holds what every task must satisfy and
each task's golden instances.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seffi.tasks import Task, ValidationResult, get_task, list_tasks
from tests.tasks.huge_inputs import huge_inputs

SEED = 123
N_INPUTS = 40
#: Tasks checked on a smaller pool than ``N_INPUTS`` (Hanoi has only 18 distinct default inputs).
POOL_SIZES = {"countdown": 25, "hanoi": 12}
#: Per task: (index in make_inputs(pool size, SEED), id, trace_digest), pinned from a reviewed run.
GOLDEN: dict[str, tuple[tuple[int, str, str], ...]] = {
    "coin_sum": (
        (0, "7812992d3aba", "d0c8df151263caed"),
        (1, "c559ae258f13", "7a9f2f708957a916"),
        (39, "7d3e5038d064", "4117ce231da804fc"),
    ),
    "countdown": (
        (0, "a7672afe93be", "eacf43c66a88b398"),
        (1, "24306a48be45", "3efc1a6802503506"),
        (24, "d2adc828d6f3", "166ed3bb36854648"),
    ),
    "edit_script": (
        (0, "f24185de6814", "7a412ddb999b61e9"),
        (1, "7f079d100a39", "1066b3079a06b902"),
        (39, "419ec3daae66", "66b6e029f9d8956b"),
    ),
    "graph_traversal": (
        (0, "dc45a883b8d9", "7bde63ce8417105b"),
        (1, "3dfc2c09fd23", "71cf1008457d9062"),
        (39, "31ef219f5883", "5a489900e71e0615"),
    ),
    "grid_routes": (
        (0, "e00e813eeff1", "866e489ea1fbffa8"),
        (1, "d4f8df7ceec5", "4b26b238bcb54507"),
        (39, "9dc7d4ef0d8f", "6a7b0e9b50376f48"),
    ),
    "hanoi": (
        (0, "091cbb06d175", "bcc73f242ac87f3b"),
        (1, "c6812b1b9ea1", "f462701dba9a7e35"),
        (11, "1f1727dc1d35", "6dbd4e03138fcd7a"),
    ),
    "sort_swaps": (
        (0, "7fbdbcd67371", "6f7b2c7d859a1657"),
        (1, "a0499dbf2d8e", "d2f601f59b8db719"),
        (39, "e297d21dce74", "f818a27df00e6834"),
    ),
}
MC_INPUTS = 3
MC_SAMPLES = 2000
# Derandomized so CI is repeatable.
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None)


def sound(result: ValidationResult) -> None:
    """What every validation result must satisfy, whatever the input text."""
    assert isinstance(result, ValidationResult)
    assert not (result.error or "").startswith("internal validator error"), result.error
    if not result.parse_ok:
        assert not result.valid and not result.strategy_matches and result.error
    if not result.valid:
        assert result.error


def trace_digest(task: Task[Any, Any], x: Any) -> str:
    """sha256 (first 16 hex digits) over the prompt and every strategy's reference trace."""
    parts = [task.prompt(x)] + [task.solve(x, s) or "<none>" for s in task.strategies()]
    return hashlib.sha256("\n\n".join(parts).encode()).hexdigest()[:16]


def all_traces(task: Task[Any, Any], x: Any) -> list[str]:
    """Reference, invalid and off-strategy traces of ``x`` (seeded)."""
    rng = np.random.default_rng(7)
    feasible = task.feasible_strategies(x)
    return [
        *(task.solve(x, s) for s in feasible),
        *(task.invalid_trace(x, s, rng) for s in feasible),
        task.off_strategy_trace(x, rng),
    ]


@pytest.fixture(scope="module", params=list_tasks())
def task_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def task(task_name: str) -> Task[Any, Any]:
    return get_task(task_name)


@pytest.fixture(scope="module")
def inputs(task_name: str, task: Task[Any, Any]) -> list[Any]:
    return task.make_inputs(pool_size(task_name), seed=SEED)


def pool_size(task_name: str) -> int:
    """How many inputs the contract draws for ``task_name``."""
    return POOL_SIZES.get(task_name, N_INPUTS)


# -- attribution ------------------------------------------------------------------------------


def test_every_feasible_reference_is_valid_and_matches_its_strategy(task, inputs) -> None:
    for x in inputs:
        feasible = task.feasible_strategies(x)
        assert feasible, x
        for s in feasible:
            result = task.validate_y_text(x, task.solve(x, s))
            sound(result)
            assert result.valid and result.parse_ok and s in result.strategy_matches, (x, s, result)
            # Two strategies share a match iff their reference traces are the same text.
            for other in result.strategy_matches:
                assert task.solve(x, other) == task.solve(x, s)


def test_infeasible_strategies_have_no_trace_and_no_base_mass(task, inputs) -> None:
    for x in inputs:
        dist = task.base_distribution(x)
        for s in task.strategies():
            if s not in task.feasible_strategies(x):
                assert task.solve(x, s) is None and dist[s] == 0.0
                with pytest.raises(ValueError):
                    task.invalid_trace(x, s, np.random.default_rng(0))


def test_invalid_trace_is_parsed_wrong_and_keeps_matches_for_any_rng(task, inputs) -> None:
    for x in inputs:
        for s in task.feasible_strategies(x):
            reference = task.validate_y_text(x, task.solve(x, s)).strategy_matches
            for seed in range(3):
                result = task.validate_y_text(x, task.invalid_trace(x, s, np.random.default_rng(seed)))
                sound(result)
                assert result.parse_ok and not result.valid and result.strategy_matches == reference


def test_off_strategy_trace_is_valid_with_no_match(task, inputs) -> None:
    for x in inputs:
        for seed in range(3):
            trace = task.off_strategy_trace(x, np.random.default_rng(seed))
            result = task.validate_y_text(x, trace)
            sound(result)
            assert result.valid and result.strategy_matches == frozenset(), (x, trace, result)


def test_validation_is_pure(task, inputs) -> None:
    x = inputs[0]
    for trace in all_traces(task, x):
        assert task.validate_y_text(x, trace) == task.validate_y_text(x, trace)
        # Surrounding whitespace and a trailing newline do not change the verdict.
        assert task.validate_y_text(x, f"  {trace}\n") == task.validate_y_text(x, trace)


# -- determinism ------------------------------------------------------------------------------


def test_same_seed_same_inputs_and_traces(task_name, task, inputs) -> None:
    again = get_task(task_name).make_inputs(pool_size(task_name), seed=SEED)
    assert [x.id for x in again] == [x.id for x in inputs]
    assert [trace_digest(task, x) for x in again] == [trace_digest(task, x) for x in inputs]
    assert len({x.id for x in inputs}) == len(inputs)
    prefix = task.make_inputs(5, seed=SEED)
    assert [x.id for x in prefix] == [x.id for x in inputs[:5]]
    other = task.make_inputs(5, seed=SEED + 1)
    assert [x.id for x in other] != [x.id for x in prefix]
    for x in inputs[:5]:  # ids are content hashes: rebuilding from the fields gives the same id
        assert task.make_input(**x.model_dump(exclude={"id"})).id == x.id


def test_golden_instances(task_name, task, inputs) -> None:
    golden = GOLDEN.get(task_name)
    assert golden, "pin golden instances"
    got = [(i, inputs[i].id, trace_digest(task, inputs[i])) for i, _, _ in golden]
    assert got == list(golden)


def test_training_rows_reproducible_and_consistent(task) -> None:
    rows = list(task.training_rows(4, 6, seed=5))
    assert rows == list(task.training_rows(4, 6, seed=5))
    assert rows != list(task.training_rows(4, 6, seed=6))
    assert len(rows) == 24
    inputs = {x.id: x for x in _row_inputs(task, 4, seed=5)}
    for row in rows:
        x = inputs[row.input_id]
        assert row.prompt == task.prompt(x)
        result = task.validate_y_text(x, row.y_text)
        sound(result)
        if row.kind == "strategy":
            assert result.valid and row.strategy in result.strategy_matches
        elif row.kind == "invalid":
            assert not result.valid and row.strategy in result.strategy_matches
        else:
            assert result.valid and not result.strategy_matches and row.strategy is None


# -- vocabulary -------------------------------------------------------------------------------


def test_vocabulary_covers_prompts_and_traces_and_round_trips(task, inputs) -> None:
    vocab = task.vocabulary()
    assert vocab == task.vocabulary()
    for x in inputs:
        assert vocab.UNK not in vocab.encode(task.prompt(x))
        assert vocab.decode(vocab.encode(task.prompt(x))) == task.prompt(x)
        for trace in all_traces(task, x):
            ids = vocab.encode(trace)
            assert vocab.UNK not in ids, trace
            assert vocab.decode([*ids, vocab.EOS, 5, 6]) == trace


# -- the base sampler -------------------------------------------------------------------------


def test_base_laws_are_probability_distributions(task, inputs) -> None:
    cfg = task.config
    for x in inputs:
        dist = task.base_distribution(x)
        assert set(dist) == set(task.strategies())
        assert sum(dist.values()) == pytest.approx(1 - cfg.invalid_rate - cfg.off_strategy_rate)
        for valid_only in (False, True):
            law = task.base_match_distribution(x, valid_only=valid_only)
            assert sum(law.values()) == pytest.approx(1.0)
            assert all(p > 0 for p in law.values())
        # Without incorrect matches the law is the base distribution pushed through the matches.
        law = task.base_match_distribution(x, valid_only=True)
        pushed: Counter[frozenset[str]] = Counter()
        for s, m in task.reference_match_sets(x).items():
            pushed[m] += dist[s]
        pushed[frozenset()] += cfg.invalid_rate + cfg.off_strategy_rate
        assert {k: v for k, v in pushed.items() if v > 0} == pytest.approx(law)


def test_sample_frequencies_agree_with_exact_laws(task, inputs) -> None:
    n = MC_SAMPLES
    for k, x in enumerate(inputs[:MC_INPUTS]):
        rng = np.random.default_rng([SEED, k])
        texts = [task.sample_y_text(x, rng) for _ in range(n)]
        results = [task.validate_y_text(x, t) for t in texts]
        for r in results:
            sound(r)
        raw = Counter(r.strategy_matches for r in results)
        valid = Counter(r.strategy_matches if r.valid else frozenset() for r in results)
        for observed, law in (
            (raw, task.base_match_distribution(x)),
            (valid, task.base_match_distribution(x, valid_only=True)),
        ):
            assert set(observed) <= set(law)
            for key, p in law.items():
                _close(observed[key] / n, p, n, key)
        # base_distribution: strategies sharing a reference trace share its frequency.
        dist = task.base_distribution(x)
        by_text: dict[str, float] = {}
        for s in task.feasible_strategies(x):
            by_text[task.solve(x, s)] = by_text.get(task.solve(x, s), 0.0) + dist[s]
        counts = Counter(texts)
        for text, p in by_text.items():
            _close(counts[text] / n, p, n, text)


def test_rare_strategy_varies_by_input(task, inputs) -> None:
    rarest = {min(task.strategy_weights(x).items(), key=lambda kv: (kv[1], kv[0]))[0] for x in inputs}
    assert len(rarest) >= 2


# -- bad input --------------------------------------------------------------------------------


def test_junk_never_raises_and_never_matches(task, inputs) -> None:
    x = inputs[0]
    reference = task.solve(x, task.feasible_strategies(x)[0])
    junk = [
        "",
        " ",
        "\n\n\t",
        "answer",
        "answer\n",
        "\x00\x01\x02answer 1",
        "answer \u0661\u0662",
        "answer \u00b2",
        "answer " + "9" * 5000,
        "\u202e" + reference,
        reference.replace("\n", "\r\n"),
        reference.replace(" ", "\u00a0"),
        reference.replace("\n", "\u2028"),
        "\n".join([reference] * 3),
        reference + "\nanswer 1",
        "answer 1\n" + reference,
        reference.encode(),
        b"\xff\xfe\x00garbage",
        None,
        12,
        ["answer"],
        (reference + "\n") * 20,
        "\n" * 10_000 + "answer 1",
    ]
    for text in junk:
        result = task.validate_y_text(x, text)
        sound(result)
    for cut in range(len(reference)):  # every truncation
        sound(task.validate_y_text(x, reference[:cut]))


def test_huge_inputs_are_validated_soundly_and_match_no_strategy(task, inputs) -> None:
    """Megabyte junk (one letter, code points, bytes, repeated steps or answers), a trace just under the
    length cap and a 49,000-number line each get a sound result that matches no strategy."""
    for text in huge_inputs(task, inputs[0]).values():
        result = task.validate_y_text(inputs[0], text)
        sound(result)
        assert not result.strategy_matches


@FUZZ
@given(text=st.text(max_size=300))
def test_fuzz_random_text(task, inputs, text: str) -> None:
    result = task.validate_y_text(inputs[0], text)
    sound(result)
    assert result == task.validate_y_text(inputs[0], text)


@FUZZ
@given(data=st.data())
def test_fuzz_mutated_valid_traces(task, inputs, data: st.DataObject) -> None:
    x = data.draw(st.sampled_from(inputs[:5]))
    trace = data.draw(st.sampled_from(all_traces(task, x)))
    words = trace.replace("\n", " \n ").split(" ")
    vocab_words = [w for w in task.vocabulary().tokens if w not in ("<pad>", "<eos>", "<unk>")]
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["delete", "insert", "replace", "swap", "char"]))
        i = data.draw(st.integers(0, max(len(words) - 1, 0)))
        if op == "delete" and words:
            del words[i]
        elif op == "insert":
            words.insert(i, data.draw(st.sampled_from([*vocab_words, "", "x", "-1", "\x00"])))
        elif op == "replace" and words:
            words[i] = data.draw(st.sampled_from([*vocab_words, "0" * 7, "٣"]))
        elif op == "swap" and len(words) > 1:
            j = data.draw(st.integers(0, len(words) - 1))
            words[i], words[j] = words[j], words[i]
        elif op == "char":
            words.insert(i, data.draw(st.text(max_size=3)))
    mutated = " ".join(words).replace(" \n ", "\n")
    result = task.validate_y_text(x, mutated)
    sound(result)
    if result.strategy_matches:
        # A match means the steps are exactly some strategy's reference steps.
        body = [ln.split() for ln in mutated.strip().split("\n")[:-1]]
        refs = {s: [ln.split() for ln in task.solve(x, s).split("\n")[:-1]] for s in result.strategy_matches}
        assert all(len(r) == len(body) for r in refs.values())


def _row_inputs(task: Task[Any, Any], n: int, seed: int) -> list[Any]:
    """The inputs ``training_rows(n, ..., seed)`` draws (its first spawned child seeds the inputs)."""
    from seffi._seeding import spawn

    return task.make_inputs(n, spawn(seed, 2)[0])


def _close(freq: float, p: float, n: int, what: object) -> None:
    """A seeded Monte-Carlo frequency within 5 binomial standard errors of ``p``."""
    tolerance = 5 * np.sqrt(p * (1 - p) / n) + 1.5 / n
    assert abs(freq - p) <= tolerance, (what, freq, p, tolerance)
