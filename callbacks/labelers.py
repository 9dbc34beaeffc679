"""Labelers, under the adapters' namespace: the same objects as [`seffi.labelers`][seffi.labelers]."""

from seffi.labelers import *  # noqa: F403
from seffi.labelers import __all__  # noqa: F401
