"""Hostile input (issue 11): every bad value, file, parameter or array is a one-line error, never a hang or traceback.

Each test here failed on the code before the fix it guards (a hang, a traceback, a wrong answer or a
silently accepted value); the CLI tests check the exact exit status 2 and one ``tcsmt: error:`` line.
"""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from tcsmt.cli import main
from tcsmt.errors import TcsmtError
from tcsmt.values import MAX_BITS, MAX_TEXT, parse_value


def _one_line_error(r, *needles: str) -> str:
    """The CLI result is exit 2 with exactly one ``tcsmt: error:`` line containing every needle."""
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("tcsmt: error: ")]
    assert len(errors) == 1 and "Traceback" not in r.output, r.output
    for n in needles:
        assert n in errors[0], errors[0]
    return errors[0]


@pytest.fixture
def runner():
    return CliRunner()


# ------------------------------------------------------------------ values
@pytest.mark.parametrize("text", ["2^1000000000", "2^-99999999", "1e999999999", "1e-999999999", "3^99999999",
                                  "0.5^-99999999", "2^(99999999)", "2^4096*2^4096", "2^4097", "2^-4097"])
def test_huge_exponents_are_refused_at_once(text):
    """Issue 11 failure 1: 2^1000000000 hung the parser; now the limit is named and nothing big is computed."""
    t0 = time.perf_counter()
    with pytest.raises(TcsmtError, match=rf"2\^-{MAX_BITS}\.\.2\^{MAX_BITS}"):
        parse_value(text)
    assert time.perf_counter() - t0 < 1.0


def test_value_limits_are_inclusive():
    assert parse_value("2^4096") == 2 ** MAX_BITS
    assert parse_value("2^-4096") * 2 ** MAX_BITS == 1
    assert parse_value("1e-300") * 10 ** 300 == 1
    assert parse_value("2*-3") == -6 and parse_value("1/4") * 4 == 1  # forms the old parser took still work


def test_long_value_text_is_refused():
    with pytest.raises(TcsmtError, match=f"at most {MAX_TEXT}"):
        parse_value("1" * (MAX_TEXT + 1))
    with pytest.raises(TcsmtError):
        parse_value("9" * 5000)  # the old parser hit Python's int-digits limit with a ValueError text


def _run_cli(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tcsmt", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args", [
    ["dot", "--arch", "volta", "2^1000000000", "1"],
    ["dot", "--arch", "volta", "1", "1", "--c", "1e999999999"],
    ["discriminate", "volta", "ampere", "--where", "a=2^99999999", "--no-save", "--timeout", "5"],
    ["verify", "--algo", "markidis", "--range", "0..2^99999999", "--timeout", "5"],
])
def test_cli_huge_exponent_is_one_line_error(args):
    """These commands never returned before (run in a subprocess so that a hang fails the test, not the suite)."""
    r = _run_cli(args, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("tcsmt: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert "out of range" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["dot", "--arch", "volta", "2^4000", "1"], "overflows fp16"),
    (["dot", "--arch", "volta", "1", "1", "--c", "2^-4000"], "not exactly representable in fp32"),
    (["discriminate", "volta", "ampere", "--where", "|a|<=2^4000", "--no-save"], "overflows fp16"),
    (["discriminate", "volta", "ampere", "--where", "c=2^-4000", "--no-save"], "not exactly representable"),
    (["verify", "--algo", "markidis", "--range", "0..2^4000"], "at most 65504"),
])
def test_value_outside_every_format_is_one_line_error(runner, args, needle):
    _one_line_error(runner.invoke(main, args), needle)


def test_verify_bound_beyond_float_range_is_printed(runner):
    """--bound 2^4000 crashed printing the claim (float(2^4000) overflows); K = 1 proves it at once."""
    r = runner.invoke(main, ["verify", "--algo", "markidis", "--bound", "2^4000", "--k", "1", "--timeout", "20",
                             "--arch", "volta"])
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit), r.output
    assert "claim: error <= 2^4000 (1.318e+1204)" in r.output


# -------------------------------------------------------------- parameters
@pytest.mark.parametrize("spec,needle", [
    ("hopper:align_floor=100000", "align_floor must be -149..127"),   # issue 11 failure 8: 1*1 gave 0
    ("hopper:align_floor=-100000", "align_floor must be -149..127"),
    ("volta:instr_k=100000", "instr_k must be 0..4096"),
    ("volta:block_k=-1", "block_k must be 0..4096"),
    ("volta:block_k=8", "block_k must not exceed instr_k"),
])
def test_out_of_range_parameters_are_refused(spec, needle):
    from tcsmt import resolve

    with pytest.raises(TcsmtError, match=needle):
        resolve(spec, "fp16", "fp32")


def test_align_floor_range_follows_the_formats():
    """fp16 products reach 2^-48, fp32 C and accumulator 2^-149 .. 2^127; fp64 reaches 2^-1074."""
    from tcsmt import resolve
    from tcsmt.params import floor_range

    assert floor_range(resolve("hopper", "fp16", "fp32")) == (-149, 127)
    assert floor_range(resolve("ampere", "fp64", "fp64")) == (-2148, 2048)
    assert resolve("hopper:align_floor=-149", "fp16", "fp32").align_floor == -149
    assert resolve("ampere:align_floor=-1074", "fp64", "fp64").align_floor == -1074


@pytest.mark.parametrize("field,value", [("in_fmt", "bf16"), ("out_fmt", "fp16"), ("c_fmt", "fp16"),
                                         ("instr", "wgmma"), ("instr_shape", "m16n8k16")])
def test_path_fields_cannot_be_overridden(field, value):
    """volta:in_fmt=bf16 silently turned Volta's fp16 path into a bf16 one (issue 11, weak inputs)."""
    from tcsmt import resolve

    with pytest.raises(TcsmtError, match=f"{field} names the path.*--in, --out and --instr"):
        resolve(f"volta:{field}={value}", "fp16", "fp32")


def test_path_field_override_on_the_command_line(runner):
    r = runner.invoke(main, ["dot", "--arch", "volta:in_fmt=bf16", "1", "1"])
    _one_line_error(r, "in_fmt names the path", "--in")


def test_parameter_types_are_checked():
    import dataclasses

    from tcsmt import resolve
    from tcsmt.params import validate

    p = resolve("volta", "fp16", "fp32")
    for field, value in (("instr_k", "4"), ("block_k", 2.0), ("carry_bits", None), ("subnormal_in", 1),
                         ("align_floor", "low"), ("instr_k", True)):
        with pytest.raises(TcsmtError, match=field):
            validate(dataclasses.replace(p, **{field: value}))
