"""``python -m spurious.cli``: the same entry point as the installed ``spurious`` command."""

import sys

from spurious.cli import main

sys.exit(main())
