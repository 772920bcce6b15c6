"""Stage lemmas of composed error bounds: the stated error of one semantics stage, proven by one solver
query on that stage's own function with free inputs (``tcsmt.verify.proof`` composes them).

* :func:`round_lemma`: the rounding of a block's sum into its accumulator format
  (:func:`tcsmt.arith.semantics.round_to`) is within u |v| + a of its input v;
* :func:`align_lemma`: placing an addend on a window's grid 2^L (:func:`tcsmt.arith.semantics._align_term`)
  loses less than 2^L (at most half of it with "rne").

Queries use the "auto" solver (bitwuzla where installed, z3 otherwise).  A SAT answer means the
semantics breaks its own documented arithmetic: an internal error, never a weaker constant.  Both
constants are stated by :func:`round_constants` and :func:`align_unit`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pysmt.shortcuts import BV, BVULE, And, Or

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import Format
from tcsmt.backends.smt import SmtBackend
from tcsmt.errors import InternalError
from tcsmt.solve.solvers import solve

SB = SmtBackend()


@dataclass
class StageLemma:
    """A stated constant of one semantics stage, proven (UNSAT) or not (the solver's status)."""

    name: str
    statement: str
    status: str
    seconds: float


def _free_int(name: str, lo: int, hi: int) -> tuple[Any, Any, Any]:
    """A free integer in [lo, hi]: (back-end value, symbol, range constraint)."""
    bits = max(1, (hi - lo).bit_length())
    s = SB.symbol(name, bits)
    return SB.sub(s, -lo), s.t.arg(0), BVULE(s.t.arg(0), BV(hi - lo, bits))


def _grid(B, mag: Any, lsb: Any, base: Any, smax: int, mag_bits: int) -> Any:
    """mag * 2^(lsb - base) for lsb >= base, lsb - base <= smax (exact)."""
    return B.shl(mag, B.sub(lsb, base), smax, mag_bits + smax)


def round_constants(fmt: Format, frac_bits: int, mode: str, keep: bool) -> tuple[int, int]:
    """(q, a_exp): the rounding's stated error bound 2^-q |v| + 2^a_exp (see :func:`round_lemma`)."""
    near = mode in ("rne", "rna")
    return frac_bits + (1 if near else 0), (fmt.emin - frac_bits - (1 if near else 0) if keep else fmt.emin)


def align_unit(mode: str) -> Fraction:
    """The most an addend loses on a grid 2^L, in units of 2^L (see :func:`align_lemma`)."""
    return Fraction(1, 2) if mode == "rne" else Fraction(1)


def _round_query(fmt: Format, frac_bits: int, mode: str, keep: bool, mag_bits: int, lsb_min: int,
                 lsb_max: int | None, prefix: str) -> tuple[Any, ...]:
    """The shared setup of :func:`round_lemma` and :func:`band_round_lemma`: the stated constants (qbits, a_exp,
    u, a), the top of the LSB range, the free value v = (-1)^neg mag 2^lsb (its symbols, ``lsb`` and its range
    condition, the exponent of its top bit), the decoded rounding D = round_to(v) with its LSB, the condition
    "v = 0 but D is not", and ``err_on(base, smax_v, smax_d)``: |D - v| on the grid 2^base with v's and D's
    shifts up to smax_v, smax_d (and v, and the width).  ``prefix`` keeps the two lemmas' symbols apart."""
    qbits, a_exp = round_constants(fmt, frac_bits, mode, keep)
    u, a = Fraction(1, 1 << qbits), Fraction(2) ** a_exp
    lsb_hi = fmt.emax if lsb_max is None else lsb_max
    tag = f"{prefix}{mag_bits}_{-lsb_min}_{lsb_hi - lsb_min}"
    neg_s = SB.symbol(f"rneg{tag}", 1)
    mag_s = SB.symbol(f"rmag{tag}", mag_bits)
    lsb, lsb_sym, lsb_ok = _free_int(f"rlsb{tag}", lsb_min, lsb_hi)
    syms = {"neg": neg_s.t.arg(0), "mag": mag_s.t.arg(0), "lsb": lsb_sym}
    neg = SB.ne(neg_s, 0)
    top = SB.add(lsb, SB.msb(mag_s, mag_bits))
    bits = sem.round_to(SB, neg, mag_s, lsb, mag_bits, fmt, frac_bits, mode, keep)
    d = sem.decode(SB, fmt, bits)
    d_lsb = SB.sub(d.e, fmt.frac_bits)
    zero_wrong = SB.and_(SB.eq(mag_s, 0), SB.ne(d.sig, 0))

    def err_on(base: Any, smax_v: int, smax_d: int) -> tuple[Any, Any, int]:
        w = max(smax_v + mag_bits, smax_d + fmt.frac_bits + 1) + 4
        v = SB.fit(_grid(SB, mag_s, lsb, base, smax_v, mag_bits), w)
        dv = SB.fit(_grid(SB, d.sig, d_lsb, base, smax_d, fmt.frac_bits + 1), w)
        diff = SB.fit(SB.sub(SB.ite(SB.xor(d.neg, neg), SB.neg(dv), dv), v), w + 1)
        return SB.ite(SB.lt(diff, 0), SB.neg(diff), diff), v, w
    return qbits, a_exp, u, a, lsb_hi, syms, mag_s, lsb, lsb_ok, top, d, d_lsb, zero_wrong, err_on


def round_lemma(fmt: Format, frac_bits: int, mode: str, keep: bool, mag_bits: int, lsb_min: int,
                timeout: float, lsb_max: int | None = None) -> tuple[StageLemma, Fraction, Fraction]:
    """(lemma, u, a): |round_to(v) - v| <= u |v| + a for v = (-1)^s mag 2^lsb, 0 <= mag < 2^mag_bits,
    lsb_min <= lsb <= lsb_max (default emax), |v| < 2^emax (no overflow); u = 2^-frac_bits (2^-(frac_bits + 1) for "rne", "rna"),
    a = one unit of the subnormal grid 2^(emin - frac_bits) (half for "rne", "rna"), or 2^emin where
    subnormal results are flushed.

    Two queries, by the regime of v: at or above 2^emin the claim is |D - v| <= u |v| (compared on the
    grid of the finer of v and D, shifts within the significands' widths); below, |D - v| <= a (compared
    on the grid of the finer of v and the subnormal grid)."""
    qbits, a_exp, u, a, lsb_hi, syms, _mag_s, lsb, lsb_ok, top, d, d_lsb, zero_wrong, err_on = _round_query(
        fmt, frac_bits, mode, keep, mag_bits, lsb_min, lsb_max, "")

    # v >= 2^emin: D on its own grid (normal, or rounded up past emax: excluded below)
    smax = max(mag_bits, fmt.frac_bits + 2) + 2
    err, v, w = err_on(SB.min(lsb, d_lsb), smax, smax)
    normal_bad = SB.gt(SB.mul_const(err, 1 << qbits), SB.fit(v, w + qbits + 2))
    q_normal = And(lsb_ok, SB.lt(top, fmt.emax), SB.ge(top, fmt.emin), Or(d.nan, d.inf, normal_bad))
    # v < 2^emin: D is on the subnormal grid 2^(emin - frac_bits(fmt))
    sub_lsb = fmt.emin - fmt.frac_bits
    grid = min(sub_lsb, a_exp)
    smax_d = max(0, grid - lsb_min) + fmt.frac_bits + 2
    err, v, w = err_on(SB.min(lsb, grid), fmt.frac_bits + 2 + max(0, sub_lsb - grid), smax_d)
    a_units = SB.shl(1, SB.sub(a_exp, SB.min(lsb, grid)), smax_d, smax_d + 1)
    sub_bad = Or(d.nan, d.inf, zero_wrong, SB.gt(err, SB.fit(a_units, w + 1)))
    q_sub = And(lsb_ok, SB.lt(top, fmt.emin), sub_bad)
    t0 = time.perf_counter()
    status = "unsat"
    for q in (q_normal, q_sub):
        ans = solve(q, syms, "auto", max(1.0, timeout - (time.perf_counter() - t0)))
        if ans.status == "sat":
            raise InternalError(f"round_to ({fmt.name}, {frac_bits} fraction bits, {mode}) breaks its documented "
                                f"error bound at {ans.model}")
        if ans.status != "unsat":
            status = ans.status
            break
    flush = "" if keep else ", subnormal results flushed"
    stmt = (f"|round_to(v) - v| <= 2^-{qbits} |v| + 2^{a_exp} for {fmt.name} with {frac_bits} fraction bits, "
            f"{mode}{flush}, |v| < 2^{fmt.emax}, v = mag 2^lsb, mag < 2^{mag_bits}, {lsb_min} <= lsb <= {lsb_hi}")
    return StageLemma(f"round[{fmt.name}, {frac_bits}, {mode}{flush}]", stmt, status,
                      time.perf_counter() - t0), u, a


def align_lemma(mode: str, frac_bits: int, gap_min: int, mag_bits: int, d_min: int,
                timeout: float) -> tuple[StageLemma, Fraction]:
    """(lemma, unit): an addend (-1)^s mag 2^lsb placed on the grid 2^L by ``_align_term`` (its top at most
    L + frac_bits, i.e. d_min <= lsb - L <= frac_bits - gap_min) loses less than unit * 2^L: unit 1 for
    "trunc" and "floor" (the signed value truncated towards minus infinity), 1/2 for "rne"."""
    unit = align_unit(mode)
    tag = f"{mode}{frac_bits}_{gap_min}_{mag_bits}_{-d_min}"
    neg_s = SB.symbol(f"aneg{tag}", 1)
    mag_s = SB.symbol(f"amag{tag}", mag_bits)
    d_hi = frac_bits - gap_min
    d, d_sym, d_ok = _free_int(f"ad{tag}", d_min, d_hi)  # lsb - L (the lemma is invariant in L itself)
    neg = SB.ne(neg_s, 0)
    term = sem.Term(neg, mag_s, d, SB.add(d, gap_min), mag_bits, d_min, d_hi, d_min + gap_min, frac_bits,
                    gap_min, mag_bits - gap_min)
    kept = sem._align_term(SB, term, SB.const(0), frac_bits, mode)
    base = SB.min(d, 0)
    smax = d_hi - d_min
    w = smax + mag_bits + 4
    m = SB.fit(_grid(SB, mag_s, d, base, smax, mag_bits), w)
    k = SB.fit(SB.shl(kept, SB.neg(base), smax, smax + mag_bits + 2), w)
    one = SB.shl(1, SB.neg(base), smax, smax + 1)
    diff = SB.fit(SB.sub(k, m), w + 1)
    err = SB.ite(SB.lt(diff, 0), SB.neg(diff), diff)
    lhs, rhs = SB.mul_const(err, unit.denominator), SB.mul_const(one, unit.numerator)
    worse = SB.gt(lhs, rhs) if mode == "rne" else SB.ge(lhs, rhs)  # rne: at most the unit; else below it
    t0 = time.perf_counter()
    ans = solve(And(d_ok, worse), {"neg": neg_s.t.arg(0), "mag": mag_s.t.arg(0), "d": d_sym}, "auto", timeout)
    if ans.status == "sat":
        raise InternalError(f"_align_term ({mode}) breaks its documented loss at {ans.model}")
    stmt = (f"|aligned - |t|| {'<=' if mode == 'rne' else '<'} {unit} * 2^L for an addend of {mag_bits} bits placed "
            f"on 2^L by {mode}, its LSB at most 2^(L + {d_hi})")
    return StageLemma(f"align[{mode}, F={frac_bits}]", stmt, ans.status, time.perf_counter() - t0), unit


def align_exact_lemma(mode: str, frac_bits: int, gap_min: int, mag_bits: int, timeout: float) -> StageLemma:
    """An addend (-1)^s mag 2^lsb whose LSB is at or above the grid 2^L (0 <= lsb - L <= frac_bits - gap_min),
    or that is zero, is placed on 2^L by ``_align_term`` exactly: one query, UNSAT where it holds (the lemma
    lets a composed bound charge nothing to an addend known to lie on the grid, such as C = +0 or an fp32 C
    at the block's largest exponent with frac_bits >= 23)."""
    tag = f"x{mode}{frac_bits}_{gap_min}_{mag_bits}"
    neg_s = SB.symbol(f"aneg{tag}", 1)
    mag_s = SB.symbol(f"amag{tag}", mag_bits)
    d_lo, d_hi = -(frac_bits + mag_bits + 2), frac_bits - gap_min
    d, d_sym, d_ok = _free_int(f"ad{tag}", d_lo, d_hi)
    neg = SB.ne(neg_s, 0)
    term = sem.Term(neg, mag_s, d, SB.add(d, gap_min), mag_bits, d_lo, d_hi, d_lo + gap_min, frac_bits,
                    gap_min, mag_bits - gap_min)
    kept = sem._align_term(SB, term, SB.const(0), frac_bits, mode)
    smax = max(0, d_hi)
    w = smax + mag_bits + 4
    m = SB.fit(SB.shl(mag_s, SB.max(d, 0), smax, mag_bits + smax), w)  # mag 2^d for d >= 0
    on_grid = Or(SB.ge(d, 0), SB.eq(mag_s, 0))
    wrong = SB.ne(SB.fit(kept, w), SB.ite(SB.eq(mag_s, 0), SB.fit(SB.const(0), w), m))
    t0 = time.perf_counter()
    ans = solve(And(d_ok, on_grid, wrong), {"neg": neg_s.t.arg(0), "mag": mag_s.t.arg(0), "d": d_sym}, "auto",
                timeout)
    if ans.status == "sat":
        raise InternalError(f"_align_term ({mode}) changes an addend on its grid at {ans.model}")
    stmt = (f"aligned = |t| for an addend of {mag_bits} bits placed on 2^L by {mode} with its LSB at or above 2^L "
            f"(at most 2^(L + {d_hi})), or zero")
    return StageLemma(f"align-exact[{mode}, F={frac_bits}]", stmt, ans.status, time.perf_counter() - t0)


def add_zero_lemma(timeout: float) -> StageLemma:
    """``rn32_sum(+0, y)`` is y (as a value) for every finite fp32 y: one query, UNSAT where it holds (the first
    RN32 addition of a chain that starts from +0 adds no error)."""
    from tcsmt.arith.formats import FP32
    from tcsmt.verify.schemes import rn32_sum

    y = SB.symbol("zadd_y", 32)
    out = rn32_sum(SB, [(SB.const(0), 0), (y, 0)])
    dy, do = sem.decode(SB, FP32, y), sem.decode(SB, FP32, out)
    finite = SB.not_(SB.or_(dy.nan, dy.inf))
    both_zero = SB.and_(SB.eq(dy.sig, 0), SB.eq(do.sig, 0))
    same = SB.or_(SB.eq(out, y), both_zero)
    t0 = time.perf_counter()
    ans = solve(And(finite, SB.not_(same)), {"y": y.t.arg(0) if hasattr(y, "t") else y}, "auto", timeout)
    if ans.status == "sat":
        raise InternalError(f"rn32_sum(+0, y) differs from y at {ans.model}")
    return StageLemma("add-zero[rn32]", "rn32_sum(+0, y) = y for every finite fp32 y", ans.status,
                      time.perf_counter() - t0)


def align_shrink_lemma(frac_bits: int, gap_min: int, mag_bits: int, d_min: int, timeout: float) -> StageLemma:
    """"trunc" alignment never grows an addend: ``_align_term`` places (-1)^s mag 2^lsb on 2^L with magnitude at
    most mag 2^lsb (d_min <= lsb - L <= frac_bits - gap_min): one query, UNSAT where it holds.  So a block whose
    alignments all truncate has |v| <= sum of its addends' magnitudes before the rounding."""
    tag = f"s{frac_bits}_{gap_min}_{mag_bits}_{-d_min}"
    neg_s = SB.symbol(f"aneg{tag}", 1)
    mag_s = SB.symbol(f"amag{tag}", mag_bits)
    d_hi = frac_bits - gap_min
    d, d_sym, d_ok = _free_int(f"ad{tag}", d_min, d_hi)
    term = sem.Term(SB.ne(neg_s, 0), mag_s, d, SB.add(d, gap_min), mag_bits, d_min, d_hi, d_min + gap_min,
                    frac_bits, gap_min, mag_bits - gap_min)
    kept = sem._align_term(SB, term, SB.const(0), frac_bits, "trunc")
    base = SB.min(d, 0)
    smax = d_hi - d_min
    w = smax + mag_bits + 4
    m = SB.fit(_grid(SB, mag_s, d, base, smax, mag_bits), w)
    k = SB.fit(SB.shl(kept, SB.neg(base), smax, smax + mag_bits + 2), w)
    t0 = time.perf_counter()
    ans = solve(And(d_ok, SB.gt(k, m)), {"neg": neg_s.t.arg(0), "mag": mag_s.t.arg(0), "d": d_sym}, "auto", timeout)
    if ans.status == "sat":
        raise InternalError(f"_align_term (trunc) grows an addend at {ans.model}")
    stmt = (f"|aligned| <= |t| for an addend of {mag_bits} bits placed on 2^L by trunc, its LSB at most "
            f"2^(L + {d_hi})")
    return StageLemma(f"align-shrink[trunc, F={frac_bits}]", stmt, ans.status, time.perf_counter() - t0)


def band_round_lemma(fmt: Format, frac_bits: int, mode: str, keep: bool, mag_bits: int, lsb_min: int,
                     timeout: float, lsb_max: int | None = None) -> tuple[StageLemma, Fraction, Fraction]:
    """(lemma, u, a): :func:`round_lemma`'s rounding within u 2^(ceil(log2 |v|) - 1) + a of v, the same u and a:
    the error of a value of the binade (2^m, 2^(m + 1)] is charged at 2^m, not at |v| (a power of two is not
    rounded).  So for |v| <= V the error is at most u P(V) + a, P(V) the largest power of two below V.

    Two queries, by the regime of v, as in :func:`round_lemma`: at or above 2^emin |D - v| <= u 2^(lsb + msb(mag -
    1)) for mag >= 2 and D = v for mag <= 1; below, |D - v| <= a."""
    qbits, a_exp, u, a, lsb_hi, syms, mag_s, lsb, lsb_ok, top, d, d_lsb, zero_wrong, err_on = _round_query(
        fmt, frac_bits, mode, keep, mag_bits, lsb_min, lsb_max, "b")

    smax = max(mag_bits, fmt.frac_bits + 2) + 2
    base = SB.min(lsb, d_lsb)
    err, _v, w = err_on(base, smax, smax)
    # 2^(lsb + msb(mag - 1)) on the grid 2^base (lsb >= base): shift lsb - base + msb(mag - 1) < smax + mag_bits
    m1 = SB.msb(SB.fit(SB.sub(mag_s, 1), mag_bits + 1), mag_bits)
    band = SB.shl(1, SB.add(SB.sub(lsb, base), m1), smax + mag_bits, smax + mag_bits + 1)
    band_bad = Or(And(SB.ge(mag_s, 2), SB.gt(SB.mul_const(err, 1 << qbits), SB.fit(band, w + qbits + 2))),
                  And(SB.le(mag_s, 1), SB.ne(err, 0)))
    q_normal = And(lsb_ok, SB.lt(top, fmt.emax), SB.ge(top, fmt.emin), Or(d.nan, d.inf, band_bad))
    sub_lsb = fmt.emin - fmt.frac_bits
    grid = min(sub_lsb, a_exp)
    smax_d = max(0, grid - lsb_min) + fmt.frac_bits + 2
    err, _v, w = err_on(SB.min(lsb, grid), fmt.frac_bits + 2 + max(0, sub_lsb - grid), smax_d)
    a_units = SB.shl(1, SB.sub(a_exp, SB.min(lsb, grid)), smax_d, smax_d + 1)
    sub_bad = Or(d.nan, d.inf, zero_wrong, SB.gt(err, SB.fit(a_units, w + 1)))
    q_sub = And(lsb_ok, SB.lt(top, fmt.emin), sub_bad)
    t0 = time.perf_counter()
    status = "unsat"
    for q in (q_normal, q_sub):
        ans = solve(q, syms, "auto", max(1.0, timeout - (time.perf_counter() - t0)))
        if ans.status == "sat":
            raise InternalError(f"round_to ({fmt.name}, {frac_bits} fraction bits, {mode}) breaks its per-binade "
                                f"error bound at {ans.model}")
        if ans.status != "unsat":
            status = ans.status
            break
    flush = "" if keep else ", subnormal results flushed"
    stmt = (f"|round_to(v) - v| <= 2^-{qbits} 2^(ceil(log2 |v|) - 1) + 2^{a_exp} for {fmt.name} with {frac_bits} "
            f"fraction bits, {mode}{flush}, |v| < 2^{fmt.emax}, v = mag 2^lsb, mag < 2^{mag_bits}, "
            f"{lsb_min} <= lsb <= {lsb_hi}")
    return StageLemma(f"band-round[{fmt.name}, {frac_bits}, {mode}{flush}]", stmt, status,
                      time.perf_counter() - t0), u, a
