"""Option types and option definitions shared by every ``tcsmt`` command.

Each range check lives here once: a value outside its range is a click usage
error (one line on stderr, exit status 2), never a silent default.

* :data:`POSITIVE_FLOAT`: a finite number > 0 (timeouts, time limits);
* :data:`NON_NEGATIVE_FLOAT`: a finite number >= 0 (budgets where 0 means "none");
* :data:`POSITIVE_INT`: an integer >= 1 (K, counts, N);
* :data:`NON_NEGATIVE_INT`: an integer >= 0 (seeds, --show, --jobs where 0 means "one per core").
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import click


class _Number(click.ParamType):
    """An int or float with a lower bound; floats must be finite (no nan, no inf)."""

    def __init__(self, kind: type, lower: float, strict: bool):
        self.kind = kind
        self.lower = lower
        self.strict = strict
        word = "integer" if kind is int else "number"
        self.name = f"{'positive' if strict else 'non-negative'} {word}"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, bool):
            self.fail(f"{value!r} is not a {self.name}", param, ctx)
        try:
            x = self.kind(value) if not isinstance(value, str) else self.kind(value.strip())
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{value!r} is not a {self.name}", param, ctx)
        if isinstance(x, float) and not math.isfinite(x):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if x < self.lower or (self.strict and x == self.lower):
            self.fail(f"{value!r} must be {'>' if self.strict else '>='} {self.lower:g}", param, ctx)
        return x


POSITIVE_FLOAT = _Number(float, 0.0, strict=True)
NON_NEGATIVE_FLOAT = _Number(float, 0.0, strict=False)
POSITIVE_INT = _Number(int, 0, strict=True)
NON_NEGATIVE_INT = _Number(int, 0, strict=False)

def timeout_option(default: float, help: str, name: str = "--timeout") -> Callable:
    """A solver time limit in seconds: finite and > 0."""
    return click.option(name, type=POSITIVE_FLOAT, default=default, show_default=True, help=help)


def k_option(help: str, default: int | None = None) -> Callable:
    """``--k``: a dot-product length >= 1 (no value means the command's default)."""
    return click.option("--k", "k", type=POSITIVE_INT, default=default, help=help)


def progress_option() -> Callable:
    """``--progress``: progress lines on stderr even when stderr is not a terminal."""
    return click.option("--progress", "progress", is_flag=True,
                        help="progress lines on stderr (default: only when stderr is a terminal)")
