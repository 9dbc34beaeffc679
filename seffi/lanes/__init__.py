"""seffi.lanes — the corrections-to-competence lane (seed ``000_a8222616b533fe34``).

How many reviewed corrections does a learner need before a probe about a concept yields the expected
tokens? For each concept and each k = 0..n a fresh learner is taught the first k corrections and
probed; the runner records the hit count, vault hits and a chained trace hash, replays every snapshot
on a second fresh learner, and reports curves, first-hit/saturation points and the
replay-determinism gate (>= 0.95). Nothing else is thresholded.

Modules (flat):

- `seffi.lanes.sample_efficiency` — [`TeachOutcome`][seffi.lanes.TeachOutcome],
  [`ProbeResponse`][seffi.lanes.ProbeResponse], the [`Learner`][seffi.lanes.Learner] protocol,
  [`run_concept`][seffi.lanes.run_concept], [`run_lane`][seffi.lanes.run_lane],
  [`aggregate`][seffi.lanes.aggregate], report models.
- `seffi.lanes.hashing` — chained sha256 over canonical JSON (DESIGN.md "Trace hash recipe").
- `seffi.lanes.packs` — concept-pack model, tolerant loader, the shipped standard pack.
- `seffi.lanes.lint` — the anti-overfitting linter.
- `seffi.lanes.learners` — [`VaultLearner`][seffi.lanes.VaultLearner] (reference),
  [`TextGenerationLearner`][seffi.lanes.TextGenerationLearner], [`RecallLearner`][seffi.lanes.RecallLearner]
  (the recall control: repeats every correction it was taught).
- `seffi.lanes.plot` — the small-multiples curve plot; `seffi.cli.lane` — ``seffi lane``.

Usage:

```python
from seffi.lanes import run_lane, standard_pack, VaultLearner, text_generation_factory

report = run_lane(standard_pack().select("public"), VaultLearner)
print(report.aggregate.replay_determinism, report.aggregate.gate_passed)

# any prompt -> text callable (e.g. an LLM with greedy decoding) becomes a learner
report = run_lane(standard_pack().select("holdout"), text_generation_factory(my_generate))
```

Importing this package imports neither matplotlib nor wandb.
"""

from __future__ import annotations

from seffi.lanes.learners import (
    IDENTITY_OVERRIDE_PATTERNS,
    RecallLearner,
    TextGenerationLearner,
    VaultLearner,
    review_correction,
    text_generation_factory,
)
from seffi.lanes.lint import LintProblem, lint_pack
from seffi.lanes.packs import Concept, ConceptError, ConceptPack, load_pack, standard_pack
from seffi.lanes.sample_efficiency import (
    GATE_THRESHOLD,
    Aggregate,
    ConceptResult,
    CurvePoint,
    Divergence,
    LaneReport,
    Learner,
    LearnerFactory,
    ProbeResponse,
    RecallControl,
    TeachOutcome,
    aggregate,
    curve_metrics,
    run_concept,
    run_lane,
)

__all__ = [
    "GATE_THRESHOLD",
    "IDENTITY_OVERRIDE_PATTERNS",
    "Aggregate",
    "Concept",
    "ConceptError",
    "ConceptPack",
    "ConceptResult",
    "CurvePoint",
    "Divergence",
    "LaneReport",
    "Learner",
    "LearnerFactory",
    "LintProblem",
    "ProbeResponse",
    "RecallControl",
    "RecallLearner",
    "TeachOutcome",
    "TextGenerationLearner",
    "VaultLearner",
    "aggregate",
    "curve_metrics",
    "lint_pack",
    "load_pack",
    "review_correction",
    "run_concept",
    "run_lane",
    "standard_pack",
    "text_generation_factory",
]
