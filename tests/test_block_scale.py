"""Block-scaled and fp4/fp6 paths of Blackwell (tcgen05.mma, sm_100a) and RTX Blackwell (mma.sync, sm_120a).

Expected values come from MMA-Sim's published model (microsoft/MMA-Sim, commit c785138; arXiv 2511.10909),
re-derived here as exact rational arithmetic from its description, not from its code:

* ``fused_dot_add`` (mmasim/simulator/arithmetic.py lines 115-156): every term is a significand and an
  exponent; a float's exponent is floor(log2 |x|), at least its format's least normal exponent (then the
  significand is below 1); a zero has exponent -126.  Products: significand s_a s_b, exponent
  e_a + e_b (+ e(sa) + e(sb) on mxf8f6f4).  E = the largest exponent; each term truncated toward zero to
  F fraction bits below 2^E; exact sum.
* mxf4nvf4 (lines 196-224): products summed exactly in groups of 16; each group's term has significand
  (group sum) * s(sa) * s(sb) and exponent e(sa) + e(sb); F = 35 (mmasim/simulator/nv_ptx.py line 223).
* the result normalised and truncated (RZ) to fp32's 23 fraction bits, fp32 subnormals below 2^-126;
  2^128 and beyond is inf (lines 189-193 and 222-224).

tcsmt departs from that description only for zeros (a zero factor, a zero C, a zero ue4m3 scale), which
MMA-Sim gives the exponent -126 and tcsmt leaves out of the alignment maximum: the random rows here have
no zero element, C or scale; the rows with zero *groups* test MMA-Sim's rule for them, which tcsmt's
primary mxf4nvf4 reading keeps (``scale_zero_group = "aligns"``).  On mxf4nvf4 a group with a zero ue4m3
scale left out and one at -126 + e(other scale) give the same bits (models/blackwell.toml, source
zero_scale): the zero-scale rows compare with MMA-Sim directly.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from tcsmt.arith.formats import get_format
from tcsmt.arith.registry import resolve
from tcsmt.errors import TcsmtError
from tcsmt.sim.simulator import simulate_params

P2 = lambda e: Fraction(2) ** e  # noqa: E731
FP32 = get_format("fp32")

MXF4_U8_32 = "tcgen05.mma.kind::mxf4nvf4.block_scale.block32.ue8m0"
MXF4_U8_16 = "tcgen05.mma.kind::mxf4nvf4.block_scale.block16.ue8m0"
MXF4_U4_16 = "tcgen05.mma.kind::mxf4nvf4.block_scale.block16.ue4m3"
MXF8 = "tcgen05.mma.kind::mxf8f6f4.block_scale.block32.ue8m0"


# ------------------------------------------------ the published reading, as exact rationals
def _sig_exp(x: Fraction, emin: int) -> tuple[Fraction, int]:
    if x == 0:
        return Fraction(0), -126
    e = max(math.floor(math.log2(abs(x))), emin)
    while P2(e + 1) <= abs(x):
        e += 1
    while e > emin and P2(e) > abs(x):
        e -= 1
    return x / P2(e), e


def _fused_rz32(terms: list[tuple[Fraction, int]], F: int) -> int:
    """MMA-Sim's fused sum of (significand, exponent) terms, then RZ to fp32: the fp32 pattern."""
    E = max(e for _, e in terms)
    s = sum(Fraction(math.trunc(sig * P2(F + e - E))) * P2(-F) for sig, e in terms)
    v = s * P2(E)
    if v == 0:
        return 0  # MMA-Sim: +0
    sig, e = _sig_exp(v, -126)
    v = Fraction(math.trunc(sig * P2(23))) * P2(e - 23)
    if abs(v) >= P2(128):
        return 0xFF800000 if v < 0 else 0x7F800000
    return FP32.from_fraction(v)


