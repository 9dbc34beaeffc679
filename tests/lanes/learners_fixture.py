"""Hand-made learners with exactly known behaviour, importable as ``--learner`` factories."""

from __future__ import annotations

import itertools
import secrets
import sys

from seffi.lanes.sample_efficiency import ProbeResponse, TeachOutcome


class EchoLearner:
    """Accepts everything; the surface repeats every taught correction (hits = k on a linted concept)."""

    def __init__(self) -> None:
        self.taught: list[str] = []

    def teach(self, correction: str) -> TeachOutcome:
        self.taught.append(correction)
        return TeachOutcome(accepted=True, reason=None)

    def probe(self, question: str) -> ProbeResponse:
        return ProbeResponse(surface=" ".join(self.taught), vault_hits=len(self.taught))


class ScriptedLearner:
    """Answers with ``script[number of corrections taught]`` (default: nothing)."""

    def __init__(self, script: dict[int, tuple[str, str]]) -> None:
        self.script = script
        self.n = 0

    def teach(self, correction: str) -> TeachOutcome:
        self.n += 1
        return TeachOutcome(accepted=True)

    def probe(self, question: str) -> ProbeResponse:
        surface, walk = self.script.get(self.n, ("", ""))
        return ProbeResponse(surface=surface, walk_surface=walk, vault_hits=self.n % 3)


class RandomLearner(EchoLearner):
    """Echoes, then appends fresh OS randomness: no two runs of a snapshot hash the same."""

    def probe(self, question: str) -> ProbeResponse:
        base = super().probe(question)
        return ProbeResponse(
            surface=f"{base.surface} nonce {secrets.token_hex(8)}", vault_hits=base.vault_hits
        )


_instances = itertools.count(1)


class FlakyOnceLearner(EchoLearner):
    """Deterministic except for the 5th instance built, whose review reason on correction 1 differs.

    The runner builds (primary, replay) per snapshot k = 0, 1, 2, ..., so instance 5 is the primary of
    k = 2 and the first divergent step of that snapshot is ``correction[1]``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.number = next(_instances)

    def teach(self, correction: str) -> TeachOutcome:
        outcome = super().teach(correction)
        if self.number == 5 and len(self.taught) == 2:
            return TeachOutcome(accepted=True, reason="a different mood")
        return outcome


def reset_flaky() -> None:
    global _instances
    _instances = itertools.count(1)


class BrokenLearner(EchoLearner):
    """Raises on the third correction."""

    def teach(self, correction: str) -> TeachOutcome:
        if len(self.taught) == 2:
            raise RuntimeError("vault is on fire")
        return super().teach(correction)


class WrongTypeLearner(EchoLearner):
    """Returns a plain string from probe."""

    def probe(self, question: str) -> str:  # type: ignore[override]
        return "not a ProbeResponse"


def raising_module_factory() -> EchoLearner:
    return EchoLearner()


class AlwaysRaisingLearner(EchoLearner):
    """Every probe raises, so no concept gets even the k = 0 point of its curve."""

    def probe(self, question: str) -> ProbeResponse:
        raise RuntimeError("model server unreachable")


class ExitingLearner(EchoLearner):
    """Calls ``sys.exit(0)`` when taught (as a script-style learner might on a fatal condition)."""

    def teach(self, correction: str) -> TeachOutcome:
        sys.exit(0)
