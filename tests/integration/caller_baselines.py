"""The three ways the integration tests give a monitor the user env's baselines, and the iid and
oracle a caller passes in the third one (``iid=``/``oracle=``)."""

from __future__ import annotations

from typing import Any

from seffi.coverage import IidBaseline, OracleBaseline
from tests.integration.user_env import BASE_LAW, INPUTS, STRATEGIES

#: "env": the env has base_match_distribution/reference_match_sets; "none": only strategies;
#: "explicit": only strategies, and the caller passes iid=/oracle=.
LAWS = ("env", "none", "explicit")
#: The oracle's reference match set of each strategy (the env's ``reference_match_sets``).
REFERENCES = {"astar": {"astar"}, "bfs": {"bfs"}, "dfs": {"dfs"}, "greedy": {"astar", "greedy"}}


def explicit_baselines(laws: str) -> dict[str, Any]:
    """The ``iid=`` and ``oracle=`` keyword arguments a caller passes for ``laws`` ("explicit" only)."""
    if laws != "explicit":
        return {}
    return {
        "iid": IidBaseline.from_match_distribution({x: BASE_LAW for x in INPUTS}, strategies=STRATEGIES),
        "oracle": OracleBaseline({x: REFERENCES for x in INPUTS}, strategies=STRATEGIES),
    }
