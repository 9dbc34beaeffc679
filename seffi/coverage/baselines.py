"""Reference curves: the iid base sampler (exact or estimated) and the no-repeat oracle.

Both are per-input and aggregate like the tracker: every curve is the mean over inputs. A baseline
built from a single law (not a mapping keyed by input id) is one input, and ``Curves.gain`` uses
it as the same law for every input of a policy. Per-input baselines keep each input's AUC
(``Curves.input_keys``/``input_auc``/``input_valid_auc``, keyed by input id) so that the gain's
bootstrap resamples inputs jointly with the policy's.

Typical use with a task:

```python
laws = {x.id: task.base_match_distribution(x) for x in inputs}
valid = {x.id: task.base_match_distribution(x, valid_only=True) for x in inputs}
iid = IidBaseline.from_match_distribution(laws, strategies=task.strategies(), valid_distribution=valid)
refs = {x.id: task.reference_match_sets(x) for x in inputs}
oracle = OracleBaseline(refs, strategies=task.strategies())
```
"""

from __future__ import annotations

from seffi.coverage._common import rarity_bin_matrix
from seffi.coverage.iid import IidBaseline
from seffi.coverage.oracle import OracleBaseline
from seffi.coverage.samples import assemblage, inext_coverage_replicates

__all__ = ["IidBaseline", "OracleBaseline", "assemblage", "inext_coverage_replicates", "rarity_bin_matrix"]
