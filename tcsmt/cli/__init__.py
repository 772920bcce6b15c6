"""The ``tcsmt`` command line (click): option parsing and presentation only, no arithmetic.

``tcsmt.cli:main`` is the console entry point.  It is loaded on first use, so that a command module run on its
own (``python -m tcsmt.cli.record_cmd`` on a GPU host without the solver packages) does not import them.
"""
from __future__ import annotations

from typing import Any

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    if name == "main":
        from tcsmt.cli.commands import main

        return main
    raise AttributeError(f"module 'tcsmt.cli' has no attribute {name!r}")
