"""``python -m seffi.cli``: the ``seffi`` command."""

import sys

from seffi.cli import main

sys.exit(main())
