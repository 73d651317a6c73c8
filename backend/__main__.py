"""`python -m isoscope ...`: the command-line interface (see backend/cli.py)."""

from __future__ import annotations

import sys

from isoscope.cli import main

if __name__ == "__main__":
    sys.exit(main())
