"""Writes states_v2.json: format-2 states as seffi at commit 5c8a181 writes them.

Run with seffi at that commit importable (``python tests/coverage/data/make_states_v2.py OUT``). Each
entry holds a state as that version writes it and the numbers it computes from it, so a reader
can be checked against them: a budgeted tracker fed through ``record()`` (latent codes, barcode rows,
runs open at the end, some streams without run indices), a free-form tracker fed through
``update()``, and a ``CoverageMonitor`` state with the episodes that continue it.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from seffi.callbacks import CoverageMonitor
from seffi.coverage import CoverageTracker
from seffi.episodes import EpisodeBatch, parse_rows

STRATS = ("a", "b", "c", "d", "e")
K = 4


class Null:
    def log(self, *a, **k): ...
    def log_snapshot(self, *a, **k): ...
    def finish(self, *a, **k): ...


def numbers(t: CoverageTracker, K: int) -> dict:
    c = t.curves(K, n_boot=0)
    return {
        "coverage": c.coverage.tolist(),
        "valid_coverage": c.valid_coverage.tolist(),
        "full_coverage": c.full_coverage.tolist(),
        "auc": c.auc,
        "n_runs": c.n_runs,
        "n_inputs": c.n_inputs,
        "barcode": t.barcode(K),
    }


def recorded() -> dict:
    rng = np.random.default_rng(24)
    t = CoverageTracker(
        STRATS, task="t", budget=K, barcode_rows=3, barcode_cols=K, num_latents=3, stream_offset=2
    )
    count: dict = {}
    for batch in range(12):
        n = 40
        u = rng.integers(0, 9, n)
        env = rng.integers(0, 4, n)
        si, ri = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        for i in range(n):  # env-like counters: a run of K samples per (input, env), then the next
            c = count.get((u[i], env[i]), 0)
            count[(u[i], env[i])] = c + 1
            si[i], ri[i] = c % K, c // K
        if batch % 3 == 2:
            si[:], ri[:] = -1, -1
        hits = rng.random((n, len(STRATS))) < 0.3
        z = rng.integers(-1, 3, n)
        ids = np.array([f"x{i}" for i in u], dtype=object)
        t.record(
            EpisodeBatch.of(
                t.strategies,
                ids,
                hits,
                valid=rng.random(n) < 0.6,
                env_index=env,
                sample_index=si,
                run_index=ri,
                z=z,
            )
        )
    out = {"state": t.state_dict(), **numbers(t, K), "point_auc": t.point()["auc"]}
    out["latent_coverage"] = t.latent_coverage().tolist()
    return out


def updated() -> dict:
    rng = np.random.default_rng(7)
    t = CoverageTracker(None, barcode_rows=4)
    for _ in range(150):
        x = f"y{int(rng.integers(0, 6))}"
        ms = {f"q{j}" for j in range(6) if rng.random() < 0.25}
        t.update(x, ms, valid=bool(rng.random() < 0.5), stream=int(rng.integers(0, 3)), num_strategies=6)
    return {"state": t.state_dict(), **numbers(t, 5)}


def monitor() -> dict:
    rng = np.random.default_rng(3)

    def ends(n: int) -> list[list]:
        rows = []
        for _ in range(n):
            x, e = f"p{int(rng.integers(0, 5))}", int(rng.integers(0, 3))
            ms = sorted({s for s in STRATS if rng.random() < 0.3})
            rows.append([x, ms, bool(rng.random() < 0.5), e])
        return rows

    first, rest = ends(120), ends(60)
    m = CoverageMonitor(K, STRATS, sinks=Null(), n_boot=0)

    def batch(rows: list[list]) -> object:
        dicts = [{"input_id": x, "strategy_matches": ms, "valid": v} for x, ms, v, _ in rows]
        return parse_rows(dicts, m.coder, env_index=[e for *_, e in rows])

    m.update(batch(first))
    state = json.loads(json.dumps(m.state_dict()))
    m.update(batch(rest))
    c = m.curves()
    return {
        "state": state,
        "rest": rest,
        "coverage": c.coverage.tolist(),
        "valid_coverage": c.valid_coverage.tolist(),
        "samples": m.samples,
        "episodes": m.episodes,
    }


if __name__ == "__main__":
    data = {"recorded": recorded(), "updated": updated(), "monitor": monitor()}
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(data, f, separators=(",", ":"))
