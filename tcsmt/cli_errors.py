"""One-line errors for click commands: TcsmtError (and file errors) -> message on stderr, exit 2.

An :class:`~tcsmt.errors.InternalError` (a bug in tcsmt) is not a user error: its traceback is printed,
with a request to report it, and the exit status is 70.

Signals (SIGINT, SIGTERM, SIGHUP) end a command with one line and exit status 128 + the signal
number, after killing the solver children (:mod:`tcsmt.interrupts`).  However a command ends, the
output names it claimed but did not write are removed (:func:`tcsmt.files.release_all`).
"""
from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable

import click

from . import files, interrupts
from .errors import INTERNAL_ERROR_EXIT, InternalError, TcsmtError


class OneLineErrors(click.Command):
    """Mixin for click.Group / click.Command: no tracebacks for user errors."""

    def invoke(self, ctx):
        restore = interrupts.install()
        try:
            return super().invoke(ctx)
        except TcsmtError as exc:
            click.echo(f"tcsmt: error: {exc}", err=True)
            sys.exit(2)
        except InternalError as exc:
            traceback.print_exc()
            click.echo(f"tcsmt: {exc}\ntcsmt: this is a bug in tcsmt; please report it with the command line "
                       f"and the traceback above", err=True)
            sys.exit(INTERNAL_ERROR_EXIT)
        except click.UsageError as exc:  # a bad option value (cli_options) or a missing argument: one line too
            where = f" (see {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
            click.echo(f"tcsmt: error: {exc.format_message()}{where}", err=True)
            sys.exit(2)
        except BrokenPipeError:  # output piped into head, less, ...: stop quietly
            sys.stderr.close()
            sys.exit(0)
        except (OSError, ValueError) as exc:
            click.echo(f"tcsmt: error: {exc}", err=True)
            sys.exit(2)
        except KeyboardInterrupt as exc:
            click.echo(interrupts.message(exc), err=True)
            sys.exit(interrupts.exit_status(exc))
        finally:
            files.release_all()
            restore()


class Group(OneLineErrors, click.Group):
    """The tcsmt command group."""


class Command(OneLineErrors, click.Command):
    """A command that also gives one-line errors when invoked on its own."""


def script_errors(main: Callable[..., int]) -> Callable[..., int]:
    """The same trap for the ``python -m`` scripts (argparse mains returning an exit status): a
    TcsmtError is one line and status 2, an InternalError keeps its traceback and gives 70, and the
    output names claimed but not written are released."""

    @functools.wraps(main)
    def run(*args, **kwargs) -> int:
        try:
            return main(*args, **kwargs)
        except TcsmtError as exc:
            print(f"tcsmt: error: {exc}", file=sys.stderr)
            return 2
        except InternalError as exc:
            traceback.print_exc()
            print(f"tcsmt: {exc}\ntcsmt: this is a bug in tcsmt; please report it", file=sys.stderr)
            return INTERNAL_ERROR_EXIT
        finally:
            files.release_all()

    return run
