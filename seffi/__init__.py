"""seffi: measure the sample efficiency of learning systems.

Two lanes share one core:

* exploration coverage: how fast a policy covers an input's *strategy space* as its sample budget
  grows, against iid sampling and a no-repeat oracle (``seffi.tasks``, ``seffi.envs``,
  ``seffi.coverage``, ``seffi.callbacks``, ``seffi.report``);
* corrections to competence: how many corrections a learner needs before a probe answers with the
  expected tokens (``seffi.lanes``).

Importing seffi is cheap and never imports torch or any training framework.
"""

from seffi.errors import SeffiError

__version__ = "0.1.0"

__all__ = ["SeffiError", "__version__"]
