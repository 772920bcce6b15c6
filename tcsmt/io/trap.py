"""One-line errors for click commands and ``python -m`` scripts: TcsmtError (and file errors) -> message on
stderr, exit 2.

An :class:`~tcsmt.errors.InternalError` (a bug in tcsmt) is not a user error: its traceback is printed,
with a request to report it, and the exit status is 70.

Signals (SIGINT, SIGTERM, SIGHUP) end a command with one line and exit status 128 + the signal
number, after killing the solver children (:mod:`tcsmt.io.interrupts`).  However a command ends, the
output names it claimed but did not write are removed (:func:`tcsmt.io.files.release_all`).
"""
from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from typing import Protocol

import click

from tcsmt.errors import INTERNAL_ERROR_EXIT, InternalError, TcsmtError
from tcsmt.io import files, interrupts


def error_status(exc: BaseException) -> int | None:
    """The trap's one rule, for click commands and ``python -m`` scripts alike: print what ``exc`` says
    (one line for a user error, the traceback for a bug) and return the exit status, or None for an
    exception the trap does not handle (``SystemExit``, click's own ``Exit``, ...)."""
    if isinstance(exc, TcsmtError):
        click.echo(f"tcsmt: error: {exc}", err=True)
        return 2
    if isinstance(exc, InternalError):
        traceback.print_exc()
        click.echo(f"tcsmt: {exc}\ntcsmt: this is a bug in tcsmt; please report it with the command line "
                   f"and the traceback above", err=True)
        return INTERNAL_ERROR_EXIT
    if isinstance(exc, click.UsageError):  # a bad option value (cli_options) or a missing argument: one line too
        where = f" (see {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
        click.echo(f"tcsmt: error: {exc.format_message()}{where}", err=True)
        return 2
    if isinstance(exc, BrokenPipeError):  # output piped into head, less, ...: stop quietly
        sys.stderr.close()
        return 0
    if isinstance(exc, (OSError, ValueError)):
        click.echo(f"tcsmt: error: {exc}", err=True)
        return 2
    if isinstance(exc, MemoryError):  # an estimate fell short (the limits refuse what is known to be too big)
        from tcsmt.io.limits import available_memory, human

        click.echo(f"tcsmt: error: out of memory ({human(available_memory())} available here); make the run "
                   "smaller", err=True)
        return 2
    if isinstance(exc, KeyboardInterrupt):
        click.echo(interrupts.message(exc), err=True)
        return interrupts.exit_status(exc)
    return None


class OneLineErrors(click.Command):
    """Mixin for click.Group / click.Command: no tracebacks for user errors (:func:`error_status`)."""

    def invoke(self, ctx):
        restore = interrupts.install()
        try:
            return super().invoke(ctx)
        except (Exception, KeyboardInterrupt) as exc:
            status = error_status(exc)
            if status is None:
                raise
            sys.exit(status)
        finally:
            files.release_all()
            restore()


class Group(OneLineErrors, click.Group):
    """The tcsmt command group: its own usage errors (``tcsmt --bogus``, an unknown command) are one line and
    status 2 as well (click would print the usage block first)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.Abort:
            click.echo("tcsmt: aborted", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            usage = isinstance(exc, click.UsageError) and type(exc).__name__ != "NoArgsIsHelpError"
            status = error_status(exc) if usage else None  # (no arguments at all: click's help, as before)
            if status is None:
                exc.show()
                status = exc.exit_code
            sys.exit(status)
        sys.exit(rv if isinstance(rv, int) else 0)


class Command(OneLineErrors, click.Command):
    """A command that also gives one-line errors when invoked on its own."""


#: the help options of every tcsmt command and script
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


class ScriptMain(Protocol):
    """``main(argv=None) -> exit status``: a script's entry point (``sys.exit(main())``)."""

    def __call__(self, argv: Sequence[str] | None = None) -> int: ...


def script_main(command: click.Command, prog: str) -> ScriptMain:
    """The ``main(argv=None) -> exit status`` of a ``python -m`` script written as a click command.

    The command's callback returns the exit status (None is 0).  Everything it raises goes through the
    same trap as ``tcsmt`` (:func:`error_status`): a usage error (unknown option, bad value, missing
    argument or file), a :class:`TcsmtError` or a file error is one line on stderr and status 2, an
    :class:`InternalError` keeps its traceback and gives 70, a signal gives 128 + its number; ``--help``
    gives 0.  The output names claimed but not written are released however it ends.  ``prog`` is the
    name in usage and help lines (``python -m tcsmt.hwcheck.campaign``).
    """

    def main(argv: Sequence[str] | None = None) -> int:
        args = list(sys.argv[1:] if argv is None else argv)
        restore = interrupts.install()
        try:
            with command.make_context(prog, args) as ctx:
                status = command.invoke(ctx)
            return 0 if status is None else int(status)
        except click.exceptions.Exit as exc:  # --help
            return exc.exit_code
        except (Exception, KeyboardInterrupt) as exc:
            status = error_status(exc)
            if status is None:
                raise
            return status
        finally:
            files.release_all()
            restore()

    main.__doc__ = f"``{prog} ARGS``: {command.help}"
    return main
