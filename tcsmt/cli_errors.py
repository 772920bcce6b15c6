"""One-line errors for click commands: TcsmtError (and file errors) -> message on stderr, exit 2."""
from __future__ import annotations

import sys

import click

from .errors import TcsmtError


class OneLineErrors:
    """Mixin for click.Group / click.Command: no tracebacks for user errors."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except TcsmtError as exc:
            click.echo(f"tcsmt: error: {exc}", err=True)
            sys.exit(2)
        except BrokenPipeError:  # output piped into head, less, ...: stop quietly
            sys.stderr.close()
            sys.exit(0)
        except (OSError, ValueError) as exc:
            click.echo(f"tcsmt: error: {exc}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("tcsmt: interrupted", err=True)
            sys.exit(2)


class Group(OneLineErrors, click.Group):
    """The tcsmt command group."""


class Command(OneLineErrors, click.Command):
    """A command that also gives one-line errors when invoked on its own."""
