"""The one definition of what a matrix unit computes, written once for two back ends.

(Over 400 lines on purpose: every semantic fact lives here, so that the simulator, the SMT encoding
and every analysis read one definition; splitting it would invite exactly the drift it prevents.)

Every function here takes a back end ``B`` (:class:`tcsmt.backends.numpy.NumpyBackend`
for the simulator, :class:`tcsmt.backends.smt.SmtBackend` for the solver) and only
uses its exact-integer operations (the contract :class:`tcsmt.arith.contract.Backend`), so the simulator and the SMT encoding cannot
drift apart.  All quantities are exact integers; booleans are the back end's
booleans.  Static bit-width bounds (plain Python ints) are passed along so the
SMT back end can size its bit-vectors and the simulator can switch from int64 to
Python integers when a quantity could exceed 62 bits.

The arithmetic of one block FMA (``block_fma``), with the parameters of
:class:`tcsmt.arith.params.ModelParams`:

1. Decode every input: sign, exponent ``e`` (``emin`` for subnormals), integer
   significand ``m`` (subnormals flushed to zero where the model says so).
2. Products are exact: magnitude ``ma*mb``, LSB weight ``2^(ea+eb-2f)``; their
   alignment exponent is ``ea+eb`` ("raw") or that of their leading bit
   ("normalized").  C keeps its own exponent.
3. ``E`` = the largest alignment exponent of the non-zero addends (at least
   ``align_floor``).  Every addend is placed on the grid of weight ``2^(E-F)``;
   bits below it are lost by truncation of the magnitude, round-to-nearest-even
   of the magnitude, or two's-complement floor.  ``F = None`` keeps every bit.
4. The aligned integers are summed exactly; the magnitude of the sum is wrapped
   (or saturated) to ``F+1+carry_bits`` bits when the carry bits are finite.
5. The sum is normalised once and rounded to ``block_frac_bits`` fraction bits
   in the accumulator format's exponent range (subnormals kept unless
   flushed), with the block rounding mode; overflow gives inf or the largest
   finite number as IEEE 754 prescribes for that rounding direction.

``dot`` chains blocks through the rounded accumulator, converts to the output
format between instructions, and adds IEEE-like NaN/Inf handling.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tcsmt.arith.contract import Backend, V
from tcsmt.arith.formats import Format, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.errors import TcsmtError


@dataclass
class Decoded:
    """One decoded input: value = (-1)^neg * sig * 2^(e - fmt.frac_bits)."""

    neg: V
    e: V
    sig: V
    nan: V
    inf: V
    fmt: Format


@dataclass
class Term:
    """One addend: value = (-1)^neg * mag * 2^lsb, alignment exponent ``top``.

    Static facts (Python ints): mag < 2^mag_bits; lsb in [lsb_min, lsb_max];
    top in [top_min, top_max]; top - lsb >= gap_min for non-zero mag; and the
    value is below 2^(top + head).
    """

    neg: V
    mag: V
    lsb: V
    top: V
    mag_bits: int
    lsb_min: int
    lsb_max: int
    top_min: int
    top_max: int
    gap_min: int
    head: int
    known_zero: bool = False
    """Statically +0 (the constant C a chain starts from): it takes part in the zero-sign rules but
    adds nothing, so the sum's static bound leaves it out."""
    zero_joins: bool = False
    """A zero addend's ``top`` is its alignment exponent too (``ModelParams.zero_exponent``): it joins the
    maximum E.  Otherwise zero addends are left out of E."""
    join_if: V | None = None
    """Where set (and ``zero_joins`` is not): the addend joins E exactly where this holds, zero or not (a
    group sum under ``scale_zero_group = "aligns"``: where neither of its scales is zero; it is true wherever
    the magnitude is non-zero).  None: it joins where its magnitude is non-zero."""
    peak: Fraction | None = None
    """|value| <= peak * 2^top (None: 2^head).  Tighter than the head where the significands carry
    fewer bits than their format (fp8 operands converted exactly to fp16): it lets a block's
    static sum bound, and so the question whether carry bits can bind, follow the real precision."""


@dataclass
class Flags:
    """Special-value flags of a computation: NaN, +inf, -inf seen."""

    nan: V
    pinf: V
    ninf: V


def _ceil_log2(n: int) -> int:
    return max(0, (n - 1).bit_length())


# ----------------------------------------------------------------- decoding
def decode(B: Backend, fmt: Format, bits: V, keep_subnormals: bool = True) -> Decoded:
    """Decode bit patterns of ``fmt`` exactly (specials get sig = 0 and a flag)."""
    sign, expf, frac = B.fields(fmt, bits)
    top_field = (1 << fmt.exp_bits) - 1
    inf = B.false()
    if fmt.specials == "ieee":
        special = B.eq(expf, top_field)
        nan = B.and_(special, B.ne(frac, 0))
        inf = B.and_(special, B.eq(frac, 0))
    elif fmt.specials == "fn":  # OCP e4m3: only S.1111.111 is NaN
        nan = B.and_(B.eq(expf, top_field), B.eq(frac, (1 << fmt.frac_bits) - 1))
    elif fmt.specials == "fnuz":  # the pattern of -0 is the only NaN
        nan = B.and_(B.ne(sign, 0), B.and_(B.eq(expf, 0), B.eq(frac, 0)))
    elif fmt.specials == "e8m0":  # 0xFF is NaN
        nan = B.eq(expf, top_field)
    else:  # "none": OCP fp4/fp6, every pattern finite
        nan = B.false()
    special = B.or_(nan, inf)
    if fmt.has_subnormals:
        sub = B.eq(expf, 0)
        e = B.ite(sub, fmt.emin, B.sub(expf, fmt.bias))
        sig = B.ite(sub, frac, B.add(frac, 1 << fmt.frac_bits))
    else:  # e8m0: every field is a normal power of two
        sub = B.false()
        e = B.sub(expf, fmt.bias)
        sig = B.add(frac, 1 << fmt.frac_bits)
    if not keep_subnormals:
        sig = B.ite(sub, 0, sig)
    sig = B.ite(special, 0, sig)
    return Decoded(B.ne(sign, 0), e, sig, nan, inf, fmt)


def product_term(B: Backend, p: ModelParams, a: Decoded, b: Decoded,
                 exp_range: tuple[int, int] | None = None, precision: int | None = None,
                 precision_b: int | None = None) -> tuple[Term, Flags]:
    """The exact product a*b as an addend, with its special-value flags.

    ``a`` and ``b`` may have different formats (mixed e4m3 x e5m2 paths): the product's significand has
    fa + fb fraction bits.  ``exp_range`` (lo, hi) narrows the static bounds when the caller knows every
    factor's exponent lies in [lo, hi] (a query domain, as in ``verify``); by default the formats' [emin, emax].
    ``precision`` (``precision_b`` for b; default the same): the factors carry at most this many fraction bits
    (fewer than their format's when they were converted exactly from a narrower one); it tightens ``peak``.
    """
    fa, fb = a.fmt.frac_bits, b.fmt.frac_bits
    sig_bits = fa + fb + 2
    mag = B.mul(a.sig, b.sig, sig_bits)
    esum = B.add(a.e, b.e)
    lsb = B.sub(esum, fa + fb)
    emin, emax = exp_range or (a.fmt.emin, a.fmt.emax)
    bmin, bmax = exp_range or (b.fmt.emin, b.fmt.emax)
    if p.product_exponent == "raw":
        top, top_min, top_max, gap, head = esum, emin + bmin, emax + bmax, fa + fb, 2
    else:
        top = B.add(lsb, B.msb(mag, sig_bits))
        top_min, top_max, gap, head = emin + bmin - fa - fb, emax + bmax + 1, 0, 1
    neg = B.xor(a.neg, b.neg)
    a_zero, b_zero = B.eq(a.sig, 0), B.eq(b.sig, 0)
    a_fin_zero = B.and_(a_zero, B.not_(B.or_(a.inf, a.nan)))
    b_fin_zero = B.and_(b_zero, B.not_(B.or_(b.inf, b.nan)))
    nan = B.or_(B.or_(a.nan, b.nan), B.or_(B.and_(a.inf, b_fin_zero), B.and_(b.inf, a_fin_zero)))
    inf = B.and_(B.or_(a.inf, b.inf), B.not_(nan))
    flags = Flags(nan, B.and_(inf, B.not_(neg)), B.and_(inf, neg))
    # a factor with at most q fraction bits is at most (2 - 2^-q) * 2^e (e = emin for subnormals)
    qa = fa if precision is None else precision
    qb = fb if precision is None and precision_b is None else (precision_b if precision_b is not None else qa)
    peak = (2 - Fraction(1, 1 << qa)) * (2 - Fraction(1, 1 << qb)) if p.product_exponent == "raw" else None
    term = Term(neg, mag, lsb, top, sig_bits, emin + bmin - fa - fb, emax + bmax - fa - fb, top_min, top_max, gap,
                head, peak=peak)
    if p.zero_exponent is not None:
        z = p.zero_exponent  # a zero factor has exponent z: the zero product's is z + e(other factor)
        zero_top = B.add(B.ite(a_zero, z, a.e), B.ite(b_zero, z, b.e))
        term = _zero_top(B, term, zero_top, min(2 * z, z + min(emin, bmin)), max(2 * z, z + max(emax, bmax)))
    return term, flags


