"""seffi: measure the sample efficiency of learning systems.

Two lanes share one core: exploration coverage (how fast a policy covers an input's strategy space
as its budget grows, against iid sampling and a no-repeat oracle) and corrections to competence
(``seffi.lanes``). Importing seffi never imports torch or any training framework.
"""

from seffi.errors import SeffiError

__version__ = "0.1.0"

__all__ = ["SeffiError", "__version__"]
