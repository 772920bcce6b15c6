"""Progress lines for long work, on stderr, only when asked for or when stderr is a terminal.

A :class:`Progress` is a callable that takes one message; commands pass it down
to the loops that finish queries or experiments (verify, identify, query,
simulate).  Each line starts with the elapsed wall time since the object was
made, e.g. ``[  12.3 s] volta: ootomo worse than markidis: found``.
"""
from __future__ import annotations

import sys
import time

import click


class Progress:
    """Prints ``[elapsed] message`` lines on stderr when enabled; does nothing otherwise."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.t0 = time.perf_counter()

    @classmethod
    def for_cli(cls, flag: bool) -> Progress:
        """Enabled by ``--progress`` or when stderr is a terminal."""
        try:
            tty = sys.stderr.isatty()
        except (AttributeError, ValueError):
            tty = False
        return cls(flag or tty)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def __call__(self, message: str) -> None:
        if self.enabled:
            click.echo(f"[{self.elapsed():7.1f} s] {message}", err=True)


NO_PROGRESS = Progress(False)
