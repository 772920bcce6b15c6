"""The ``tcsmt`` command line (click): option parsing and presentation only, no arithmetic.

``tcsmt.cli:main`` is the console entry point.
"""

from tcsmt.cli.commands import main

__all__ = ["main"]
