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

from tcsmt.errors import TcsmtError
from tcsmt.io.limits import SECONDS, SIM_K, parse_int, shown


class _Number(click.ParamType):
    """An int or float with a lower bound and an upper limit (named in the message); floats must be finite
    (no nan, no inf); integers are read with :func:`tcsmt.io.limits.parse_int` (no 5,000-digit values)."""

    def __init__(self, kind: type, lower: float, strict: bool, upper: float | None = None, why: str = ""):
        self.kind = kind
        self.lower = lower
        self.strict = strict
        self.upper = upper
        self.why = why
        word = "integer" if kind is int else "number"
        self.name = f"{'positive' if strict else 'non-negative'} {word}"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, bool):
            self.fail(f"{shown(value)} is not a {self.name}", param, ctx)
        try:
            if self.kind is int:
                x: Any = parse_int(value, "the value")
            else:
                text = value.strip() if isinstance(value, str) else value
                if isinstance(text, str) and len(text) > 100:
                    raise ValueError(text)
                x = float(text)
        except (TypeError, ValueError, OverflowError, TcsmtError):
            self.fail(f"{shown(value)} is not a {self.name}", param, ctx)
        if isinstance(x, float) and not math.isfinite(x):
            self.fail(f"{shown(value)} is not a finite number", param, ctx)
        if x < self.lower or (self.strict and x == self.lower):
            self.fail(f"{shown(value)} must be {'>' if self.strict else '>='} {self.lower:g}", param, ctx)
        if self.upper is not None and x > self.upper:
            shown_x = f"{x:,}" if isinstance(x, int) and x < 10 ** 30 else f"{x:g}" if isinstance(x, float) else \
                f"a {len(str(x))}-digit number"
            limit = f"{self.upper:,}" if isinstance(self.upper, int) else f"{self.upper:g}"
            self.fail(f"{shown_x} is over its limit of {limit}" + (f" ({self.why})" if self.why else ""), param, ctx)
        return x


def bounded_int(upper: int, why: str = "", lower: int = 1) -> _Number:
    """An integer option in ``lower..upper``; a value over ``upper`` is refused naming the limit and ``why``."""
    if lower == 1:
        return _Number(int, 0, strict=True, upper=upper, why=why)
    return _Number(int, lower, strict=False, upper=upper, why=why)


POSITIVE_FLOAT = _Number(float, 0.0, strict=True, upper=SECONDS, why="seconds")
NON_NEGATIVE_FLOAT = _Number(float, 0.0, strict=False, upper=SECONDS, why="seconds")
POSITIVE_INT = _Number(int, 0, strict=True)
NON_NEGATIVE_INT = _Number(int, 0, strict=False)
SEED = _Number(int, 0, strict=False, upper=(1 << 64) - 1, why="a seed is a 64-bit integer")

def timeout_option(default: float, help: str, name: str = "--timeout") -> Callable:
    """A solver time limit in seconds: finite and > 0."""
    return click.option(name, type=POSITIVE_FLOAT, default=default, show_default=True, help=help)


def k_option(help: str, default: int | None = None, limit: int = SIM_K, why: str = "products per dot product") -> Callable:
    """``--k``: a dot-product length >= 1 and at most ``limit`` (no value means the command's default)."""
    return click.option("--k", "k", type=bounded_int(limit, why), default=default, help=help)


def progress_option() -> Callable:
    """``--progress``: progress lines on stderr even when stderr is not a terminal."""
    return click.option("--progress", "progress", is_flag=True,
                        help="progress lines on stderr (default: only when stderr is a terminal)")