def _zero_top(B: Backend, t: Term, zero_top: V, lo: int, hi: int) -> Term:
    """``t`` whose alignment exponent, where its magnitude is zero, is ``zero_top`` (in [lo, hi]), joining
    the block's maximum (``ModelParams.zero_exponent``)."""
    top = B.ite(B.eq(t.mag, 0), zero_top, t.top)
    return dataclasses.replace(t, top=top, top_min=min(t.top_min, lo), top_max=max(t.top_max, hi),
                               zero_joins=True)


def value_term(B: Backend, d: Decoded) -> tuple[Term, Flags]:
    """A decoded value (C, or an intermediate result) as an addend."""
    f = d.fmt.frac_bits
    term = Term(d.neg, d.sig, B.sub(d.e, f), d.e, f + 1, d.fmt.emin - f, d.fmt.emax - f,
                d.fmt.emin, d.fmt.emax, f, 1, peak=2 - Fraction(1, 1 << f))
    return term, Flags(d.nan, B.and_(d.inf, B.not_(d.neg)), B.and_(d.inf, d.neg))


def merge_flags(B: Backend, flags: Sequence[Flags]) -> Flags:
    nan, pinf, ninf = flags[0].nan, flags[0].pinf, flags[0].ninf
    for fl in flags[1:]:
        nan, pinf, ninf = B.or_(nan, fl.nan), B.or_(pinf, fl.pinf), B.or_(ninf, fl.ninf)
    return Flags(B.or_(nan, B.and_(pinf, ninf)), pinf, ninf)


# --------------------------------------------------------------- block sum
@dataclass
class BlockSum:
    """Result of aligning and summing addends: value = (-1)^neg * mag * 2^lsb."""

    neg: V
    mag: V
    lsb: V
    mag_bits: int
    any_nonzero: V
    all_negative: V


