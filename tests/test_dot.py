"""tcsmt.dot (the API behind ``tcsmt dot``): exact inputs, the model's output, the exact value and the error."""
from __future__ import annotations

from fractions import Fraction

import pytest

from tcsmt import TcsmtError
from tcsmt.dot import default_path, describe_bits, dot


def test_volta_truncates_a_term_below_its_window():
    """Volta fp16 -> fp32 keeps no bit below the fp32 LSB of the largest term and truncates (Fasi, Higham,
    Mikaitis & Pranesh 2021, seed 000; models/volta.toml): 1 + 2^-24 gives 1."""
    r = dot("volta", "1,2^-24", "1,1")
    assert r.d == 0x3F800000
    assert r.exact == 1 + Fraction(1, 2**24)
    assert r.error == -Fraction(1, 2**24)
    assert r.lines()[1] == "d       0x3f800000  = 1"


def test_exact_reference_rounds_once():
    """The ``exact`` reference rounds the exact a.b + c once to fp32 (RNE): no error where the sum is
    representable; 3/32 + 3/2 + 1 - 2^-24 needs 26 bits, so it rounds up by 2^-24 (nearest, ties to even)."""
    assert dot("exact", "3*2^-5,0.75", "1,2", "1", in_fmt="fp16", out_fmt="fp32").error == 0
    assert dot("exact", "3*2^-5,0.75", "1,2", "1-2^-24", in_fmt="fp16", out_fmt="fp32").error == Fraction(1, 2**24)


def test_defaults_and_bad_input():
    assert default_path("volta", None, None) == ("fp16", "fp32")
    assert describe_bits("fp16", 0x3C00) == "0x3c00  = 1"
    with pytest.raises(TcsmtError, match="same, non-zero length"):
        dot("volta", "1,2", "1")