def ref_mxf4nvf4(a, b, c, sa, sb, block, scale_fmt, F=35, zero_scale_emin=False) -> int:
    """``zero_scale_emin``: a zero scale has its format's emin as exponent (not MMA-Sim's -126)."""
    fs = get_format(scale_fmt)
    terms = [_sig_exp(c, -126)]

    def scale(x):
        return (Fraction(0), fs.emin) if zero_scale_emin and x == 0 else _sig_exp(x, fs.emin)

    for g in range(0, len(a), 16):
        s = sum(x * y for x, y in zip(a[g:g + 16], b[g:g + 16]))
        s0, e0 = scale(sa[g // block])
        s1, e1 = scale(sb[g // block])
        terms.append((s * s0 * s1, e0 + e1))
    return _fused_rz32(terms, F)


def ref_mxf8f6f4(a, b, c, sa, sb, fa, fb, F=25) -> int:
    ea_min, eb_min = get_format(fa).emin, get_format(fb).emin
    _, esa = _sig_exp(sa, -127)
    _, esb = _sig_exp(sb, -127)
    terms = [_sig_exp(c, -126)]
    for x, y in zip(a, b):
        s0, e0 = _sig_exp(x, ea_min)
        s1, e1 = _sig_exp(y, eb_min)
        terms.append((s0 * s1, e0 + e1 + esa + esb))
    return _fused_rz32(terms, F)


def ref_f8f6f4(a, b, c, fa, fb, F=25) -> int:
    return ref_mxf8f6f4(a, b, c, Fraction(1), Fraction(1), fa, fb, F)


# ------------------------------------------------------------------ simulator helpers
def _values(fmt: str, rng, n: int, nonzero: bool = True) -> list[Fraction]:
    f = get_format(fmt)
    vals = [f.to_fraction(c) for c in range(1 << f.storage_bits)]
    vals = [v for v in vals if isinstance(v, Fraction) and (v != 0 or not nonzero)]
    return [vals[i] for i in rng.integers(0, len(vals), size=n)]


def _sim(instr, in_fmt, a, b, c, sa=None, sb=None, spec="blackwell"):
    p = resolve(spec, in_fmt, "fp32", instr)
    fa, fb, fs = get_format(p.in_fmt), get_format(p.b_format), get_format(p.scale_fmt) if p.scale_fmt else None
    A = np.array([[fa.from_fraction(x) for x in a]], dtype=fa.dtype)
    Bm = np.array([[fb.from_fraction(y) for y in b]], dtype=fb.dtype)
    C = np.array([FP32.from_fraction(c)], dtype=np.uint32)
    kw = {}
    if fs is not None:
        kw = {"sa": np.array([[fs.from_fraction(x) for x in sa]], dtype=np.uint8),
              "sb": np.array([[fs.from_fraction(y) for y in sb]], dtype=np.uint8)}
    return int(simulate_params(p, A, Bm, C, **kw)[0])


def _fp32_value(rng) -> Fraction:
    return FP32.to_fraction(int(FP32.from_fraction(Fraction(int(rng.integers(1, 1 << 12)) * (1 if rng.random() < .5 else -1))
                                                   * P2(int(rng.integers(-30, 12))))))


# ----------------------------------------------------------------------- hand rows
def test_mxf4nvf4_window_is_35_bits():
    """Group 0: 1*1 (scales 1: exponent 0); group 1: 0.5*0.5 = 2^-2 with scales 2^-17 * 2^-17, a term of
    2^-36 with exponent -34; C = -1 cancels group 0.  E = 0: with F = 35 (MMA-Sim) the 2^-36 term lies
    below the window's last bit 2^-35 and is lost: +0.  With 36 bits (hypothesis f36) it stays: 2^-36."""
    a = [Fraction(1)] + [Fraction(0)] * 15 + [Fraction(1, 2)] + [Fraction(0)] * 47
    sa = [Fraction(1), P2(-17), Fraction(1), Fraction(1)]
    assert ref_mxf4nvf4(a, a, Fraction(-1), sa, sa, 16, "ue8m0") == 0
    assert _sim(MXF4_U8_16, "e2m1", a, a, Fraction(-1), sa, sa) == 0
    assert ref_mxf4nvf4(a, a, Fraction(-1), sa, sa, 16, "ue8m0", F=36) == FP32.from_fraction(P2(-36))
    assert _sim(MXF4_U8_16, "e2m1", a, a, Fraction(-1), sa, sa, spec="blackwell:f36") == FP32.from_fraction(P2(-36))


def test_mxf4nvf4_zero_group_aligns():
    """Group 0: 1*1 (scales 1); groups 1-3 are all zero with scales 2^100 * 2^100; C = 1.  MMA-Sim puts
    every group's scale exponent (200) into E, so the window ends at 2^165 and 1 + 1 is lost: +0.  With
    zero groups left out of E (hypothesis zero_group_skipped) the result is 2."""
    a = [Fraction(1)] + [Fraction(0)] * 63
    b = [Fraction(1)] + [Fraction(0)] * 63
    sa = [Fraction(1), P2(100), P2(100), P2(100)]
    sb = [Fraction(1), P2(100), P2(100), P2(100)]
    assert ref_mxf4nvf4(a, b, Fraction(1), sa, sb, 16, "ue8m0") == 0
    assert _sim(MXF4_U8_16, "e2m1", a, b, Fraction(1), sa, sb) == 0
    assert _sim(MXF4_U8_16, "e2m1", a, b, Fraction(1), sa, sb, spec="blackwell:zero_group_skipped") == \
        FP32.from_fraction(Fraction(2))


def test_mxf4nvf4_group_term_exponent_is_the_scales():
    """MMA-Sim aligns a group by its scales' exponent, not by its sum's leading bit.  Group 0: sixteen
    6*6 = 576 with scales 1 (exponent 0, though 576 < 2^10); group 1: 1*1 with scales 2^-12 each, a term
    2^-24 with exponent -24; C = -576.  E = 9 (C's leading bit), window to 2^-26: 2^-24 stays, result
    2^-24.  Aligning group 0 by its leading bit changes nothing here (E is still 9); a group sum of 12
    (sixteen 1.5*0.5) with scales 2^-8, beside C = 2^20, keeps 12*2^-16 in the window and fp32 drops it."""
    a = [Fraction(6)] * 16 + [Fraction(1)] + [Fraction(0)] * 47
    sa = [Fraction(1), P2(-12), Fraction(1), Fraction(1)]
    want = ref_mxf4nvf4(a, a, Fraction(-576), sa, sa, 16, "ue8m0")
    assert want == FP32.from_fraction(P2(-24))
    assert _sim(MXF4_U8_16, "e2m1", a, a, Fraction(-576), sa, sa) == want
    a = [Fraction(3, 2)] * 16 + [Fraction(0)] * 48
    b = [Fraction(1, 2)] * 16 + [Fraction(0)] * 48
    sa = [P2(-8), Fraction(1), Fraction(1), Fraction(1)]
    want = ref_mxf4nvf4(a, b, P2(20), sa, sa, 16, "ue8m0")
    assert want == FP32.from_fraction(P2(20))  # 2^20 + 12*2^-16 truncated to fp32's 23 bits
    assert _sim(MXF4_U8_16, "e2m1", a, b, P2(20), sa, sa) == want


def test_mxf8f6f4_scales_enter_the_products():
    """mxf8f6f4 (scale_vec::1X): a = [448, 1, 0...] (e4m3), b = [448, 1, 0...] (e2m1 cannot hold 448:
    b = [6, 1, ...]), sa = 2^-10, sb = 2^3: products 448*6*2^-7 = 21 and 1*1*2^-7 = 2^-7, C = 1: exact
    22 + 2^-7, in fp32 exactly."""
    a = [Fraction(448), Fraction(1)] + [Fraction(1, 64)] * 30
    b = [Fraction(6), Fraction(1)] + [Fraction(0)] * 30
    got = _sim(MXF8 + ".e4m3.e2m1", "e4m3", a, b, Fraction(1), [P2(-10)], [P2(3)])
    assert got == FP32.from_fraction(Fraction(22) + P2(-7))


# ------------------------------------------------------ random rows against the published reading
@pytest.mark.parametrize("instr,scale_fmt,block", [(MXF4_U8_32, "ue8m0", 32), (MXF4_U8_16, "ue8m0", 16),
                                                   (MXF4_U4_16, "ue4m3", 16)])
def test_mxf4nvf4_rows_match_mma_sim_reading(instr, scale_fmt, block):
    rng = np.random.default_rng(block + len(scale_fmt))
    for _ in range(12):
        a, b = _values("e2m1", rng, 64), _values("e2m1", rng, 64)
        # scales near 1 (cancellation across groups) or spread widely (alignment across 2^+-40)
        spread = 4 if rng.random() < 0.5 else 40
        fs = get_format(scale_fmt)
        sa = [v for v in (_values(scale_fmt, rng, 64 // block * 8)) if abs(math.log2(v)) <= spread][:64 // block]
        sb = [v for v in (_values(scale_fmt, rng, 64 // block * 8)) if abs(math.log2(v)) <= spread][:64 // block]
        if len(sa) < 64 // block or len(sb) < 64 // block:
            sa = sb = [fs.to_fraction(fs.from_fraction(1))] * (64 // block)
        c = _fp32_value(rng)
        assert _sim(instr, "e2m1", a, b, c, sa, sb) == ref_mxf4nvf4(a, b, c, sa, sb, block, scale_fmt), (a, b, c, sa, sb)


@pytest.mark.parametrize("fa,fb", [("e4m3", "e4m3"), ("e5m2", "e2m1"), ("e2m1", "e4m3"), ("e3m2", "e2m3")])
def test_mxf8f6f4_rows_match_mma_sim_reading(fa, fb):
    rng = np.random.default_rng(len(fa + fb))
    for _ in range(6):
        a, b = _values(fa, rng, 32), _values(fb, rng, 32)
        sa, sb = [P2(int(rng.integers(-20, 21)))], [P2(int(rng.integers(-20, 21)))]
        c = _fp32_value(rng)
        got = _sim(f"{MXF8}.{fa}.{fb}", fa, a, b, c, sa, sb)
        assert got == ref_mxf8f6f4(a, b, c, sa[0], sb[0], fa, fb), (a, b, c, sa, sb)


@pytest.mark.parametrize("fa,fb", [("e4m3", "e5m2"), ("e2m1", "e2m1"), ("e5m2", "e3m2")])
def test_f8f6f4_rows_match_mma_sim_reading(fa, fb):
    rng = np.random.default_rng(len(fa + fb) + 7)
    for _ in range(6):
        a, b = _values(fa, rng, 32), _values(fb, rng, 32)
        c = _fp32_value(rng)
        got = _sim(f"tcgen05.mma.kind::f8f6f4.{fa}.{fb}", fa, a, b, c)
        assert got == ref_f8f6f4(a, b, c, fa, fb), (a, b, c)


# ------------------------------------------------------------------------ bad input
def _p(instr=MXF4_U8_16):
    return resolve("blackwell", "e2m1", "fp32", instr)


def test_scales_required_and_refused():
    p = _p()
    a = np.zeros((1, 64), dtype=np.uint8)
    c = np.zeros(1, dtype=np.uint32)
    with pytest.raises(TcsmtError, match="give scale factors sa and sb"):
        simulate_params(p, a, a, c)
    plain = resolve("blackwell", "e2m1", "fp32", "tcgen05.mma.kind::f8f6f4.e2m1.e2m1")
    with pytest.raises(TcsmtError, match="takes no scale factors"):
        simulate_params(plain, a[:, :32], a[:, :32], c, sa=np.ones((1, 1)), sb=np.ones((1, 1)))


def test_scale_shape_format_and_range_checked():
    p = _p()
    a = np.zeros((2, 64), dtype=np.uint8)
    c = np.zeros(2, dtype=np.uint32)
    ones = np.full((2, 4), 0x7F, dtype=np.uint8)  # ue8m0 1.0
    with pytest.raises(TcsmtError, match=r"sa has shape 2x2, .* blocks of 16 products: 2 rows of K = 64 take shape \(2, 4\)"):
        simulate_params(p, a, a, c, sa=ones[:, :2], sb=ones)  # blocks of 32 given to a block16 instruction
    with pytest.raises(TcsmtError, match=r"sb\[1, 3\]: 2\^2-1 is not exactly representable in ue8m0"):
        simulate_params(p, a, a, c, sa=ones, sb=np.where(np.arange(8).reshape(2, 4) == 7, 3.0, 1.0))
    with pytest.raises(TcsmtError, match="0 is not representable in ue8m0"):
        simulate_params(p, a, a, c, sa=np.zeros((2, 4)), sb=ones)
    p4 = _p(MXF4_U4_16)
    with pytest.raises(TcsmtError, match="0x80 is not a ue4m3 bit pattern"):
        simulate_params(p4, a, a, c, sa=np.full((2, 4), 0x80, dtype=np.uint8), sb=ones & 0x38)
    with pytest.raises(TcsmtError, match="0x10 is not a e2m1 bit pattern"):
        simulate_params(p, np.full((2, 64), 0x10, dtype=np.uint8), a, c, sa=ones, sb=ones)


def test_block_size_the_instruction_lacks():
    with pytest.raises(TcsmtError, match="has no path"):
        resolve("blackwell", "e2m1", "fp32", "tcgen05.mma.kind::mxf4nvf4.block_scale.block32.ue4m3")
    with pytest.raises(TcsmtError, match="names the path"):
        _p().with_overrides({"scale_block": 8})


def test_nan_scale_gives_nan():
    """MMA-Sim (arithmetic.py line 204): a NaN scale gives NaN; ue8m0 0xFF is NaN."""
    p = _p()
    a = np.full((1, 64), 0x2, dtype=np.uint8)  # 1.0
    ones = np.full((1, 4), 0x7F, dtype=np.uint8)
    nan = ones.copy()
    nan[0, 2] = 0xFF
    out = simulate_params(p, a, a, np.zeros(1, dtype=np.uint32), sa=nan, sb=ones)
    assert get_format("fp32").classify(out)[0] == 4  # NAN


# ----------------------------------------------------------------- RTX Blackwell (sm_120)
@pytest.mark.parametrize("instr,fa,fb", [("mma.sync.kind::f8f6f4", "e4m3", "e2m1"),
                                         ("mma.sync.kind::mxf8f6f4.block_scale.block32.ue8m0", "e2m1", "e5m2")])
def test_sm120_rows_match_mma_sim_reading(instr, fa, fb):
    """MMA-Sim models RTX Blackwell's m16n8k32 kinds with the same fused 25-bit dot-add as tcgen05
    (mmasim/simulator/nv_ptx.py lines 17-26, 100-131)."""
    rng = np.random.default_rng(11)
    for _ in range(6):
        a, b = _values(fa, rng, 32), _values(fb, rng, 32)
        c = _fp32_value(rng)
        scaled = "block_scale" in instr
        sa, sb = ([P2(int(rng.integers(-9, 10)))], [P2(int(rng.integers(-9, 10)))]) if scaled else ([1], [1])
        got = _sim(f"{instr}.{fa}.{fb}", fa, a, b, c, sa if scaled else None, sb if scaled else None, spec="sm120")
        assert got == ref_mxf8f6f4(a, b, c, Fraction(sa[0]), Fraction(sb[0]), fa, fb)


def test_sm120_mxf4nvf4_rows_match_mma_sim_reading():
    rng = np.random.default_rng(12)
    for _ in range(6):
        a, b = _values("e2m1", rng, 64), _values("e2m1", rng, 64)
        sa = [P2(int(rng.integers(-6, 7))) for _ in range(4)]
        sb = [P2(int(rng.integers(-6, 7))) for _ in range(4)]
        c = _fp32_value(rng)
        got = _sim("mma.sync.kind::mxf4nvf4.block_scale.block16.ue4m3", "e2m1", a, b, c, sa, sb, spec="sm120")
        assert got == ref_mxf4nvf4(a, b, c, sa, sb, 16, "ue4m3")


def test_mxf4nvf4_zero_ue4m3_scale_is_left_out():
    """A group with a zero ue4m3 scale takes no part in the alignment (the primary reading, models/blackwell.toml
    source zero_scale), which gives MMA-Sim's bits; the hypothesis zero_scale_emin lets it join at the format's
    emin, -6 + e(other scale).  Every element 0, B = 1, sa = [0, 1, 1, 1], sb = [448, 1, 1, 1] (patterns 0x00,
    0x38 and 0x7e), C = 0x39800001 = 2^-12 (1 + 2^-23): under the hypothesis E = -6 + 8 = 2, the window ends
    at 2^-33 and C's last bit (2^-35) is cut: 0x39800000; left out, E = -12 and C stays whole."""
    a, b = [Fraction(0)] * 64, [Fraction(1)] * 64
    sa, sb = [Fraction(0), Fraction(1), Fraction(1), Fraction(1)], [Fraction(448), Fraction(1), Fraction(1), Fraction(1)]
    c = FP32.to_fraction(0x39800001)
    for instr, spec in ((MXF4_U4_16, "blackwell"), ("mma.sync.kind::mxf4nvf4.block_scale.block16.ue4m3", "sm120")):
        assert _sim(instr, "e2m1", a, b, c, sa, sb, spec=spec) == 0x39800001 == ref_mxf4nvf4(a, b, c, sa, sb, 16, "ue4m3")
        assert _sim(instr, "e2m1", a, b, c, sa, sb, spec=f"{spec}:zero_scale_emin") == 0x39800000 == \
            ref_mxf4nvf4(a, b, c, sa, sb, 16, "ue4m3", zero_scale_emin=True)
    # random rows: one group's A scale 0 beside a large B scale, the other scales small and their groups zero, C with
    # every fraction bit set at 2^-40 .. 2^0 (so the window's end shows): the primary reading is MMA-Sim's, the
    # hypothesis the emin reading
    rng = np.random.default_rng(6)
    small = [v for v in _values("ue4m3", rng, 400) if 0 < v <= P2(-2)]
    large = [v for v in _values("ue4m3", rng, 400) if v >= 16]
    apart = 0
    for _ in range(40):
        a, b = _values("e2m1", rng, 64, nonzero=False), _values("e2m1", rng, 64, nonzero=False)
        sa, sb = small[:4], small[4:8]
        small = small[8:] + small[:8]
        j = int(rng.integers(0, 4))
        sa[j], sb[j] = Fraction(0), large[int(rng.integers(0, len(large)))]
        a = [x if j * 16 <= k < j * 16 + 16 else Fraction(0) for k, x in enumerate(a)]
        c = (P2(24) - 1) * P2(-int(rng.integers(23, 64))) * (1 if rng.random() < .5 else -1)
        got = _sim(MXF4_U4_16, "e2m1", a, b, c, sa, sb)
        emin = _sim(MXF4_U4_16, "e2m1", a, b, c, sa, sb, spec="blackwell:zero_scale_emin")
        assert got == ref_mxf4nvf4(a, b, c, sa, sb, 16, "ue4m3")
        assert emin == ref_mxf4nvf4(a, b, c, sa, sb, 16, "ue4m3", zero_scale_emin=True)
        apart += got != emin
    assert apart >= 20  # the rows do tell the two readings apart


# ------------------------------------------------------------- solver questions on these paths
def test_discriminate_zero_group_readings():
    """The solver separates MMA-Sim's zero-group rule from tcsmt's usual one at K = 1 (one group): a zero
    group with large scales pushes E up and C's low bits out of the window."""
    pytest.importorskip("pysmt")
    from tcsmt.solve.discriminate import discriminate

    o = discriminate(["blackwell", "blackwell:zero_group_skipped"], "e2m1", "fp32", MXF4_U8_16, K=1, timeout=60)
    assert o.status == "found" and o.scale_fmt is not None
    case = o.cases[0]
    assert len(case.sa) == len(case.sb) == 1
    assert get_format("e2m1").to_fraction(case.a[0]) * get_format("e2m1").to_fraction(case.b[0]) == 0
    out = o.cases[0].outputs
    assert out["blackwell"] != out["blackwell:zero_group_skipped"]


def test_discriminate_where_the_scale_enters():
    """mxf8f6f4: scales on each product (MMA-Sim) against scales on the block's exact sum, K = 2."""
    pytest.importorskip("pysmt")
    from tcsmt.solve.discriminate import discriminate

    o = discriminate(["blackwell", "blackwell:exact_block_sum"], "e4m3", "fp32", MXF8 + ".e4m3.e4m3", K=2, timeout=60)
    assert o.status == "found"
    case = o.cases[0]
    out = case.outputs
    assert out["blackwell"] != out["blackwell:exact_block_sum"]
    # the replayed outputs are the simulator's (discriminate replays every answer)
    fa = get_format("e4m3")
    a = [fa.to_fraction(x) for x in case.a]
    b = [fa.to_fraction(x) for x in case.b]
    s = get_format("ue8m0")
    got = _sim(MXF8 + ".e4m3.e4m3", "e4m3", a + [Fraction(0)] * 30, b + [Fraction(0)] * 30, FP32.to_fraction(case.c),
               [s.to_fraction(case.sa[0])], [s.to_fraction(case.sb[0])])
    assert got == out["blackwell"]


def test_cli_dot_with_scales():
    from click.testing import CliRunner

    from tcsmt.cli import main

    r = CliRunner().invoke(main, ["dot", "--arch", "blackwell", "--in", "e2m1", "--out", "fp32", "--instr", MXF4_U4_16,
                                  "1,0.5", "6,-1.5", "--c", "1", "--sa", "2^-3", "--sb", "448"])
    assert r.exit_code == 0 and "2^8+2^5+2^3-1" in r.output  # (6 - 0.75) * 2^-3 * 448 + 1 = 295
    for extra, msg in ((["--sa", "2^-3,1", "--sb", "448"], "take shape (1, 1)"),
                       (["--sa", "2^-10", "--sb", "448"], "--sa: 2^-10 is not exactly representable in ue4m3"),
                       ([], "give scale factors sa and sb")):
        r = CliRunner().invoke(main, ["dot", "--arch", "blackwell", "--in", "e2m1", "--out", "fp32", "--instr", MXF4_U4_16,
                                      "1,0.5", "6,-1.5", *extra])
        assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output


def test_group_sum_width_parameter():
    """scale_group_bits = 8: the exact group sum 15 * 6 * 6 + 0.5 * 0.5 = 540.25 (2161 quarter units,
    12 bits) keeps its 8 leading bits: 2160 quarter units = 540 (truncation toward zero)."""
    a = [Fraction(6)] * 15 + [Fraction(1, 2)] + [Fraction(0)] * 48
    ones = [Fraction(1)] * 4
    c = P2(-10)
    assert _sim(MXF4_U8_16, "e2m1", a, a, c, ones, ones) == FP32.from_fraction(Fraction(2161, 4) + c)
    cut = _sim(MXF4_U8_16, "e2m1", a, a, c, ones, ones, spec="blackwell:scale_group_bits=8")
    assert cut == FP32.from_fraction(Fraction(540) + c)


@pytest.mark.parametrize("spec", ["blackwell:scale_group_bits=5", "blackwell:scale_products", "blackwell:group_leading_bit",
                                  "blackwell:zero_group_skipped,f25", "blackwell:zero_scale_emin", "blackwell:zero_exp126"])
def test_overridden_readings_agree_in_both_back_ends(spec):
    """The hypotheses' circuits, evaluated by SMT-LIB's definitions, equal the simulator (3000 rows)."""
    pytest.importorskip("pysmt")
    from tcsmt.solve.encode import inputs_for, output_term
    from tcsmt.solve.evaluate import evaluate

    p = resolve(spec, "e2m1", "fp32", MXF4_U4_16)
    rng = np.random.default_rng(5)
    n, K = 3000, 64
    a = rng.integers(0, 16, size=(n, K)).astype(np.uint8)
    b = rng.integers(0, 16, size=(n, K)).astype(np.uint8)
    c = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    near = (rng.integers(4, 11, size=(n, 4)) << 3) | rng.integers(0, 8, size=(n, 4))
    sa = np.where(rng.random((n, 4)) < .5, near, rng.integers(0, 128, size=(n, 4))).astype(np.uint8)
    sb = np.where(rng.random((n, 4)) < .5, near[::-1], rng.integers(0, 128, size=(n, 4))).astype(np.uint8)
    want = simulate_params(p, a, b, c, sa=sa, sb=sb)
    inp = inputs_for(p, K)
    env = {inp.symbol_of(f"a{i}"): a[:, i].astype(np.int64) for i in range(K)}
    env.update({inp.symbol_of(f"b{i}"): b[:, i].astype(np.int64) for i in range(K)})
    env[inp.symbol_of("c")] = c.astype(np.int64)
    for j in range(4):
        env[inp.symbol_of(f"sa{j}")] = sa[:, j].astype(np.int64)
        env[inp.symbol_of(f"sb{j}")] = sb[:, j].astype(np.int64)
    got = np.asarray(evaluate(output_term(p, inp), env)).astype(np.uint32)
    assert np.array_equal(got, want)


# ------------------------------------------------------ zero_exponent on a block-scaled path (a bug found by reading)
def test_zero_product_exponent_joins_on_scaled_products():
    """``zero_exponent = z`` (ModelParams docstring): a zero factor has exponent z, so a zero product's alignment
    exponent is z + e(other factor), and on mxf8f6f4 the product's exponent is e(a) + e(b) + e(sa) + e(sb)
    (MMA-Sim, arithmetic.py lines 93-94 and 146-155: a zero has exponent -126 and the scales' exponents are added
    to every product's).  Row: a = 0 x b = 448 (2^8 * 1.75), scales 2^127 each: the zero product's exponent is
    -126 + 8 + 254 = 136, above C = 2^127 (1 + 2^-23), whose low bit (2^104) falls below the window 2^(136 - 25)
    and is truncated: 2^127.  Leaving the zero product out of E (the bug: the scaled term lost the product's
    ``zero_joins``) kept C whole, while a zero C still joined with -126."""
    instr = MXF8 + ".e4m3.e4m3"
    a = [Fraction(0)] * 32
    b = [Fraction(448)] + [Fraction(0)] * 31
    c = P2(127) * (1 + P2(-23))
    s = [P2(127)]
    assert _sim(instr, "e4m3", a, b, c, s, s) == FP32.from_fraction(c)  # primary: zeros left out
    want = ref_mxf8f6f4(a, b, c, s[0], s[0], "e4m3", "e4m3")
    assert want == FP32.from_fraction(P2(127))
    assert _sim(instr, "e4m3", a, b, c, s, s, spec="blackwell:zero_exponent=-126") == want
    norm = "blackwell:zero_exponent=-126,product_exponent=normalized"  # the zero exponent is not a leading bit
    assert _sim(instr, "e4m3", a, b, c, s, s, spec=norm) == want


@pytest.mark.parametrize("fa,fb", [("e4m3", "e4m3"), ("e2m1", "e5m2")])
def test_zero_exponent_rows_match_mma_sim_reading(fa, fb):
    """``ARCH:zero_exponent=-126`` on mxf8f6f4 is MMA-Sim's fused dot-add with zeros at -126 (module docstring),
    on rows where a third of the elements are zero and the scales span 2^-40 .. 2^127."""
    rng = np.random.default_rng(13)
    instr = f"{MXF8}.{fa}.{fb}"
    for _ in range(40):
        a = [x if rng.random() < .67 else Fraction(0) for x in _values(fa, rng, 32)]
        b = [y if rng.random() < .67 else Fraction(0) for y in _values(fb, rng, 32)]
        sa, sb = P2(int(rng.integers(-40, 128))), P2(int(rng.integers(-40, 128)))
        c = _fp32_value(rng) if rng.random() < .8 else Fraction(0)
        got = _sim(instr, fa, a, b, c, [sa], [sb], spec="blackwell:zero_exponent=-126")
        assert got == ref_mxf8f6f4(a, b, c, sa, sb, fa, fb)


def test_zero_exponent_on_scaled_products_agrees_in_both_back_ends():
    """The zero_exponent circuit of a scaled path, evaluated by SMT-LIB's definitions, equals the simulator."""
    pytest.importorskip("pysmt")
    from tcsmt.solve.encode import inputs_for, output_term
    from tcsmt.solve.evaluate import evaluate

    for spec in ("blackwell:zero_exponent=-126", "blackwell:zero_exponent=-126,product_exponent=normalized"):
        p = resolve(spec, "e4m3", "fp32", MXF8 + ".e4m3.e4m3")
        rng = np.random.default_rng(7)
        n, K = 2000, 32
        a = np.where(rng.random((n, K)) < .4, 0, rng.integers(0, 256, size=(n, K))).astype(np.uint8)
        b = np.where(rng.random((n, K)) < .4, 0, rng.integers(0, 256, size=(n, K))).astype(np.uint8)
        c = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
        sa = rng.integers(0, 255, size=(n, 1)).astype(np.uint8)
        sb = rng.integers(0, 255, size=(n, 1)).astype(np.uint8)
        want = simulate_params(p, a, b, c, sa=sa, sb=sb)
        inp = inputs_for(p, K)
        env = {inp.symbol_of(f"a{i}"): a[:, i].astype(np.int64) for i in range(K)}
        env.update({inp.symbol_of(f"b{i}"): b[:, i].astype(np.int64) for i in range(K)})
        env[inp.symbol_of("c")] = c.astype(np.int64)
        env[inp.symbol_of("sa0")] = sa[:, 0].astype(np.int64)
        env[inp.symbol_of("sb0")] = sb[:, 0].astype(np.int64)
        got = np.asarray(evaluate(output_term(p, inp), env)).astype(np.uint32)
        assert np.array_equal(got, want), spec


def test_path_fields_come_from_declared_roles():
    """Every field that names a path has the role "path" or "path_int" (scale_block): no hand list."""
    import dataclasses

    from tcsmt.arith.params import PATH_FIELDS, ModelParams

    roles = {f.name: f.metadata["role"] for f in dataclasses.fields(ModelParams)}
    assert roles["scale_block"] == "path_int"
    assert set(PATH_FIELDS) == {n for n, r in roles.items() if r in ("path", "path_int")}
    assert {"in_fmt", "out_fmt", "b_fmt", "c_fmt", "instr", "instr_shape", "scale_fmt", "scale_block"} == set(PATH_FIELDS)
    with pytest.raises(TcsmtError, match="scale_block must be an integer"):
        ModelParams("e2m1", "fp32", scale_block="16").with_overrides({})
