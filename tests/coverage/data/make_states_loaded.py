"""Writes states_loaded.json: what seffi at commit 0f92f2e loads each older stored state to.

Run with seffi at that commit importable (``python tests/coverage/data/make_states_loaded.py OUT``).
Each entry holds a stored state and the ``state_dict()`` that version writes after loading it, so
a reader can be checked to load it to the same tracker: the format-1 tracker and monitor states of
states_v1.json, a format-2 state stored without ``runs.beyond`` (a run open past its budget), and
format-2 states with the strategy-entropy metric (one complete, one partial: loaded from a state
without it, then fed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from seffi.callbacks import CoverageMonitor
from seffi.coverage import CoverageTracker
from seffi.episodes import EpisodeBatch

HERE = Path(__file__).parent


class Null:
    def log(self, *a, **k): ...
    def log_snapshot(self, *a, **k): ...
    def finish(self, *a, **k): ...


def main(out: str) -> None:
    v1 = json.loads((HERE / "states_v1.json").read_text())
    entries = {}
    tracker = v1["tracker"]["state"]
    loaded = CoverageTracker.from_state_dict(tracker).state_dict()
    entries["tracker_v1"] = {"state": tracker, "loaded": loaded}
    monitor = v1["monitor"]["state"]
    m = CoverageMonitor(5, ("a", "b", "c", "d"), sinks=Null(), n_boot=0).load_state_dict(monitor)
    entries["monitor_v1"] = {"state": monitor, "loaded": m.state_dict()}

    t = CoverageTracker(("a", "b"), budget=2)
    hits = np.eye(2, dtype=bool)[np.arange(5) % 2]
    t.record(EpisodeBatch.of(("a", "b"), ["x"] * 5, hits, sample_index=np.arange(5), run_index=[0] * 5))
    old = json.loads(json.dumps(t.state_dict()))
    del old["runs"]["beyond"]
    entries["v2_without_beyond"] = {"state": old, "loaded": CoverageTracker.from_state_dict(old).state_dict()}

    rng = np.random.default_rng(5)
    full = CoverageTracker(("a", "b", "c"), budget=3)
    for i in range(40):
        full.update(f"x{i % 5}", {s for s in "abc" if rng.random() < 0.4}, valid=bool(i % 3), stream=i // 15)
    state = json.loads(json.dumps(full.state_dict()))
    entries["v2_metrics"] = {"state": state, "loaded": CoverageTracker.from_state_dict(state).state_dict()}
    partial = CoverageTracker.from_state_dict({k: v for k, v in state.items() if k != "metrics"})
    partial.update("x1", {"c"}, stream=9)
    state = json.loads(json.dumps(partial.state_dict()))
    loaded = CoverageTracker.from_state_dict(state).state_dict()
    entries["v2_partial_metric"] = {"state": state, "loaded": loaded}
    Path(out).write_text(json.dumps(entries, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
