"""The top of the domain in the absolute composition (``tcsmt verify --abs``, :mod:`tcsmt.verify.absolute`).

Over magnitudes, a chain of K products whose heads reach HI has an accumulator up to K HI^2 plus the residual
products, so every block after the first is charged an alignment exponent and a rounding one binade up (2^29 for
K = 2, HI = 2^14: docs/verify.md, "Absolute error").  The inputs cannot do both at once: where every head is HI, every
residual piece is zero or of the opposite sign (x <= HI), so the residual products move the accumulator towards
zero; where some head is below HI, the exact running sums stay a margin below K HI^2.  This module proves the two
facts (each an UNSAT answer, on the pieces as the model reads them) and composes the case "every head at HI":

* the *top-residual lemma* (:func:`top_residual_lemma`, one free input x >= 0; the split is odd): |P_0(x)| = HI
  implies P_1(x) <= 0 and P_1(x) a multiple of 2^g, g the fp32 grid of the binade below HI;
* the *prefix lemmas* (:func:`prefix_lemma`, two free inputs a, b >= 0; |s| does not change with their signs): for
  the first t piece products of the chain, s_t = sum P_i(a) P_j(b), |s_t| <= HI^2, and |s_t| <= HI^2 - m unless
  |P_0(a)| = |P_0(b)| = HI (m a stated margin: half, then a quarter of HI times the gap below HI in the piece format).

The case split (:func:`top_chain_error`): "off the top" (some head below HI, or every head at HI with products of
both signs) the exact running sums satisfy |S_t| <= K HI^2 - m_t, which the chain of :mod:`tcsmt.verify.absolute`
takes as a cap; "on the top" (every head at HI, one sign s of every a_k b_k) the first block adds K HI^2 exactly
and every later product has the sign -s or is zero, so with |C| <= K HI^2 (an fp32 value: a rounding error below the
unit above it cannot pass it) each later block's sum lies between 0 and C: its alignment exponent is C's, its
products lose less than a unit of it (a multiple of the product grid HI 2^g less, for truncation), and its rounding
is charged one binade below K HI^2.  The chain error is the larger of the two cases.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction

from pysmt.shortcuts import And

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import FP32
from tcsmt.solve.solvers import solve
from tcsmt.verify.domain import Domain
from tcsmt.verify.lemmas import _domain_symbol
from tcsmt.verify.pieces import ChainScheme
from tcsmt.verify.stages import SB, StageLemma


def _at(d: sem.Decoded, q: sem.Decoded):
    """The decoded piece equals the decoded constant q in magnitude (same exponent and significand)."""
    return SB.and_(SB.eq(d.e, q.e), SB.eq(d.sig, q.sig))


def below_hi(cs: ChainScheme, hi: Fraction) -> Fraction:
    """The largest value of the piece format below HI (HI a value of it)."""
    v = cs.fmt.to_fraction(cs.fmt.from_fraction(hi) - 1)
    assert isinstance(v, Fraction)  # a finite value below a finite one
    return v


def top_grid(hi: Fraction) -> int:
    """g: x in the binade below HI, up to HI, is a multiple of 2^g (the fp32 unit of that binade)."""
    below = FP32.to_fraction(FP32.from_fraction(hi) - 1)
    assert isinstance(below, Fraction)
    e = below.numerator.bit_length() - below.denominator.bit_length()
    e -= 1 if Fraction(2) ** e > below else 0
    return e - FP32.frac_bits


def top_residual_lemma(cs: ChainScheme, keep: bool, dom: Domain, hi: Fraction, timeout: float) -> StageLemma:
    """|P_0(x)| = HI implies P_1(x) <= 0 and P_1(x) a multiple of 2^g for fp32 x >= 0 of the domain (pieces as the
    model reads them, ``keep``: subnormal pieces kept); one query, UNSAT where it holds."""
    g = top_grid(hi)
    x, sym, cons = _domain_symbol(dom, "x")
    parts = cs.cut(SB, x)
    d0, d1 = (sem.decode(SB, cs.fmt, q, keep) for q in parts[:2])
    q = sem.decode(SB, cs.fmt, SB.const(cs.fmt.from_fraction(hi)), keep)
    lsb1 = SB.sub(d1.e, cs.fmt.frac_bits)  # P_1 = sig 2^lsb1
    below = SB.sub(g, lsb1)  # bits of sig below 2^g
    off_grid = SB.and_(SB.gt(below, 0), SB.low_nonzero(d1.sig, SB.min(below, cs.fmt.frac_bits + 1)))
    positive = SB.and_(SB.not_(d1.neg), SB.ne(d1.sig, 0))
    bad = SB.and_(_at(d0, q), SB.or_(SB.or_(d1.nan, d1.inf), SB.or_(positive, off_grid)))
    t0 = time.perf_counter()
    ans = solve(And(cons, bad), {"x": sym}, "auto", timeout)
    read = "" if keep else " (subnormal pieces read as zero)"
    return StageLemma(f"top-residual[{cs.fmt.name}]", f"|P_0(x)| = {float(hi):g} implies P_1(x) <= 0 and P_1(x) a "
                      f"multiple of 2^{g}, fp32 x >= 0, {dom.describe()}{read}", ans.status,
                      time.perf_counter() - t0)


def prefix_lemma(cs: ChainScheme, p, keep: bool, dom: Domain, hi: Fraction, t: int, margin: Fraction,
                 timeout: float) -> StageLemma:
    """|s_t(a, b)| <= HI^2 for all a, b of the domain, and <= HI^2 - margin unless both heads are HI in magnitude,
    s_t the exact sum of the chain's first t piece products P_i(a) P_j(b) (module docstring); one query."""
    a, sa, ca = _domain_symbol(dom, "a")
    b, sb, cb = _domain_symbol(dom, "b")
    da = [sem.decode(SB, cs.fmt, q, keep) for q in cs.cut(SB, a)]
    db = [sem.decode(SB, cs.fmt, q, keep) for q in cs.cut(SB, b)]
    terms = [sem.product_term(SB, p, da[i], db[j])[0] for i, j in cs.pairs[:t]]
    s = sem.block_sum(SB, terms, None, p)  # exact, on the static grid 2^L
    L = Fraction(2) ** min(term.lsb_min for term in terms)
    q = sem.decode(SB, cs.fmt, SB.const(cs.fmt.from_fraction(hi)), keep)
    top = SB.and_(_at(da[0], q), _at(db[0], q))
    lim_all, lim_off = hi * hi / L, (hi * hi - margin) / L
    prods = " + ".join(f"P_{i}(a) P_{j}(b)" for i, j in cs.pairs[:t])
    stmt = (f"|{prods}| <= {float(hi * hi):g}, and <= {float(hi * hi):g} - {float(margin):g} unless |P_0(a)| = "
            f"|P_0(b)| = {float(hi):g}, {dom.describe()}")
    if lim_all.denominator != 1 or lim_off.denominator != 1:  # the bounds off the sum's grid: not asked
        return StageLemma(f"prefix-{t}[{cs.fmt.name}]", stmt, "not asked (bound off the grid)", 0.0)
    bad = SB.or_(SB.gt(s.mag, int(lim_all)), SB.and_(SB.not_(top), SB.gt(s.mag, int(lim_off))))
    t0 = time.perf_counter()
    ans = solve(And(ca, cb, bad), {"a": sa, "b": sb}, "auto", timeout)
    return StageLemma(f"prefix-{t}[{cs.fmt.name}]", stmt, ans.status, time.perf_counter() - t0)


