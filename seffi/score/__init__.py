"""Coverage from files of generations: read them, label them, score them against the base model's files.

Examples:
    >>> from seffi.score import score  # doctest: +SKIP
    >>> report = score(["policy.jsonl"], ["base.jsonl"], label_field="strategy")  # doctest: +SKIP
"""

from seffi.score.api import score
from seffi.score.files import Layout, Sample, detect, read_samples

__all__ = ["Layout", "Sample", "detect", "read_samples", "score"]
