"""Number formats: encoding, decoding, classification, extreme values, parsing of exact values.

Format parameters are those of seed 000 Table 3 (binary16, bfloat16,
TensorFloat-32, binary32, binary64: p, emin, emax, fmin, smin) and, for fp8, the
OCP 8-bit floating point specification as the tcsmt.arith.formats docstring states it
(E4M3 "fn": bias 7, largest finite 448, no infinities, NaN = S.1111.111; E5M2:
IEEE-style, largest finite 57344).
"""
from __future__ import annotations

import struct
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcsmt.arith.formats import FORMATS, INF, NAN, NORMAL, SUBNORMAL, ZERO, get_format
from tcsmt.arith.values import format_value, parse_value
from tcsmt.errors import TcsmtError

P2 = lambda e: Fraction(2) ** e  # noqa: E731

# name: (p, emin, emax, smallest subnormal, largest finite)  -- seed 000 Table 3; OCP fp8
TABLE = {
    "fp16": (11, -14, 15, P2(-24), (2 - P2(-10)) * P2(15)),
    "bf16": (8, -126, 127, P2(-133), (2 - P2(-7)) * P2(127)),
    "tf32": (11, -126, 127, P2(-136), (2 - P2(-10)) * P2(127)),
    "fp32": (24, -126, 127, P2(-149), (2 - P2(-23)) * P2(127)),
    "fp64": (53, -1022, 1023, P2(-1074), (2 - P2(-52)) * P2(1023)),
    "e4m3": (4, -6, 8, P2(-9), Fraction(448)),
    "e5m2": (3, -14, 15, P2(-16), Fraction(57344)),
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_parameters(name):
    p, emin, emax, smin, fmax = TABLE[name]
    f = get_format(name)
    assert f.precision == p and f.emin == emin and f.emax == emax
    assert f.max_finite == fmax
    assert P2(f.min_subnormal_exp) == smin
    assert f.to_fraction(1 << f.pad_bits) == smin  # the smallest positive pattern (tf32: above the pad bits)
    assert f.to_fraction(f.from_fraction(fmax)) == fmax


def test_tf32_smallest_pattern():
    f = get_format("tf32")
    assert f.from_fraction(P2(-136)) == 1 << 13  # stored in the fp32 layout, low 13 bits zero
    assert not f.valid_pattern(np.array([1], dtype=np.uint32))[0]


@pytest.mark.parametrize("name", sorted(TABLE))
def test_smallest_normal(name):
    f = get_format(name)
    x = f.from_fraction(P2(f.emin))
    assert f.classify(np.array([x]))[0] == NORMAL
    below = f.from_fraction(P2(f.emin) - P2(f.min_subnormal_exp))
    assert f.classify(np.array([below]))[0] == SUBNORMAL


def test_known_patterns():
    assert get_format("fp16").from_fraction(Fraction(1)) == 0x3C00
    assert get_format("fp16").from_fraction(Fraction(65504)) == 0x7BFF
    assert get_format("bf16").from_fraction(Fraction(1)) == 0x3F80
    assert get_format("fp32").from_fraction(Fraction(-2)) == 0xC0000000
    assert get_format("tf32").from_fraction(Fraction(1) + P2(-10)) == 0x3F802000
    assert get_format("e4m3").from_fraction(Fraction(448)) == 0x7E
    assert get_format("e4m3").from_fraction(Fraction(-448)) == 0xFE
    assert get_format("e5m2").from_fraction(Fraction(57344)) == 0x7B
    assert get_format("fp32").from_fraction(-0.0) == 0x80000000


def test_e4m3_specials():
    f = get_format("e4m3")
    codes = f.classify(np.arange(256, dtype=np.uint8))
    assert set(np.nonzero(codes == NAN)[0].tolist()) == {0x7F, 0xFF}  # only S.1111.111
    assert not np.any(codes == INF)  # no infinities
    assert f.to_fraction(0x7E) == 448 and f.to_fraction(0x78) == 256  # S.1111.xxx are finite
    with pytest.raises(TcsmtError):
        f.inf_pattern()
    assert f.nan_pattern() == 0x7F


def test_e5m2_specials():
    f = get_format("e5m2")
    codes = f.classify(np.arange(256, dtype=np.uint8))
    assert set(np.nonzero(codes == INF)[0].tolist()) == {0x7C, 0xFC}
    assert set(np.nonzero(codes == NAN)[0].tolist()) == {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}
    assert f.to_fraction(0x7C) == float("inf") and f.to_fraction(0xFC) == float("-inf")


@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_classify_16bit(name):
    f = get_format(name)
    allp = np.arange(1 << 16, dtype=np.uint16)
    codes = f.classify(allp)
    expf = (allp.astype(np.int64) >> f.frac_bits) & ((1 << f.exp_bits) - 1)
    frac = allp.astype(np.int64) & ((1 << f.frac_bits) - 1)
    top = (1 << f.exp_bits) - 1
    assert np.all((codes == ZERO) == ((expf == 0) & (frac == 0)))
    assert np.all((codes == SUBNORMAL) == ((expf == 0) & (frac != 0)))
    assert np.all((codes == INF) == ((expf == top) & (frac == 0)))
    assert np.all((codes == NAN) == ((expf == top) & (frac != 0)))


@pytest.mark.parametrize("name", ["e4m3", "e5m2"])
def test_fp8_exhaustive_round_trip(name):
    f = get_format(name)
    for bits in range(256):
        v = f.to_fraction(bits)
        if isinstance(v, float) and v != v:
            continue
        if v == 0:
            assert f.from_fraction(-0.0 if bits >> 7 else 0.0) == bits
            continue
        assert f.from_fraction(v) == bits
    dec = f.decode_array(np.arange(256, dtype=np.uint8))
    ok = ~np.isnan(dec)
    enc = f.encode_array(dec[ok])
    assert np.array_equal(enc, np.arange(256, dtype=np.uint8)[ok])


def test_fp16_exhaustive_against_numpy():
    f = get_format("fp16")
    allp = np.arange(1 << 16, dtype=np.uint16)
    ours = f.decode_array(allp)
    ref = allp.view(np.float16).astype(np.float64)
    same = (ours == ref) | (np.isnan(ours) & np.isnan(ref))
    assert same.all()
    fin = np.isfinite(ref)
    assert np.array_equal(f.encode_array(ref[fin]), allp[fin])


def test_bf16_against_fp32_top_half():
    f = get_format("bf16")
    allp = np.arange(1 << 16, dtype=np.uint32)
    with np.errstate(invalid="ignore"):  # signalling NaN patterns
        ref = (allp << 16).view(np.float32).astype(np.float64)
    ours = f.decode_array(allp.astype(np.uint16))
    assert ((ours == ref) | (np.isnan(ours) & np.isnan(ref))).all()


@pytest.mark.parametrize("name,value", [
    ("fp16", Fraction(1) + P2(-11)),   # needs 12 bits
    ("fp16", Fraction(65536)),         # overflow
    ("fp16", P2(-25)),                 # below the smallest subnormal
    ("bf16", Fraction(1) + P2(-8)),
    ("tf32", Fraction(1) + P2(-11)),
    ("e4m3", Fraction(464)),           # above 448
    ("e4m3", Fraction(17, 16)),
    ("e5m2", Fraction(1) + P2(-3)),
    ("fp32", Fraction(1, 3)),
    ("fp32", Fraction(1) + P2(-24)),
])
def test_not_representable(name, value):
    with pytest.raises(TcsmtError):
        get_format(name).from_fraction(value)


def test_unknown_format():
    with pytest.raises(TcsmtError):
        get_format("fp7")
    assert get_format("HALF").name == "fp16" and get_format("e4m3fn").name == "e4m3"


def test_encode_array_rejects_unrepresentable():
    with pytest.raises(TcsmtError):
        get_format("fp16").encode_array(np.array([0.1]))


# ------------------------------------------------------------ hypothesis
@settings(max_examples=300, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_fp32_matches_ieee(x):
    f = get_format("fp32")
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    assert f.from_fraction(x) == bits
    v = f.to_fraction(bits)
    assert v == Fraction(x)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_fp64_matches_ieee(x):
    f = get_format("fp64")
    bits = struct.unpack("<Q", struct.pack("<d", x))[0]
    assert f.from_fraction(x) == bits
    assert f.to_fraction(bits) == Fraction(x)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(FORMATS)), st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_pattern_round_trip(name, raw):
    f = get_format(name)
    bits = (raw % (1 << (f.storage_bits - f.pad_bits))) << f.pad_bits
    v = f.to_fraction(bits)
    if isinstance(v, float):  # inf or NaN
        if v != v:
            assert f.classify(np.array([bits], dtype=f.dtype))[0] == NAN
        else:
            assert f.from_fraction(v) == bits
        return
    sign = bits >> (f.storage_bits - 1)
    back = f.from_fraction(-0.0 if (v == 0 and sign) else v)
    assert back == bits
    assert float(f.decode_array(np.array([bits], dtype=f.dtype))[0]) == float(v)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-(2**40), max_value=2**40).filter(lambda n: n != 0),
       st.integers(min_value=-60, max_value=60))
def test_format_parse_round_trip(n, e):
    v = Fraction(n) * P2(e)
    text = format_value(v)
    assert parse_value(text) == v


@pytest.mark.parametrize("text,value", [
    ("1-2^-24", Fraction(1) - P2(-24)),
    ("1+2^-1+2^-2+2^-3", Fraction(15, 8)),
    ("-0.75", Fraction(-3, 4)),
    ("2^10", Fraction(1024)),
    ("3*2^-5", Fraction(3, 32)),
    ("-1+2^-24", -1 + P2(-24)),
    ("2^(-3)", Fraction(1, 8)),
])
def test_parse_value(text, value):
    assert parse_value(text) == value


@pytest.mark.parametrize("value,text", [
    (Fraction(1) - P2(-24), "1-2^-24"),
    (Fraction(1) + P2(-23), "1+2^-23"),
    (Fraction(0), "0"),
    (Fraction(-8), "-2^3"),
])
def test_format_value(value, text):
    assert format_value(value) == text


@pytest.mark.parametrize("bad", ["", "abc", "1/0", "2^x"])
def test_parse_value_errors(bad):
    with pytest.raises(TcsmtError):
        parse_value(bad)