@dataclass(frozen=True)
class OnTop:
    """The constants of the case "on the top" (module docstring)."""

    k: int
    """K: the products of every block"""
    total: Fraction
    """K HI^2, an fp32 value"""
    step: Fraction
    """the fp32 unit above K HI^2"""
    residual_products: Fraction
    """|X_t| <= K HI p_1 for a block of head-residual products"""
    product_grid: Fraction | None
    """every head-residual product is a multiple of this (HI 2^g), None where not known"""
    product_top: Fraction
    """2^e of every head-residual product (its alignment exponent) is at most this"""


def top_chain_error(first_err: Fraction, first_v: Fraction, blocks: int, u: Fraction, a: Fraction, each: Fraction,
                    trunc: bool, top: OnTop) -> Fraction | None:
    """The chain error on the top: ``first_err`` of the first block (its sum before the rounding at most
    ``first_v``), then ``blocks`` blocks of K head-residual products (module docstring), each charged its alignment
    (``each`` 2^E per product, 2^E <= the largest power of two at most K HI^2; a product grid less for truncation,
    whose loss is a multiple of that grid below 2^(E - F)) and its rounding (u P + a, P the largest power of two
    below K HI^2: every later sum lies in [0, K HI^2] in magnitude).  C sets E and is placed exactly (the caller
    checks the align-exact lemma).  None where a step does not hold for these constants: the first rounding could
    pass K HI^2, or a block's products could outweigh the accumulator."""
    pow_e = Fraction(2) ** (top.total.numerator.bit_length() - top.total.denominator.bit_length())
    while pow_e > top.total:
        pow_e /= 2
    while pow_e * 2 <= top.total:
        pow_e *= 2
    below = pow_e / 2 if pow_e == top.total else pow_e
    rnd = u * below + a
    if first_v + rnd >= top.total + top.step:
        return None  # |C_1| <= K HI^2: the rounding stays below the fp32 unit above it
    unit = each * pow_e
    grid = top.product_grid
    per_product = unit - grid if trunc and grid is not None and grid <= unit else unit
    align = top.k * per_product
    err, low = first_err, top.total - first_err  # |C| >= low
    for _ in range(blocks):
        if low <= top.residual_products + align or low <= 2 * top.product_top:
            return None  # the block's sum could change sign, or a product could set E
        err += align + rnd
        low -= top.residual_products + align + rnd
    return err
