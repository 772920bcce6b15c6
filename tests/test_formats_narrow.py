"""The narrow formats of block-scaled and AMD matrix units: fp4, fp6, the scale formats, fnuz fp8.

Expected values and their sources:

* e2m1, e3m2, e2m3: OCP Microscaling Formats (MX) Specification v1.0 (2023), section 5.3.3,
  table "FP6 and FP4 element data types": exponent bias 1 / 3 / 1, largest normal 6 / 28 / 7.5,
  smallest normal 1 / 0.25 / 1, smallest subnormal 0.5 / 0.0625 / 0.125, no infinities, no NaN.
  The eight e2m1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 are also MMA-Sim's fp4 decoding table
  (microsoft/MMA-Sim c785138, mmasim/simulator/arithmetic.py lines 37-47).
* ue8m0: OCP MX v1.0 section 5.4.1 (E8M0): bias 127, 2^-127 .. 2^127, 0xFF = NaN, no zero, no sign.
* ue4m3: the unsigned e4m3 of NVFP4 scales (PTX ISA, block scaling for ``kind::mxf4nvf4``): e4m3
  (OCP OFP8 v1.0: bias 7, largest 448 = 0x7E, NaN 0x7F) without the sign bit.
* e4m3fnuz, e5m2fnuz: Noune et al., "8-bit Numerical Formats for Deep Neural Networks"
  (arXiv 2206.02915), as LLVM APFloat (Float8E4M3FNUZ / Float8E5M2FNUZ) and the StableHLO RFC
  20230321-fp8_fnuz define them and AMD CDNA3 uses them: bias 8 / 16, no infinities, no -0,
  the single NaN 0x80; largest 240 (0x7F) / 57344 (0x7F); smallest subnormal 2^-10 / 2^-17.

Where ml_dtypes (an independent implementation of the same formats) is installed, every pattern's
value and every fp16 -> format rounding (RNE) is also compared with it.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tcsmt.arith.formats import INF, NAN, NORMAL, SUBNORMAL, ZERO, get_format
from tcsmt.arith.params import ModelParams, validate
from tcsmt.errors import TcsmtError
from tcsmt.sim.inputs import as_patterns
from tcsmt.sim.simulator import convert_bits, simulate_params

P2 = lambda e: Fraction(2) ** e  # noqa: E731

# name: (storage bits, bias, least normal, largest finite, least positive value) -- sources above
TABLE = {
    "e2m1": (4, 1, Fraction(1), Fraction(6), Fraction(1, 2)),
    "e3m2": (6, 3, Fraction(1, 4), Fraction(28), Fraction(1, 16)),
    "e2m3": (6, 1, Fraction(1), Fraction(15, 2), Fraction(1, 8)),
    "ue8m0": (8, 127, P2(-127), P2(127), P2(-127)),
    "ue4m3": (7, 7, P2(-6), Fraction(448), P2(-9)),
    "e4m3fnuz": (8, 8, P2(-7), Fraction(240), P2(-10)),
    "e5m2fnuz": (8, 16, P2(-15), Fraction(57344), P2(-17)),
}
ML_DTYPES = {"e2m1": "float4_e2m1fn", "e3m2": "float6_e3m2fn", "e2m3": "float6_e2m3fn",
             "ue8m0": "float8_e8m0fnu", "e4m3fnuz": "float8_e4m3fnuz", "e5m2fnuz": "float8_e5m2fnuz"}


def _finite_codes(f):
    codes = np.arange(1 << f.storage_bits, dtype=np.uint8)
    return [int(c) for c in codes if f.classify(np.array([c]))[0] != NAN]


@pytest.mark.parametrize("name", sorted(TABLE))
def test_parameters(name):
    bits, bias, least_normal, largest, least = TABLE[name]
    f = get_format(name)
    assert f.storage_bits == bits and f.bias == bias and f.dtype == np.uint8
    assert f.max_finite == largest and P2(f.emin) == least_normal
    vals = [f.to_fraction(c) for c in _finite_codes(f)]
    assert max(vals) == largest and min(v for v in vals if v > 0) == least


def test_e2m1_value_table():
    f = get_format("e2m1")
    assert [f.to_fraction(c) for c in range(8)] == [0, Fraction(1, 2), 1, Fraction(3, 2), 2, 3, 4, 6]
    assert [f.to_fraction(c + 8) for c in range(8)] == [0, Fraction(-1, 2), -1, Fraction(-3, 2), -2, -3, -4, -6]
    assert f.from_fraction(-0.0) == 0x8  # OCP fp4 has a signed zero


@pytest.mark.parametrize("name", ["e2m1", "e3m2", "e2m3"])
def test_ocp_fp4_fp6_every_pattern_finite(name):
    f = get_format(name)
    codes = f.classify(np.arange(1 << f.storage_bits, dtype=np.uint8))
    assert not np.any(codes == NAN) and not np.any(codes == INF)
    assert f.to_fraction((1 << f.storage_bits - 1) - 1) == f.max_finite  # S.11..1.11..1 is the largest finite
    with pytest.raises(TcsmtError, match="no NaN"):
        f.from_fraction(float("nan"))
    with pytest.raises(TcsmtError, match="no infinities"):
        f.from_fraction(float("inf"))


def test_e3m2_e2m3_boundaries():
    e3m2, e2m3 = get_format("e3m2"), get_format("e2m3")
    assert e3m2.to_fraction(0x1F) == 28 and e3m2.to_fraction(0x04) == Fraction(1, 4)
    assert e3m2.to_fraction(0x03) == Fraction(3, 16) and e3m2.classify(np.array([3]))[0] == SUBNORMAL
    assert e2m3.to_fraction(0x1F) == Fraction(15, 2) and e2m3.to_fraction(0x08) == 1
    assert e2m3.to_fraction(0x07) == Fraction(7, 8) and e2m3.classify(np.array([7]))[0] == SUBNORMAL
    assert e3m2.to_fraction(0x3F) == -28 and e2m3.to_fraction(0x20) == 0 and e2m3.from_fraction(-0.0) == 0x20


def test_ue8m0():
    f = get_format("ue8m0")
    assert f.to_fraction(0x00) == P2(-127) and f.to_fraction(0x7F) == 1 and f.to_fraction(0xFE) == P2(127)
    cls = f.classify(np.arange(256, dtype=np.uint8))
    assert set(np.nonzero(cls == NAN)[0].tolist()) == {0xFF}
    assert np.all(cls[:0xFF] == NORMAL)  # no zero, no subnormals
    for bad, why in ((0, "no zero"), (3, "not exactly representable"), (P2(-128), "not exactly representable"), (-1, "unsigned")):
        with pytest.raises(TcsmtError, match=why):
            f.from_fraction(bad)


def test_ue4m3():
    f = get_format("ue4m3")
    assert f.to_fraction(0x7E) == 448 and f.to_fraction(0x38) == 1 and f.to_fraction(0x01) == P2(-9)
    assert f.classify(np.array([0x7F]))[0] == NAN and f.classify(np.array([0]))[0] == ZERO
    assert not f.valid_pattern(np.array([0x80]))[0]  # no sign bit
    with pytest.raises(TcsmtError, match="not a ue4m3 bit pattern"):
        as_patterns(np.array([0x80], dtype=np.uint8), f, "scale")
    with pytest.raises(TcsmtError, match="unsigned"):
        f.from_fraction(-2)


@pytest.mark.parametrize("name", ["e4m3fnuz", "e5m2fnuz"])
def test_fnuz_specials(name):
    f = get_format(name)
    cls = f.classify(np.arange(256, dtype=np.uint8))
    assert set(np.nonzero(cls == NAN)[0].tolist()) == {0x80}  # the pattern of -0 is the only NaN
    assert not np.any(cls == INF)
    assert f.to_fraction(0x7F) == TABLE[name][3] and f.to_fraction(0xFF) == -TABLE[name][3]
    assert f.nan_pattern() == 0x80 and f.from_fraction(0) == 0x00
    with pytest.raises(TcsmtError, match="no negative zero"):
        f.from_fraction(-0.0)
    with pytest.raises(TcsmtError, match="no infinities"):
        f.from_fraction(float("-inf"))


def test_e4m3fnuz_known_patterns():
    f = get_format("e4m3fnuz")  # bias 8: 1.0 = exponent field 8 = 0x40 (e4m3fn: 0x38)
    assert f.from_fraction(1) == 0x40 and f.from_fraction(-1) == 0xC0 and f.from_fraction(P2(-10)) == 0x01
    g = get_format("e5m2fnuz")  # bias 16: 1.0 = 0x40 (e5m2: 0x3C)
    assert g.from_fraction(1) == 0x40 and g.from_fraction(P2(-17)) == 0x01 and g.from_fraction(P2(-15)) == 0x04


@pytest.mark.parametrize("name", sorted(TABLE))
def test_exhaustive_round_trip(name):
    f = get_format(name)
    for c in _finite_codes(f):
        v = f.to_fraction(c)
        if v == 0 and c:  # -0 (its own pattern through a float -0.0)
            assert f.from_fraction(-0.0) == c
        else:
            assert f.from_fraction(v) == c


@pytest.mark.parametrize("name", sorted(ML_DTYPES))
def test_against_ml_dtypes(name):
    ml = pytest.importorskip("ml_dtypes")
    f = get_format(name)
    codes = np.arange(1 << f.storage_bits, dtype=np.uint8)
    ref = codes.view(getattr(ml, ML_DTYPES[name])).astype(np.float64)
    mine = f.decode_array(codes)
    assert np.array_equal(np.isnan(ref), np.isnan(mine))
    ok = ~np.isnan(ref)
    assert np.array_equal(ref[ok], mine[ok]) and np.array_equal(np.signbit(ref[ok]), np.signbit(mine[ok]))


@pytest.mark.parametrize("name", ["e2m1", "e3m2", "e2m3", "e4m3fnuz", "e5m2fnuz"])
def test_rounding_from_fp16_matches_ml_dtypes(name):
    """Every finite fp16 value rounded (RNE) into the format, as semantics.convert does it, against
    ml_dtypes' cast: both saturate the OCP fp4/fp6 (no inf, no NaN to overflow to) and give the NaN
    0x80 for an fnuz overflow (from max + half an ulp on)."""
    ml = pytest.importorskip("ml_dtypes")
    f, fp16 = get_format(name), get_format("fp16")
    bits = np.arange(1 << 16, dtype=np.uint16)
    v = bits.view(np.float16).astype(np.float32)
    mine = np.asarray(convert_bits(bits, fp16, f, "rne")).astype(np.uint8)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = v.astype(getattr(ml, ML_DTYPES[name])).view(np.uint8)
    finite = np.isfinite(v)
    assert np.array_equal(mine[finite], ref[finite])
    half_ulp = float(P2(f.emax - f.frac_bits - 1))
    over = finite & (v >= float(f.max_finite) + half_ulp)
    want = f.nan_pattern() if f.has_nan else f.from_fraction(f.max_finite)
    assert over.any() and np.all(mine[over] == want)


def test_sub_byte_patterns_checked():
    with pytest.raises(TcsmtError, match="0x10 is not a e2m1 bit pattern"):
        as_patterns(np.array([0x3, 0x10], dtype=np.uint8), get_format("e2m1"), "a")
    with pytest.raises(TcsmtError, match="0x40 is not a e3m2 bit pattern"):
        as_patterns(np.array([0x40], dtype=np.uint8), get_format("e3m2"), "a")
    assert as_patterns(np.array([0xF], dtype=np.uint8), get_format("e2m1"), "a")[0] == 0xF


@pytest.mark.parametrize("name", ["e2m1", "e3m2", "e2m3", "e4m3fnuz", "e5m2fnuz"])
def test_both_back_ends_exhaustive_products(name):
    """Every product of two patterns plus C = 1 through a 25-bit truncating window: the SMT term,
    evaluated by SMT-LIB's definitions, equals the simulator, which equals the exact value wherever
    that is an fp32 number."""
    pytest.importorskip("pysmt")
    from tcsmt.solve.encode import make_inputs, output_term
    from tcsmt.solve.evaluate import evaluate

    f = get_format(name)
    p = validate(ModelParams(in_fmt=name, out_fmt="fp32", instr_k=1, block_k=1, extra_bits=2, name="narrow"))
    codes = np.arange(1 << f.storage_bits, dtype=np.int64)
    a, b = (x.ravel() for x in np.meshgrid(codes, codes))
    c = np.full(a.shape, 0x3F800000, dtype=np.int64)
    out = simulate_params(p, a[:, None].astype(np.uint8), b[:, None].astype(np.uint8), c.astype(np.uint32))
    inp = make_inputs(name, "fp32", 1)
    smt = evaluate(output_term(p, inp), {inp.symbol_of("a0"): a, inp.symbol_of("b0"): b, inp.symbol_of("c"): c})
    assert np.array_equal(np.asarray(smt).astype(np.uint32), np.asarray(out).astype(np.uint32))
    exact = f.decode_array(a) * f.decode_array(b) + 1.0  # exact in float64: at most 32 significant bits
    got = np.asarray(out).astype(np.uint32).view(np.float32).astype(np.float64)
    assert np.array_equal(np.isnan(exact), np.isnan(got))
    # where the exact sum is an fp32 number, no addend had a bit below the window (a product has at
    # most 6 significant bits, C one): the result is the exact sum (every row but e5m2fnuz's widest)
    with np.errstate(over="ignore"):
        ok = ~np.isnan(exact) & (exact.astype(np.float32).astype(np.float64) == exact)
    assert ok.mean() > 0.9
    assert np.array_equal(got[ok], exact[ok])
