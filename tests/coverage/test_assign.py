"""Input keys held as bytes and run assignment in narrow integer types."""

from __future__ import annotations

import random

import numpy as np

from seffi.coverage import CoverageTracker
from seffi.coverage.assign import InputKeys
from seffi.episodes import EpisodeBatch


def _hostile_keys(rng: random.Random) -> list[tuple[str, str]]:
    """Distinct (task, id) keys over characters of 1 to 4 UTF-8 bytes, NULs, prefixes and lone surrogates."""
    alphabet = ["a", "b", "\x00", "\x7f", "é", "€", "😀", "\ud800", "z", "0"]
    ids = list({"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20))) for _ in range(60)})
    ids += [x + "\x00" for x in ids[:5]] + [x[:3] for x in ids[:5]]  # ids that end in NUL, prefixes
    keys = list(dict.fromkeys((rng.choice(["", "t", "s"]), x) for x in ids))
    return keys + [("u", x) for x in ids[:5] if ("u", x) not in keys]  # one id under two tasks


def test_input_keys_order_and_codes_match_python_on_hostile_ids() -> None:
    """Sorted order, lookups and ids read back are Python's, whatever the ids' bytes."""
    rng = random.Random(0)
    for _ in range(100):
        keys = _hostile_keys(rng)
        rng.shuffle(keys)
        held = InputKeys()
        for a in range(0, len(keys), 7):  # added batch by batch, as a stream adds them
            held.add(keys[a : a + 7])
        assert list(held) == keys and [held[i] for i in range(len(keys))] == keys
        assert held.input_ids().tolist() == [x for _, x in keys]
        assert held.order().tolist() == sorted(range(len(keys)), key=keys.__getitem__)
        code = {k: i for i, k in enumerate(keys)}
        for task in ("", "t", "s", "u", "v"):
            asked = [x for _, x in keys] + ["absent", "a" * 30]
            want = [code.get((task, x), -1) for x in asked]
            assert held.codes(task, asked).tolist() == want


def test_input_keys_sort_long_shared_prefixes() -> None:
    """Ids that agree on many bytes and differ late (or only in length) sort as Python sorts them."""
    rng = random.Random(1)
    stem = "prompt/" + "x" * 40
    ids = list({stem + "".join(rng.choice("ab\x00") for _ in range(rng.randint(0, 12))) for _ in range(300)})
    held = InputKeys()
    held.add([("", x) for x in ids])
    assert [ids[i] for i in held.order().tolist()] == sorted(ids)


def _batch(ids: list[str], env: list[int], si: list[int], ri: list[int], hit: list[int]) -> EpisodeBatch:
    hits = np.zeros((len(ids), 3), dtype=bool)
    hits[np.arange(len(ids)), hit] = True
    n = len(ids)
    return EpisodeBatch(
        ("a", "b", "c"),
        np.array(ids, dtype=object),
        hits,
        np.ones(n, dtype=bool),
        np.array(env),
        np.array(si),
        np.array(ri),
        np.full(n, -1),
    )


def _runs(t: CoverageTracker) -> list[tuple]:
    s = t.state_dict()
    return [s["runs"][k] for k in ("input", "stream", "n", "first_hit")] + [s["open_runs"]]


def test_large_indices_and_streams_assign_runs_as_small_ones() -> None:
    """Run and sample indices beyond 2^31 and streams beyond 2^40 are held exactly (no wrap-around).

    Runs follow only whether a run_index changes and whether a sample_index grows, so indices
    moved up by 2^40 (and an offset of streams) must give the same runs as the small ones.
    """
    rng = np.random.default_rng(0)
    steps = [
        (
            [f"x{i}" for i in rng.integers(0, 5, 16)],
            rng.integers(0, 4, 16).tolist(),
            rng.integers(0, 300, 16).tolist(),
            rng.integers(0, 3, 16).tolist(),
            rng.integers(0, 3, 16).tolist(),
        )
        for _ in range(30)
    ]
    big = 2**40
    small_t = CoverageTracker(("a", "b", "c"), budget=4)
    big_t = CoverageTracker(("a", "b", "c"), budget=4, stream_offset=big)
    for ids, env, si, ri, hit in steps:
        small_t.record(_batch(ids, env, si, ri, hit))
        big_t.record(_batch(ids, env, [v + big for v in si], [v * big + 7 for v in ri], hit))
    small, large = _runs(small_t), _runs(big_t)
    for a, b in zip(small[:-1], large[:-1], strict=True):
        assert a == b or a == [v - big for v in b]  # streams: moved by the offset
    assert large[1] == [v + big for v in small[1]]
    for a, b in zip(small[-1], large[-1], strict=True):  # open runs: the indices as reported
        assert b["sample_index"] == a["sample_index"] + big and b["run_index"] == a["run_index"] * big + 7
        assert (a["run"], a["env_index"], a["count"]) == (b["run"], b["env_index"], b["count"])
