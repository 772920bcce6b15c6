"""The two error kinds: a user error is one line and exit 2; an internal error (a bug) keeps its traceback,
asks for a report and exits 70 (tcsmt/errors.py, tcsmt/io/trap.py)."""
from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from tcsmt import InternalError, TcsmtError
from tcsmt.backends.numpy import BoundViolation
from tcsmt.io.trap import Command


def _command(exc: Exception) -> click.Command:
    @click.command(cls=Command)
    def cmd() -> None:
        raise exc

    return cmd


def test_user_error_is_one_line_exit_2():
    r = CliRunner().invoke(_command(TcsmtError("bad value")))
    assert r.exit_code == 2
    assert r.output.strip() == "tcsmt: error: bad value"


def test_internal_error_keeps_traceback_and_exits_70():
    r = CliRunner().invoke(_command(InternalError("the answer does not replay")))
    assert r.exit_code == 70
    assert "Traceback (most recent call last)" in r.output
    assert "tcsmt: internal error: the answer does not replay" in r.output
    assert "please report it" in r.output


def test_internal_error_is_not_a_user_error():
    """API callers who catch TcsmtError (bad input) do not swallow bugs."""
    assert not issubclass(InternalError, TcsmtError)
    assert issubclass(BoundViolation, InternalError)
    with pytest.raises(InternalError, match="^internal error: x$"):
        raise InternalError("x")


def test_script_trap_same_rules(capsys):
    """The python -m scripts' trap (cli_errors.script_main): the same exit statuses and lines as the CLI."""
    from tcsmt.io.trap import script_main

    def fails(exc: Exception):
        @click.command()
        def cmd() -> int:
            raise exc
        return script_main(cmd, "python -m tcsmt.x")

    assert fails(TcsmtError("bad"))([]) == 2
    assert capsys.readouterr().err == "tcsmt: error: bad\n"
    assert fails(InternalError("broken"))([]) == 70
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "tcsmt: internal error: broken" in err
    assert fails(TcsmtError("bad"))(["--bogus"]) == 2
    assert capsys.readouterr().err == "tcsmt: error: No such option '--bogus'. (see python -m tcsmt.x --help)\n"