def _tree(B: Backend, items: list, op):
    while len(items) > 1:
        nxt = [op(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        if len(items) % 2:
            nxt.append(items[-1])
        items = nxt
    return items[0]


def _floor_is_inert(terms: Sequence[Term], F: int, p: ModelParams) -> bool:
    """Whether ``align_floor`` can never change this block's sum (a static fact).

    Two cases.  (1) No term's alignment exponent can be below the floor
    (``top_min >= align_floor`` for every term): when some term is non-zero,
    E = max of the non-zero terms' tops is already at or above the floor, so
    ``max(E, align_floor) = E``; when every term is zero the sum is zero with
    either E (only the LSB weight of a zero differs, and a zero magnitude
    rounds to the zero of the same sign).  This holds for any carry bits
    (fp16 products and an fp32 C never get below Hopper's floor of -133).
    (2) No term can have a bit below the floored window's last bit
    (``lsb_min >= align_floor - F`` for every term): raising E to the floor
    drops nothing, and without the floor nothing is dropped either (the window
    then reaches lower still); with unbounded carries the sums are equal.
    Leaving the floor out keeps the solver's circuit smaller, and two
    hypotheses that differ only in an inert floor get the same circuit.
    """
    if p.align_floor is None:
        return True
    floor = p.align_floor
    if min(t.top_min for t in terms) >= floor:
        return True
    return p.carry_bits == "unbounded" and min(t.lsb_min for t in terms) >= floor - F


def on_grid(B: Backend, t: Term, L: int, specials: bool = True) -> V:
    """|t| as an integer multiple of 2^L: t.mag * 2^(t.lsb - L), for a constant L <= t.lsb_min (exact).

    A special input (inf, NaN) decodes with exponent emax + 1 and significand 0, so its term's lsb can
    exceed ``lsb_max`` by up to 2 (a product of two specials): the shift bound allows that (its value
    is 0 there).  ``specials=False`` is the caller's claim that its inputs are finite (a query domain
    that excludes specials, as ``verify``'s): the tighter bound keeps that circuit smaller.
    """
    smax = t.lsb_max + (_SPECIAL_SLACK if specials else 0) - L
    return B.shl(t.mag, B.sub(t.lsb, L), smax, t.mag_bits + smax)


_SPECIAL_SLACK = 2


def _sum_bits(terms: Sequence[Term], F: int | None, p: ModelParams, width: int) -> int:
    """A static bound of a block's sum: |S| < 2^result (it sizes the circuit, and decides whether
    carry bits can bind).

    In the window, |value| <= peak * 2^top with top <= E, so a truncated addend
    mag * 2^(lsb - L) is at most peak * 2^F; rounding it up (align "rne", "floor") adds at most 1.
    In an exact block (F None) every addend is below 2^(width - 1).  A known +0 adds nothing.
    """
    live = [t for t in terms if not t.known_zero] or list(terms[:1])
    if F is None:
        return width - 1 + _ceil_log2(len(live))
    peaks = sum((t.peak if t.peak is not None else Fraction(1 << t.head)) for t in live)
    bound = int(peaks * (1 << F)) + (len(live) if p.align != "trunc" else 0)  # |S| <= bound
    return bound.bit_length()


def _align_term(B: Backend, t: Term, L: V, F: int, align: str) -> V:
    """|t| on the grid 2^L, where L = E - F and t.top <= E: the bits below the grid lost by ``align``
    ("trunc": magnitude truncated; "rne": magnitude rounded to nearest even; "floor": the signed value
    truncated towards minus infinity, so a negative term that loses bits grows by one unit)."""
    d = B.sub(t.lsb, L)  # <= F - gap_min by construction
    smax = max(0, F - t.gap_min)
    left = B.ite(B.gt(d, 0), d, 0)
    if smax > 0:
        shifted = B.shl(t.mag, B.min(left, smax), smax, t.mag_bits + smax)
    else:
        shifted = t.mag
    right = B.ite(B.lt(d, 0), B.neg(d), 0)
    kept = B.shr(shifted, right)
    if align == "trunc":
        return kept
    if align == "rne":
        r1 = B.max(B.sub(right, 1), 0)
        half = B.and_(B.ge(right, 1), B.ne(B.mod_pow2(B.shr(t.mag, r1), 1), 0))
        sticky = B.and_(B.ge(right, 2), B.low_nonzero(t.mag, r1))
        odd = B.ne(B.mod_pow2(kept, 1), 0)
        inc = B.and_(half, B.or_(sticky, odd))
        return B.add(kept, B.ite(inc, 1, 0))
    lost = B.and_(B.gt(right, 0), B.low_nonzero(t.mag, right))  # floor
    up = B.and_(t.neg, lost)
    return B.add(kept, B.ite(up, 1, 0))


def block_exponent(B: Backend, terms: Sequence[Term], F: int, p: ModelParams) -> V:
    """E of a window block (:func:`block_sum`, F fraction bits): the largest alignment exponent of the non-zero
    terms (of every term that joins the alignment, ``zero_joins`` / ``join_if``), raised to ``align_floor`` where
    the floor is not inert; the block's grid is 2^(E - F)."""
    sentinel = min(t.top_min for t in terms) - 1
    tops = [t.top if t.zero_joins else B.ite(B.ne(t.mag, 0) if t.join_if is None else t.join_if, t.top, sentinel)
            for t in terms]
    E = _tree(B, tops, B.max)
    if p.align_floor is not None and not _floor_is_inert(terms, F, p):
        E = B.max(E, p.align_floor)
    return E


def redecoded(B: Backend, x: Decoded, fmt: Format) -> Decoded:
    """x's value as ``fmt`` decodes it, for a value that ``fmt`` holds exactly with at least x's fraction bits
    and an exponent range reaching x's (fp16 in tf32 or fp32): the significand moves up by the fraction bits
    fmt has more, and a subnormal x (significand below 2^fx) is normalized, sig 2^d with exponent e - d, where
    that stays within fmt's normal range (else fmt's emin).  A zero gets fmt's emin, as :func:`decode` gives it."""
    fx, f = x.fmt.frac_bits, fmt.frac_bits
    sig = B.shl(x.sig, f - fx, f - fx, f + 2) if f > fx else x.sig
    d = B.sub(f, B.msb(sig, f + 1))  # 0 for a normal x, up to fx for the smallest subnormal
    d = B.ite(B.eq(sig, 0), 0, B.min(d, B.max(B.sub(x.e, fmt.emin), 0)))
    e = B.ite(B.eq(sig, 0), fmt.emin, B.sub(x.e, d))
    return Decoded(x.neg, e, B.shl(sig, d, f, f + 2), x.nan, x.inf, fmt)


def block_sum(B: Backend, terms: Sequence[Term], F: int | None, p: ModelParams) -> BlockSum:
    """Align ``terms`` to the largest exponent with F fraction bits and add them (steps 3-4)."""
    nonzero = [B.ne(t.mag, 0) for t in terms]
    any_nz = _tree(B, list(nonzero), B.or_)
    all_neg = _tree(B, [t.neg for t in terms], B.and_)
    signed: list = []
    if F is None:
        L_static = min(t.lsb_min for t in terms)
        L = B.const(L_static)
        width = max(t.mag_bits + t.lsb_max - L_static for t in terms) + 1
        for t in terms:
            signed.append((t.neg, on_grid(B, t, L_static)))
    else:
        L = B.sub(block_exponent(B, terms, F, p), F)
        width = max(t.head for t in terms) + F + 1
        for t in terms:
            signed.append((t.neg, _align_term(B, t, L, F, p.align)))
    # the circuit keeps its generous width (measured: narrowing it to the tight bound made small
    # solver queries several times slower); the tight bound decides whether carry bits can bind
    sum_bits = width + _ceil_log2(len(terms)) + 1
    vals = [B.fit(B.ite(neg, B.neg(a), a), sum_bits + 1) for neg, a in signed]
    S = B.fit(_tree(B, vals, B.add), sum_bits + 1)
    neg = B.lt(S, 0)
    mag = B.ite(neg, B.neg(S), S)
    mag_bits = sum_bits
    if F is not None and p.carry_bits != "unbounded":
        cap = F + 1 + int(p.carry_bits)
        if cap < _sum_bits(terms, F, p, width):  # otherwise no sum reaches the carry bits: inert
            if p.overflow == "wrap":
                mag = B.mod_pow2(mag, cap)
            else:
                mag = B.min(mag, (1 << cap) - 1)
            mag_bits = cap
    return BlockSum(neg, B.fit(mag, mag_bits + 1), L, mag_bits, any_nz, all_neg)


# ---------------------------------------------------------------- rounding
def round_to(B: Backend, neg: V, mag: V, lsb: V, mag_bits: int, fmt: Format, frac_bits: int, mode: str,
             keep_subnormals: bool = True, overflow_inf: bool = False) -> V:
    """Bit pattern of (-1)^neg * mag * 2^lsb rounded to ``frac_bits`` fraction bits in ``fmt``.

    ``fmt`` is a signed format with subnormals (every format but the scale formats ue8m0/ue4m3);
    in a format without -0 (fnuz) a zero of either sign is +0; where the format has no infinity an
    overflow to "inf" gives its NaN (e4m3, fnuz) or, with neither (OCP fp4/fp6), the largest finite.

    The exponent range is ``fmt``'s; below 2^emin the result is subnormal with
    its LSB at 2^(emin - frac_bits).  A zero magnitude gives the zero of sign
    ``neg``.  ``mode``: "rne" (nearest, ties to even), "rna" (nearest, ties away
    from zero: the magnitude rounds up exactly when the first dropped bit is 1),
    "rz", "ru", "rd".  Overflow gives inf (rne, rna; ru for positive, rd for
    negative) or the largest finite value (rz and the other directed cases);
    with ``overflow_inf`` every overflow gives inf.
    """
    if not fmt.signed or not fmt.has_subnormals:
        raise TcsmtError(f"{fmt.name} is a scale format: no result is rounded into it")
    m = B.msb(mag, mag_bits)
    e = B.add(lsb, m)
    e_eff = B.max(e, fmt.emin)
    sh = B.sub(B.sub(e_eff, frac_bits), lsb)
    left = B.min(B.ite(B.lt(sh, 0), B.neg(sh), 0), frac_bits + 1)
    q = B.shl(mag, left, frac_bits + 1, mag_bits + frac_bits + 1)
    right = B.ite(B.gt(sh, 0), sh, 0)
    q = B.shr(q, right)
    r1 = B.max(B.sub(right, 1), 0)
    half = B.and_(B.ge(right, 1), B.ne(B.mod_pow2(B.shr(mag, r1), 1), 0))
    sticky = B.and_(B.ge(right, 2), B.low_nonzero(mag, r1))
    inexact = B.or_(half, sticky)
    if mode == "rne":
        inc = B.and_(half, B.or_(sticky, B.ne(B.mod_pow2(q, 1), 0)))
    elif mode == "rna":
        inc = half
    elif mode == "rz":
        inc = B.false()
    elif mode == "ru":
        inc = B.and_(inexact, B.not_(neg))
    else:  # rd
        inc = B.and_(inexact, neg)
    q = B.fit(B.add(q, B.ite(inc, 1, 0)), frac_bits + 3)
    carry = B.ge(q, 1 << (frac_bits + 1))
    q = B.ite(carry, B.shr(q, 1), q)
    e_eff = B.ite(carry, B.add(e_eff, 1), e_eff)
    normal = B.ge(q, 1 << frac_bits)
    expf = B.ite(normal, B.add(e_eff, fmt.bias), 0)
    frac = B.ite(normal, B.sub(q, 1 << frac_bits), q)
    if not keep_subnormals:
        frac = B.ite(normal, frac, 0)
    overflow = B.and_(normal, B.gt(e_eff, fmt.emax))
    if mode in ("rne", "rna") or overflow_inf:
        to_inf = B.true()
    elif mode == "rz":
        to_inf = B.false()
    elif mode == "ru":
        to_inf = B.not_(neg)
    else:
        to_inf = neg
    pad = fmt.frac_bits - frac_bits
    # overflowing lanes take ``big`` below; their exponent can exceed the field, so they pack a
    # zero exponent instead (no result changes), keeping the word inside the width ``pack`` claims
    expf = B.ite(overflow, 0, expf)
    finite = pack(B, fmt, neg, expf, B.fit(frac, frac_bits + 1), pad)
    sign_bit = 1 << (fmt.exp_bits + fmt.frac_bits + fmt.pad_bits)
    if not fmt.has_negative_zero:  # fnuz: a zero of either sign is +0 (the pattern of -0 is NaN)
        finite = B.ite(B.eq(finite, sign_bit), 0, finite)
    top_frac = (1 << frac_bits) - 1
    if fmt.specials == "fn" and frac_bits == fmt.frac_bits:
        top_frac -= 1  # S.1111.111 is NaN: the largest finite is S.1111.110
    max_bits = fmt.pack_fields(0, fmt.emax + fmt.bias, top_frac << pad)
    if fmt.has_inf:
        inf_bits = fmt.pack_fields(0, (1 << fmt.exp_bits) - 1, 0)
    elif fmt.has_nan:  # no infinity: an overflow to "inf" is NaN (as apply_flags saturates inf to NaN)
        inf_bits = fmt.nan_pattern()
    else:  # OCP fp4/fp6: neither inf nor NaN; an overflow saturates to the largest finite
        inf_bits = max_bits
    big = B.fit(B.ite(to_inf, inf_bits, max_bits), fmt.storage_bits + 1)
    if fmt.specials == "fnuz":  # NaN 0x80 carries no further sign
        big = B.ite(B.and_(neg, B.ne(big, inf_bits)), B.add(big, sign_bit), big)
    else:
        big = B.ite(neg, B.add(big, sign_bit), big)
    return B.ite(overflow, big, finite)


def pack(B: Backend, fmt: Format, neg: V, expf: V, frac: V, frac_shift: int) -> V:
    """Assemble a bit pattern from sign, exponent field and (shifted) fraction."""
    fb = fmt.frac_bits
    wide = fmt.storage_bits + 1
    word = B.add(B.mul_const(B.fit(expf, wide), 1 << fb), B.mul_const(B.fit(frac, wide), 1 << frac_shift))
    word = B.add(word, B.ite(neg, 1 << (fmt.exp_bits + fb), 0))
    if fmt.pad_bits:
        word = B.mul_const(word, 1 << fmt.pad_bits)
    return B.fit(word, fmt.storage_bits + 1)


def apply_flags(B: Backend, fmt: Format, flags: Flags, bits: V) -> V:
    """Replace a finite result by NaN / +inf / -inf where the flags say so."""
    if not fmt.has_nan:
        # OCP fp4/fp6 hold neither inf nor NaN (MX v1.0 section 5.3.3): an infinity saturates to the
        # largest finite of its sign; a NaN has no pattern and keeps the finite part (a zero): the
        # value readers refuse NaN for these formats, and no model rounds a result into them
        top = fmt.pack_fields(0, (1 << fmt.exp_bits) - 1, (1 << fmt.frac_bits) - 1)
        sign_bit = 1 << (fmt.exp_bits + fmt.frac_bits)
        out = B.ite(flags.ninf, top + sign_bit, B.fit(bits, fmt.storage_bits + 1))
        return B.ite(flags.pinf, top, out)
    nan_bits = fmt.nan_pattern()
    if fmt.specials == "ieee":
        pinf, ninf = fmt.inf_pattern(False), fmt.inf_pattern(True)
    else:  # no infinities: saturate to NaN
        pinf = ninf = nan_bits
    out = B.ite(flags.ninf, ninf, B.fit(bits, fmt.storage_bits + 1))
    out = B.ite(flags.pinf, pinf, out)
    return B.ite(flags.nan, nan_bits, out)


def sum_and_round(B: Backend, terms: Sequence[Term], F: int | None, p: ModelParams, fmt: Format,
                  frac_bits: int, mode: str) -> V:
    """Block sum of ``terms`` rounded into ``fmt`` (finite part; zero-sign rules applied)."""
    return _round_sum(B, p, block_sum(B, terms, F, p), fmt, frac_bits, mode)


def _round_sum(B: Backend, p: ModelParams, s: BlockSum, fmt: Format, frac_bits: int, mode: str) -> V:
    """A block sum rounded into ``fmt`` with the model's zero-sign and overflow rules."""
    cancel_sign = B.true() if mode == "rd" else B.false()
    zero_sign = B.ite(s.any_nonzero, cancel_sign, s.all_negative)
    neg = B.ite(B.eq(s.mag, 0), zero_sign, s.neg)
    bits = round_to(B, neg, s.mag, s.lsb, s.mag_bits, fmt, frac_bits, mode, p.subnormal_out,
                    p.overflow_result == "inf")
    if p.zero_sign == "positive":  # a non-zero sum that rounds to zero gives +0
        underflow = B.and_(B.ne(s.mag, 0), B.eq(B.mod_pow2(bits, fmt.storage_bits - 1), 0))
        bits = B.ite(underflow, 0, bits)
    elif p.zero_sign == "plus":  # every zero result is +0
        bits = B.ite(B.eq(B.mod_pow2(bits, fmt.storage_bits - 1), 0), 0, bits)
    elif p.zero_sign == "exact_plus":  # an exact zero sum is +0; one that rounds to zero keeps its sign
        bits = B.ite(B.eq(s.mag, 0), 0, bits)
    return bits


def _sum_as_term(B: Backend, s: BlockSum, F: int, terms: Sequence[Term]) -> Term:
    """A window sum of ``terms`` (its E = s.lsb + F) as an addend whose exponent is that E, also where the
    sum cancelled to zero (it joins the next alignment as the exponent of its largest product)."""
    lo = min(t.top_min for t in terms) - 1  # the block's sentinel E when every term is zero
    hi = max(t.top_max for t in terms)
    return Term(s.neg, s.mag, s.lsb, B.add(s.lsb, F), s.mag_bits, lo - F, hi - F, lo, hi, F,
                max(1, s.mag_bits - F), zero_joins=True)


def _after_sum_exponent(B: Backend, s_term: Term, c_term: Term) -> V:
    """M of an "after_sum" block: the larger of the products' sum exponent and C's (C where it joins: non-zero,
    or a zero that joins at the zero exponent)."""
    c_top = c_term.top if c_term.zero_joins else B.ite(B.ne(c_term.mag, 0), c_term.top, s_term.top_min)
    return B.max(s_term.top, c_top)


def block_grids(B: Backend, p: ModelParams, pterms: Sequence[Term], c_term: Term) -> list[V] | None:
    """The exponents of the grids a window block aligns its addends to, one per alignment, coarsest of the level:
    for c_mode "aligned" [E - F]; for "after_sum" with one product group and no ``c_drop`` [E_p - F, M - min(F,
    sum_frac_bits)] (the products at their E_p, then their sum at M with sum_frac_bits and C at M with F).  Each
    addend is aligned by its value and the grid alone (:func:`_align_term`), so two blocks with the same
    addend values, the same alignment modes and the same grids align alike, and an addend on a grid at most its
    own is placed exactly.  None for any other block (pairwise, C after the block, several product groups, no
    window)."""
    F = p.window_frac_bits
    if F is None or p.reduction != "chain":
        return None
    if p.c_mode == "aligned":
        return [B.sub(block_exponent(B, [*pterms, c_term], F, p), F)]
    if p.c_mode != "after_sum" or p.product_groups != 1 or p.c_drop is not None:
        return None
    s_term = _sum_as_term(B, block_sum(B, pterms, F, p), F, pterms)
    return [B.sub(s_term.top, F), B.sub(_after_sum_exponent(B, s_term, c_term), min(F, p.sum_frac_bits))]


def after_sum_block(B: Backend, p: ModelParams, pterms: Sequence[Term], c_term: Term, F: int, fmt: Format) -> V:
    """c_mode "after_sum" (see :class:`ModelParams`): the products' window sum (in ``product_groups``
    interleaved subsets, realigned by ``late_align``), then S and C aligned again to M = max(E_S, e(C)) with
    ``sum_frac_bits`` and F fraction bits, C dropped below M - ``c_drop``, the exact sum rounded once."""
    late = dataclasses.replace(p, align=p.late_align, align_floor=None, carry_bits="unbounded")
    g = p.product_groups
    subsets = [list(pterms[j::g]) for j in range(g)] if g > 1 and len(pterms) > 1 else [list(pterms)]
    parts = [(block_sum(B, sub, F, p), sub) for sub in subsets]
    if len(parts) > 1:
        sub_terms = [_sum_as_term(B, sp, F, sub) for sp, sub in parts]
        S = block_sum(B, sub_terms, F, late)
        s_term = _sum_as_term(B, S, F, sub_terms)
    else:
        s_term = _sum_as_term(B, parts[0][0], F, parts[0][1])
    F2 = p.sum_frac_bits
    c_joins = c_term.zero_joins
    c_top = c_term.top if c_joins else B.ite(B.ne(c_term.mag, 0), c_term.top, s_term.top_min)
    M = _after_sum_exponent(B, s_term, c_term)
    s_mag = _align_term(B, s_term, B.sub(M, F2), F2, p.late_align)
    c_mag = B.mul_const(_align_term(B, c_term, B.sub(M, F), F, p.late_align), 1 << (F2 - F))
    if p.c_drop is not None:
        c_mag = B.ite(B.lt(c_top, B.sub(M, p.c_drop)), 0, c_mag)
    width = max(s_term.mag_bits + F2 - F, F2 + 2) + 2
    vals = [B.fit(B.ite(neg, B.neg(m), m), width + 1) for neg, m in ((s_term.neg, s_mag), (c_term.neg, c_mag))]
    total = B.fit(B.add(vals[0], vals[1]), width + 1)
    neg = B.lt(total, 0)
    mag = B.fit(B.ite(neg, B.neg(total), total), width + 1)
    any_nz = _tree(B, [B.ne(t.mag, 0) for t in [*pterms, c_term]], B.or_)
    all_neg = _tree(B, [t.neg for t in [*pterms, c_term]], B.and_)
    s = BlockSum(neg, mag, B.sub(M, F2), width, any_nz, all_neg)
    return _round_sum(B, p, s, fmt, p.block_frac_bits, p.block_round)


# --------------------------------------------------------------- block FMA
def block_products(B: Backend, p: ModelParams, a_bits: Sequence[V], b_bits: Sequence[V]) -> list[tuple[Term, Flags]]:
    """A block's exact products as addends, with their flags (operands first converted to ``operand_fmt`` where the
    model has one): the first step of :func:`block_terms`."""
    fin = get_format(p.in_fmt)
    fbin = get_format(p.b_fmt) if p.b_fmt else fin  # B's format (mixed paths)
    precision, precision_b = fin.frac_bits, fbin.frac_bits
    if p.operand_fmt:  # exact conversion of the operands first (e.g. fp8 -> fp16)
        fop = get_format(p.operand_fmt)
        a_bits = [convert(B, a, fin, fop, "rne") for a in a_bits]
        b_bits = [convert(B, b, fbin, fop, "rne") for b in b_bits]
        fin = fbin = fop
    return [product_term(B, p, decode(B, fin, a, p.subnormal_in), decode(B, fbin, b, p.subnormal_in),
                         precision=min(precision, fin.frac_bits), precision_b=min(precision_b, fbin.frac_bits))
            for a, b in zip(a_bits, b_bits)]


def block_terms(B: Backend, p: ModelParams, a_bits: Sequence[V], b_bits: Sequence[V], c_bits: V,
                c_fmt: Format, sa_bits: Sequence[V] = (), sb_bits: Sequence[V] = ()) -> tuple[list[Term], Term, Flags]:
    """A block's addends: the exact products (:func:`block_products`; on a block-scaled path multiplied by their
    scales, :func:`scaled_terms`, with ``sa_bits``/``sb_bits`` the scale pattern of each product) and C, with the
    special-value flags of all of them."""
    return block_addends(B, p, block_products(B, p, a_bits, b_bits), c_bits, c_fmt, sa_bits, sb_bits)


def block_addends(B: Backend, p: ModelParams, prods: Sequence[tuple[Term, Flags]], c_bits: V, c_fmt: Format,
                  sa_bits: Sequence[V] = (), sb_bits: Sequence[V] = ()) -> tuple[list[Term], Term, Flags]:
    """:func:`block_terms` from the block's product terms (as :func:`block_products` gives them)."""
    fin = get_format(p.in_fmt)
    fbin = get_format(p.b_fmt) if p.b_fmt else fin
    if p.operand_fmt:
        fin = fbin = get_format(p.operand_fmt)
    c_term, c_flags = value_term(B, decode(B, c_fmt, c_bits, p.subnormal_c))
    if isinstance(c_bits, int) and c_bits == 0:  # the +0 an after_instr chain starts from
        c_term = dataclasses.replace(c_term, known_zero=True)
    if p.zero_exponent is not None:  # a zero C has exponent zero_exponent and joins the alignment
        z = p.zero_exponent
        c_term = _zero_top(B, c_term, z, z, z)
    if p.scale_fmt:
        terms, flags = scaled_terms(B, p, prods, sa_bits, sb_bits, fin, fbin)
        return terms, c_term, merge_flags(B, [*flags, c_flags])
    merged = merge_flags(B, [fl for _, fl in prods] + [c_flags])
    if p.product_inf is not None:
        merged = _product_overflow(B, p.product_inf, [t for t, _ in prods], merged)
    return [t for t, _ in prods], c_term, merged


def _product_overflow(B: Backend, T: int, prods: Sequence[Term], flags: Flags) -> Flags:
    """``ModelParams.product_inf``: where no input is NaN or infinite (``flags`` clear), a product of
    magnitude >= 2^T (its leading bit, lsb + msb(mag), at T or above) is an infinity of its sign; both
    signs give NaN.  (MMA-Sim's CDNA3 group returns that before it sums anything.)"""
    pos, neg = B.false(), B.false()
    for t in prods:
        if t.lsb_max + t.mag_bits - 1 < T:  # statically below 2^T
            continue
        over = B.and_(B.ne(t.mag, 0), B.ge(B.add(t.lsb, B.msb(t.mag, t.mag_bits)), T))
        pos, neg = B.or_(pos, B.and_(over, B.not_(t.neg))), B.or_(neg, B.and_(over, t.neg))
    finite = B.not_(B.or_(flags.nan, B.or_(flags.pinf, flags.ninf)))
    pos, neg = B.and_(finite, pos), B.and_(finite, neg)
    return Flags(B.or_(flags.nan, B.and_(pos, neg)), B.or_(flags.pinf, pos), B.or_(flags.ninf, neg))


# ------------------------------------------------------------ block scaling
def _zero_scale(B: Backend, s: Decoded) -> V:
    """A scale that is zero (ue4m3 0x00; ue8m0 has no zero)."""
    return B.and_(B.eq(s.sig, 0), B.not_(s.nan))


def _scale_flags(B: Backend, fl: Flags, sa: Decoded, sb: Decoded) -> Flags:
    """A scaled addend's flags: a NaN scale makes NaN (MMA-Sim: NaN in a scale gives NaN); an infinite
    addend times a zero scale (ue4m3 0x00) is NaN, as inf * 0."""
    nan = B.or_(fl.nan, B.or_(sa.nan, sb.nan))
    zero = B.or_(_zero_scale(B, sa), _zero_scale(B, sb))
    nan = B.or_(nan, B.and_(B.or_(fl.pinf, fl.ninf), zero))
    return Flags(nan, B.and_(fl.pinf, B.not_(nan)), B.and_(fl.ninf, B.not_(nan)))


def _scaled(B: Backend, p: ModelParams, t: Term, sa: Decoded, sb: Decoded, raw_top: V, raw_range: tuple[int, int],
            raw_gap: int, raw_head: int, raw_peak: Fraction | None, zero_joins: bool = False,
            join_if: V | None = None) -> Term:
    """``t`` (an exact product or an exact group sum) multiplied exactly by the scales ``sa`` and ``sb``.

    Magnitude ``t.mag * sig(sa) * sig(sb)`` (ue8m0 significands are 1: no multiplication), LSB weight
    ``2^(t.lsb + e(sa) + e(sb) - 2 fs)``.  Alignment exponent: ``raw_top`` (built by the caller from the
    scales' exponents) with ``product_exponent = "raw"``, the leading bit's with "normalized".
    ``zero_joins`` (or ``t.zero_joins``: a product under ``zero_exponent``, whose zero exponent
    z + e(other factor) is in ``t.top``): the term's alignment exponent joins E even where its
    magnitude is 0; such a zero product's exponent is ``t.top + e(sa) + e(sb)`` under either
    ``product_exponent`` (a zero scale's e as :func:`_scale_exp` says).  ``join_if``: see :class:`Term`.
    """
    fs = sa.fmt.frac_bits
    smin, smax = sa.fmt.emin, sa.fmt.emax
    mag, mag_bits = t.mag, t.mag_bits
    if fs:
        mag = B.mul(B.mul(mag, sa.sig, mag_bits + fs + 1), sb.sig, mag_bits + 2 * fs + 2)
        mag_bits += 2 * fs + 2
    lsb = B.add(t.lsb, B.sub(B.add(sa.e, sb.e), 2 * fs))
    lsb_min, lsb_max = t.lsb_min + 2 * (smin - fs), t.lsb_max + 2 * (smax - fs)
    joins = zero_joins or t.zero_joins
    if p.product_exponent == "raw":
        return Term(t.neg, mag, lsb, raw_top, mag_bits, lsb_min, lsb_max, raw_range[0], raw_range[1], raw_gap,
                    raw_head, peak=raw_peak, zero_joins=joins, join_if=join_if)
    top = B.add(lsb, B.msb(mag, mag_bits))
    top_min, top_max = lsb_min, lsb_max + mag_bits
    if t.zero_joins:  # a zero product keeps its zero exponent (plus the scales', :func:`_scale_exp`)
        top = B.ite(B.eq(t.mag, 0), B.add(t.top, B.add(_scale_exp(B, p, sa), _scale_exp(B, p, sb))), top)
        lo, hi = _scale_exp_range(p, sa.fmt)
        top_min, top_max = min(top_min, t.top_min + 2 * lo), max(top_max, t.top_max + 2 * hi)
    return Term(t.neg, mag, lsb, top, mag_bits, lsb_min, lsb_max, top_min, top_max, 0, 1, zero_joins=joins,
                join_if=join_if)


def _scale_exp(B: Backend, p: ModelParams, s: Decoded) -> V:
    """A scale's exponent in an addend's alignment exponent: its own, except that under ``zero_exponent = z``
    a zero scale (ue4m3 0x00) has exponent z, as every other zero (MMA-Sim gives every zero the exponent
    -126, mmasim/simulator/arithmetic.py L93-94).  The addend's magnitude is 0 either way."""
    if p.zero_exponent is None:
        return s.e
    return B.ite(B.eq(s.sig, 0), p.zero_exponent, s.e)


def _scale_exp_range(p: ModelParams, fs: Format) -> tuple[int, int]:
    """The range of :func:`_scale_exp` over the scale format ``fs``."""
    if p.zero_exponent is None:
        return fs.emin, fs.emax
    return min(fs.emin, p.zero_exponent), max(fs.emax, p.zero_exponent)


def _head(peak: Fraction) -> int:
    """The least h with peak < 2^h."""
    h = max(0, peak.numerator.bit_length() - peak.denominator.bit_length())
    while Fraction(1 << h) <= peak:
        h += 1
    while h > 0 and Fraction(1 << (h - 1)) > peak:
        h -= 1
    return h


def scaled_terms(B: Backend, p: ModelParams, prods: Sequence[tuple[Term, Flags]], sa_bits: Sequence[V],
                 sb_bits: Sequence[V], fa: Format, fb: Format) -> tuple[list[Term], list[Flags]]:
    """A block-scaled block's addends (``p.scale_fmt`` set): ``prods`` are the block's exact products in
    k order, ``sa_bits[i]``/``sb_bits[i]`` the scale patterns of product i's block.

    ``scale_apply = "products"``: each product times its two scales (alignment exponent
    e(a)+e(b)+e(sa)+e(sb), raw).  ``"groups"``: each run of ``scale_group_k`` products (inside one
    scale block) summed exactly first (then truncated toward zero to ``scale_group_bits`` leading bits
    where that is a number); the group sum times the two scales is one addend whose raw
    alignment exponent is e(sa)+e(sb) (MMA-Sim's mxf4nvf4: the group's value is its significand);
    with ``scale_zero_group = "aligns"`` that exponent joins E even when the group sum is 0, unless a scale
    is zero (a zero operand: it joins only under ``zero_exponent``, at z + e(other scale)); with
    ``"aligns_emin"`` a zero scale joins too, with its field's exponent, the scale format's emin.
    """
    fs = get_format(p.scale_fmt)
    sig_peak = (2 - Fraction(1, 1 << fs.frac_bits)) ** 2
    terms: list[Term] = []
    flags: list[Flags] = []
    if p.scale_apply == "products":
        for (t, fl), sa_b, sb_b in zip(prods, sa_bits, sb_bits):
            sa, sb = decode(B, fs, sa_b), decode(B, fs, sb_b)
            raw_top = B.add(t.top, B.add(_scale_exp(B, p, sa), _scale_exp(B, p, sb)))
            lo, hi = _scale_exp_range(p, fs)
            peak = t.peak * sig_peak if t.peak is not None else None
            terms.append(_scaled(B, p, t, sa, sb, raw_top, (t.top_min + 2 * lo, t.top_max + 2 * hi),
                                 t.gap_min + 2 * fs.frac_bits, t.head + (2 if fs.frac_bits else 0), peak))
            flags.append(_scale_flags(B, fl, sa, sb))
        return terms, flags
    gk = p.scale_group_k
    for g in range(0, len(prods), gk):
        grp = list(prods[g:g + gk])
        gsum = block_sum(B, [t for t, _ in grp], None, p)  # exact: F = None keeps every bit
        L = min(t.lsb_min for t, _ in grp)
        gmag = gsum.mag
        if p.scale_group_bits != "exact" and int(p.scale_group_bits) < gsum.mag_bits:
            # keep the n leading bits of the exact sum (truncation toward zero)
            n = int(p.scale_group_bits)
            cut = B.max(B.sub(B.msb(gmag, gsum.mag_bits), n - 1), 0)
            gmag = B.shl(B.shr(gmag, cut), cut, gsum.mag_bits - n, gsum.mag_bits)
        gterm = Term(gsum.neg, gmag, gsum.lsb, gsum.lsb, gsum.mag_bits, L, L, L, L, 0, 0)
        sa, sb = decode(B, fs, sa_bits[g]), decode(B, fs, sb_bits[g])
        # |group sum| <= len * max|a| * max|b|: the bound of the group's significand
        v_max = len(grp) * fa.max_finite * fb.max_finite
        peak = v_max * sig_peak
        raw_top = B.add(_scale_exp(B, p, sa), _scale_exp(B, p, sb))
        lo, hi = _scale_exp_range(p, fs)
        joins, join_if = p.scale_zero_group in ("aligns", "aligns_emin"), None
        if p.scale_zero_group == "aligns" and p.zero_exponent is None and fs.has_subnormals:
            joins, join_if = False, B.not_(B.or_(_zero_scale(B, sa), _zero_scale(B, sb)))  # a zero scale: left out
        term = _scaled(B, p, gterm, sa, sb, raw_top, (2 * lo, 2 * hi), 2 * fs.frac_bits - L, _head(peak),
                       peak, zero_joins=joins, join_if=join_if)
        terms.append(term)
        flags.append(_scale_flags(B, merge_flags(B, [fl for _, fl in grp]), sa, sb))
    return terms, flags


def first_block_cut(B: Backend, p: ModelParams, a_bits: Sequence[V], b_bits: Sequence[V], c_bits: V) -> V | None:
    """The exponent of the last bit the first block's window keeps, ``E - F`` (:func:`block_sum`), or
    None where the model keeps every bit (no window) or rounds each addition (pairwise).

    The first block holds the products of ``groups(K, p)[0][0]`` and, unless the model adds C after
    the products (``c_mode`` "after"; with "after_instr" the first block's C is +0), the call's C:
    exactly what :func:`dot` aligns first.  For explanations (the bit diagram of ``tcsmt discriminate``).
    """
    F = p.window_frac_bits
    if F is None or p.reduction != "chain" or p.scale_fmt:  # (no diagram of scaled blocks yet)
        return None
    ks = groups(len(a_bits), p)[0][0]
    pterms, c_term, _ = block_terms(B, p, [a_bits[k] for k in ks], [b_bits[k] for k in ks], c_bits,
                                    get_format(p.c_fmt))
    with_c = p.c_mode == "aligned"
    return block_sum(B, [*pterms, c_term] if with_c else pterms, F, p).lsb


def block_fma(B: Backend, p: ModelParams, a_bits: Sequence[V], b_bits: Sequence[V], c_bits: V, c_fmt: Format,
              sa_bits: Sequence[V] = (), sb_bits: Sequence[V] = ()) -> V:
    """One block FMA: the products of ``a_bits``/``b_bits`` (scaled by ``sa_bits``/``sb_bits`` on a
    block-scaled path) plus C, in acc_fmt bits."""
    acc = get_format(p.acc_fmt)
    pterms, c_term, flags = block_terms(B, p, a_bits, b_bits, c_bits, c_fmt, sa_bits, sb_bits)
    F = p.window_frac_bits
    if p.reduction == "pairwise":
        # every partial is rounded into acc; one that overflows there is an infinity, which
        # stays one (or meets the opposite one: NaN) through the rest of the tree, as in IEEE
        # arithmetic: its flags join the block's before its bits are read back as an addend
        partial_flags: list[Flags] = []

        def addend(bits: V) -> Term:
            t, fl = value_term(B, decode(B, acc, bits))
            partial_flags.append(fl)
            return t

        parts = [sum_and_round(B, [t], None, p, acc, acc.frac_bits, "rne") for t in pterms]
        while len(parts) > 1:
            nxt = []
            for i in range(0, len(parts) - 1, 2):
                nxt.append(sum_and_round(B, [addend(parts[i]), addend(parts[i + 1])], None, p, acc, acc.frac_bits, "rne"))
            if len(parts) % 2:
                nxt.append(parts[-1])
            parts = nxt
        psum = addend(parts[0])
        flags = merge_flags(B, [flags, *partial_flags])
        bits = sum_and_round(B, [psum, c_term], None, p, acc, acc.frac_bits, p.c_round)
    elif p.c_mode in ("aligned", "after_instr"):
        bits = sum_and_round(B, [*pterms, c_term], F, p, acc, p.block_frac_bits, p.block_round)
    elif p.c_mode == "after_sum" and F is not None:
        bits = after_sum_block(B, p, pterms, c_term, F, acc)
    else:  # products alone, then one correctly rounded addition of C
        part = sum_and_round(B, pterms, F, p, acc, p.block_frac_bits, p.block_round)
        part_term, part_flags = value_term(B, decode(B, acc, part))
        flags = merge_flags(B, [flags, part_flags])
        bits = sum_and_round(B, [part_term, c_term], None, p, acc, acc.frac_bits, p.c_round)
    return apply_flags(B, acc, flags, bits)


@dataclass(frozen=True)
class Alignment:
    """One alignment step of a block FMA: ``addends`` addends placed on one grid 2^L with
    L <= T - ``frac_bits``, where T is the block's reference exponent (the largest alignment exponent of
    its non-zero inputs, or :attr:`BlockShape.extra_top`); each addend loses what lies below the grid
    by ``mode`` (:func:`_align_term`): less than 2^L ("trunc", "floor"), at most 2^(L - 1) ("rne")."""

    addends: int
    frac_bits: int
    mode: str
    products_only: bool = False
    """the level's reference exponent is the largest of the products' (or the alignment floor, a zero product's
    z + e(other factor)), not C's: c_mode "after_sum" sums its products apart from C"""
    holds_c: bool = True
    """C is one of the level's addends"""


@dataclass(frozen=True)
class BlockShape:
    """The error structure of one block FMA, read off :func:`block_fma` (a static fact for composed
    error bounds, ``tcsmt.verify.proof``).

    D = round(sum of the aligned addends): every alignment of :attr:`alignments` (each addend of each
    level once; a level's sum enters the next level as one addend, exactly), no carry bit binds (checked
    here), then one rounding into the accumulator format with ``round_frac_bits`` fraction bits,
    ``round_mode`` and subnormal results kept or flushed (``keep_subnormals``).  Hence, with X the exact
    sum of the block's inputs as the model reads them and T their reference exponent,
    |D - X| <= (1 + u) * lambda * 2^T + u |X| + a, where lambda = sum over alignments of
    addends * 2^-frac_bits (halved for "rne"), and u, a are the rounding's relative and absolute error.
    T is at most the largest alignment exponent of the non-zero inputs, ``extra_top`` (the alignment
    floor, a zero C's joining exponent ``zero_exponent``, or a subnormal C's emin), or a zero product's
    z + e(other factor) (2z for two zero factors), z = ``zero_product``.

    Where the carry bits can bind (``carry_cap`` set: the aligned sum's magnitude is kept below 2^carry_cap
    units of 2^(E - F), wrapped or saturated), the sum S loses ``lost`` >= 0 units first, and only when
    |S| >= 2^carry_cap.  |S| is at most the aligned magnitudes of C (at most ``c_units``) and of the products
    (at most ``p_units`` together), so a loss needs the products' aligned magnitudes to reach 2^carry_cap -
    c_units, and (one wrap per 2^carry_cap, or saturation) lost <= w * (products' aligned magnitudes) with
    w = 2^carry_cap / (2^carry_cap - c_units); with C = +0 nothing is lost where p_units < 2^carry_cap.
    """

    alignments: tuple[Alignment, ...]
    round_frac_bits: int
    round_mode: str
    keep_subnormals: bool
    extra_top: int
    zero_product: int | None
    carry_cap: int | None = None
    c_units: Fraction = Fraction(0)
    p_units: Fraction = Fraction(0)


def block_shape(p: ModelParams, pterms: Sequence[Term], c_term: Term) -> BlockShape:
    """:class:`BlockShape` of one block FMA of ``p`` on these addends (their static facts only: build them
    with :func:`block_terms` on any back end).  TcsmtError where the block is not a single rounding of
    aligned sums (pairwise reduction, C added after the products, block scales, operand conversion,
    normalized product exponents, C dropped below the sum, a carry bit that can bind in a block that sums its
    products apart from C)."""
    why = None
    if p.reduction != "chain":
        why = f"reduction {p.reduction} rounds every partial sum"
    elif p.c_mode in ("after", "after_instr") or (p.c_mode == "after_sum" and p.window_frac_bits is None):
        why = f"c_mode {p.c_mode} rounds twice"
    elif p.scale_fmt or p.operand_fmt:
        why = "block scales or operand conversion"
    elif p.product_exponent != "raw":
        why = f"product_exponent {p.product_exponent}"
    elif p.c_drop is not None:
        why = "c_drop"
    if why is not None:
        raise TcsmtError(f"no block error shape for {p.name}: {why} (not a single rounding of aligned sums)")
    F = p.window_frac_bits
    c_fmt = get_format(p.c_fmt)
    extra = c_fmt.emin  # a subnormal C aligns at emin
    if p.align_floor is not None and F is not None:
        extra = max(extra, p.align_floor)
    if p.zero_exponent is not None:  # a zero C joins at z (a zero product at z + e(other factor): zero_product)
        extra = max(extra, p.zero_exponent)
    if F is None:
        aligns: tuple[Alignment, ...] = ()
    else:
        g = p.product_groups if p.c_mode == "after_sum" else 1
        subsets = [list(pterms[j::g]) for j in range(g)] if g > 1 and len(pterms) > 1 else [list(pterms)]
        if p.c_mode == "aligned":
            subsets = [[*pterms, c_term]]
        cap = None
        for sub in subsets:
            if p.carry_bits != "unbounded":
                width = max(t.head for t in sub) + F + 1
                if F + 1 + int(p.carry_bits) < _sum_bits(sub, F, p, width):
                    if p.c_mode != "aligned":
                        raise TcsmtError(f"no block error shape for {p.name}: its {p.carry_bits} carry bits can "
                                         f"bind with {len(sub)} addends")
                    cap = F + 1 + int(p.carry_bits)
        after = p.c_mode == "after_sum"
        aligns = (Alignment(sum(len(s) for s in subsets), F, p.align, after, not after),)
        if after:
            if len(subsets) > 1:
                aligns += (Alignment(len(subsets), F, p.late_align, True, False),)
            aligns += (Alignment(1, p.sum_frac_bits, p.late_align, False, False), Alignment(1, F, p.late_align))
    if F is None or cap is None:
        return BlockShape(aligns, p.block_frac_bits, p.block_round, p.subnormal_out, extra, p.zero_exponent)

    def units(t: Term) -> Fraction:  # |aligned t| <= peak 2^F, one more unit where the alignment rounds up
        return (t.peak if t.peak is not None else Fraction(1 << t.head)) * (1 << F) + (0 if p.align == "trunc" else 1)

    c_units, p_units = units(c_term), sum((units(t) for t in pterms), Fraction(0))
    if c_units >= 1 << cap:
        raise TcsmtError(f"no block error shape for {p.name}: C alone can reach its {p.carry_bits} carry bits")
    return BlockShape(aligns, p.block_frac_bits, p.block_round, p.subnormal_out, extra, p.zero_exponent, cap,
                      c_units, p_units)


def unread_parameters(p: ModelParams) -> dict[str, Any]:
    """The parameters this module never reads for ``p``'s configuration, each with the value that
    stands for "unused" (models that differ only in these compute the same function).

    Read off the code above: with ``extra_bits = "exact"`` (F = None) :func:`block_sum` uses no
    alignment (align, align_floor), no carry bits (nor overflow) and no products' alignment exponent;
    with unbounded carry bits the overflow mode is unused; ``c_round`` is read only when C is added
    after the block or in pairwise reduction; ``out_round`` only when the output format differs from
    the accumulator's; pairwise reduction reads none of the block window parameters; the block
    interleave is unused with one block per instruction, or with runs of a whole block.
    """
    ch: dict[str, Any] = {}
    if p.reduction == "pairwise":
        ch.update(extra_bits="exact", block_round="rne", c_mode="aligned",
                  block_frac_bits=get_format(p.acc_fmt).frac_bits)
    elif p.c_mode in ("aligned", "after_sum"):
        ch["c_round"] = "rne"
    if p.c_mode != "after_sum":
        ch.update(product_groups=1, sum_frac_bits=0, late_align="floor", c_drop=None)
    if ch.get("extra_bits", p.extra_bits) == "exact":
        ch.update(align="trunc", align_floor=None, carry_bits="unbounded", overflow="wrap", product_exponent="raw",
                  zero_exponent=None)
    elif p.carry_bits == "unbounded":
        ch["overflow"] = "wrap"
    if p.out_fmt == p.acc_fmt:
        ch["out_round"] = "rne"
    if not p.scale_fmt:
        ch.update(scale_apply="products", scale_group_k=0, scale_zero_group="skipped", scale_group_bits="exact")
    elif p.scale_apply == "products":
        ch.update(scale_group_k=0, scale_zero_group="skipped", scale_group_bits="exact")
    nblocks = (p.instr_k // p.block_k) if p.block_k and p.instr_k else 1
    if p.block_interleave and (nblocks <= 1 or p.block_interleave == p.block_k):
        ch["block_interleave"] = 0  # one block, or runs of a whole block: the contiguous blocks
    return ch


def convert(B: Backend, bits: V, src: Format, dst: Format, mode: str, keep_subnormals: bool = True) -> V:
    """Convert patterns from ``src`` to ``dst`` with rounding ``mode`` (exact when it fits)."""
    if src == dst:
        return bits
    d = decode(B, src, bits)
    t, fl = value_term(B, d)
    out = round_to(B, t.neg, t.mag, t.lsb, t.mag_bits, dst, dst.frac_bits, mode, keep_subnormals)
    return apply_flags(B, dst, fl, out)


def round_through(B: Backend, bits: V, wide: Format, narrow: Format, mode: str) -> V:
    """Patterns of ``wide`` rounded to ``narrow`` with ``mode`` and converted back to ``wide`` exactly (a value
    stored in the narrower format and loaded again: the kept bits are ``narrow``'s significand, the rest rounded
    away once; specials keep their kind).  ``narrow`` must fit in ``wide`` (every value of it exact there)."""
    return convert(B, convert(B, bits, wide, narrow, mode), narrow, wide, mode)


def groups(K: int, p: ModelParams) -> list[list[list[int]]]:
    """Instructions, each a list of blocks, each the list of k indices it sums (in k order)."""
    instr_k = p.instr_k or max(K, 1)  # 0: one "instruction" of all K (library chains)
    block_k = p.block_k or instr_k
    out = []
    for i0 in range(0, max(K, 1), instr_k):
        i1 = min(K, i0 + instr_k)
        ks = list(range(i0, i1))
        nblocks = max(1, -(-len(ks) // block_k))
        if p.block_interleave and nblocks > 1:
            n = p.block_interleave
            blocks = [[k for k in ks if ((k - i0) // n) % nblocks == j] for j in range(nblocks)]
            blocks = [blk for blk in blocks if blk] or [[]]
        else:
            blocks = [ks[j:j + block_k] for j in range(0, len(ks), block_k)] or [[]]
        out.append(blocks)
    return out


def add_rounded(B: Backend, p: ModelParams, x_bits: V, x_fmt: Format, y_bits: V, y_fmt: Format, fmt: Format, mode: str) -> V:
    """x + y computed exactly and rounded once into ``fmt`` with ``mode`` (IEEE-like specials)."""
    x_term, x_flags = value_term(B, decode(B, x_fmt, x_bits))
    y_term, y_flags = value_term(B, decode(B, y_fmt, y_bits, p.subnormal_c))
    bits = sum_and_round(B, [x_term, y_term], None, p, fmt, fmt.frac_bits, mode)
    return apply_flags(B, fmt, merge_flags(B, [x_flags, y_flags]), bits)


def dot(B: Backend, p: ModelParams, a_bits: Sequence[V], b_bits: Sequence[V], c_bits: V,
        sa_bits: Sequence[V] = (), sb_bits: Sequence[V] = (), progress: Callable[[int], None] | None = None) -> V:
    """D = sum_k a_k b_k + c as the model computes it, in out_fmt bits.

    On a block-scaled path (``p.scale_fmt``) ``sa_bits``/``sb_bits`` hold one scale pattern per
    ``scale_block`` products (K / scale_block each; the caller checks the count): product k is
    scaled by ``sa_bits[k // scale_block]`` and ``sb_bits[k // scale_block]`` (:func:`scaled_terms`).

    The products are consumed instruction by instruction (``instr_k``
    products each), and inside an instruction block by block (``block_k``
    products each, contiguous or interleaved: :func:`groups`).  With
    c_mode = "after_instr" each instruction's blocks chain from +0 and its C
    is added at the end (:func:`add_rounded`).  The first block's C is ``c_bits`` in c_fmt;
    each later block takes the previous block's acc_fmt result as C.  After
    each instruction the accumulator is converted to out_fmt (``out_round``).
    A last, shorter block sums only the products it has (K need not be a
    multiple of the block width; padding with zero products of either sign is
    the caller's choice, as on the hardware).

    ``progress`` (no arithmetic) is called after each instruction with the number of products done.
    """
    acc, out = get_format(p.acc_fmt), get_format(p.out_fmt)
    cur, cur_fmt = c_bits, get_format(p.c_fmt)
    done = 0
    for instr in groups(len(a_bits), p):
        if p.c_mode == "after_instr":
            held, held_fmt = cur, cur_fmt
            cur, cur_fmt = 0, acc
        for ks in instr:
            sa = [sa_bits[k // p.scale_block] for k in ks] if p.scale_fmt else []
            sb = [sb_bits[k // p.scale_block] for k in ks] if p.scale_fmt else []
            cur = block_fma(B, p, [a_bits[k] for k in ks], [b_bits[k] for k in ks], cur, cur_fmt, sa, sb)
            cur_fmt = acc
        if p.c_mode == "after_instr":
            cur = add_rounded(B, p, cur, acc, held, held_fmt, acc, p.c_round)
        if out != acc:
            cur = convert(B, cur, acc, out, p.out_round, p.subnormal_out)
            cur_fmt = out
        if progress is not None:
            done += sum(len(ks) for ks in instr)
            progress(done)
    if cur_fmt != out:
        cur = convert(B, cur, cur_fmt, out, p.out_round, p.subnormal_out)
    return cur


# ------------------------------------------------- library GEMM arithmetic
# The steps a library GEMM (cuBLAS split-K reduction, epilogue) performs after the
# matrix units' K-chains: IEEE 754 operations in one format, each computed exactly
# and rounded once.  ``p`` supplies the zero-sign and overflow conventions
# (an IEEE ModelParams: zero_sign = "ieee", overflow_result = "ieee").

def mul_rounded(B: Backend, p: ModelParams, x_bits: V, y_bits: V, fmt: Format, mode: str) -> V:
    """x * y computed exactly and rounded once into ``fmt`` (x, y in ``fmt``; IEEE specials).

    The sign of a zero product is the xor of the signs (IEEE 754 multiplication).
    """
    t, fl = product_term(B, p, decode(B, fmt, x_bits), decode(B, fmt, y_bits))
    bits = sum_and_round(B, [t], None, p, fmt, fmt.frac_bits, mode)
    return apply_flags(B, fmt, merge_flags(B, [fl]), bits)


def fma_rounded(B: Backend, p: ModelParams, x_bits: V, y_bits: V, xy_fmt: Format, z_bits: V, z_fmt: Format,
                fmt: Format, mode: str) -> V:
    """x * y + z computed exactly and rounded once into ``fmt``: one fused multiply-add (FFMA with RNE).

    x and y are patterns of ``xy_fmt``, z of ``z_fmt``.  An exact zero result is
    -0 only when the product and z are both negative zeros (IEEE 754, RNE).
    """
    t, fl = product_term(B, p, decode(B, xy_fmt, x_bits), decode(B, xy_fmt, y_bits))
    zt, zfl = value_term(B, decode(B, z_fmt, z_bits))
    bits = sum_and_round(B, [t, zt], None, p, fmt, fmt.frac_bits, mode)
    return apply_flags(B, fmt, merge_flags(B, [fl, zfl]), bits)


REDUCTIONS = ("fp32_forward", "pairwise", "halving", "out_rounded", "out_chain", "out_chain_acc_add")


def reduce_partials(B: Backend, p: ModelParams, parts: Sequence[V], acc: Format, out: Format, scheme: str) -> tuple[V, Format]:
    """Combine split-K partials (patterns of ``acc``); returns (bits, their format).

    Every addition is exact and rounded once with RNE:

    ``fp32_forward``  r = P0; r = RN_acc(r + P_s) for s = 1, 2, ... (a serial sum in
                      the accumulator format from partial 0, as the fp32 workspace
                      reduction of bitequiv and mmaemu).
    ``pairwise``      a balanced tree: (P0+P1), (P2+P3), ..., an odd last one carried
                      up unchanged, each sum RN_acc.
    ``halving``       a tree that halves the partials (a count that is a power of two): with n
                      partials, P_s = RN_acc(P_s + P_(s+n/2)) for s < n/2, then n/2, ... down
                      to P0 (a shared-memory or xor-shuffle reduction over n threads, as
                      cuBLAS's CUDA-core GEMV kernels combine their threads' sums: lanes whose
                      indices differ first in bit b join at the step of offset 2^b).
    ``out_rounded``   every partial first rounded to ``out`` (RNE), then summed as
                      ``fp32_forward`` in ``acc``.
    ``out_chain``     a serial chain in ``out``: r = RN_out(P0); r = RN_out(r + P_s)
                      (the exact sum of the out-format r and the acc-format P_s).
    ``out_chain_acc_add``  a serial chain kept in ``out`` but added in ``acc``:
                      r = RN_out(P0); r = RN_out(RN_acc(r + P_s)) (two roundings per
                      step: the addition in the accumulator format, then the store).
    One partial is returned unchanged (no addition happens).
    """
    if scheme not in REDUCTIONS:
        raise TcsmtError(f"unknown split-K reduction {scheme!r} (known: {', '.join(REDUCTIONS)})")
    parts = list(parts)
    if len(parts) == 1:
        return parts[0], acc
    if scheme == "out_rounded":
        parts = [convert(B, convert(B, q, acc, out, "rne"), out, acc, "rne") for q in parts]
        scheme = "fp32_forward"
    if scheme == "fp32_forward":
        r = parts[0]
        for q in parts[1:]:
            r = add_rounded(B, p, r, acc, q, acc, acc, "rne")
        return r, acc
    if scheme == "halving":
        if len(parts) & (len(parts) - 1):
            raise TcsmtError(f"the halving reduction needs a power-of-two count of partials, not {len(parts)}")
        while len(parts) > 1:
            h = len(parts) // 2
            parts = [add_rounded(B, p, parts[i], acc, parts[i + h], acc, acc, "rne") for i in range(h)]
        return parts[0], acc
    if scheme == "pairwise":
        while len(parts) > 1:
            nxt = [add_rounded(B, p, parts[i], acc, parts[i + 1], acc, acc, "rne")
                   for i in range(0, len(parts) - 1, 2)]
            if len(parts) % 2:
                nxt.append(parts[-1])
            parts = nxt
        return parts[0], acc
    r = convert(B, parts[0], acc, out, "rne")  # out_chain, out_chain_acc_add
    for q in parts[1:]:
        if scheme == "out_chain":
            r = add_rounded(B, p, r, out, q, acc, out, "rne")
        else:
            r = convert(B, add_rounded(B, p, r, out, q, acc, acc, "rne"), acc, out, "rne")
    return r, out
