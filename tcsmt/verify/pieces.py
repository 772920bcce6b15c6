"""The splits of the composed proofs (``tcsmt.verify.proof``): which pieces a scheme cuts every fp32 input
into, and the piece lemmas |x - P_0 - ... - P_i| <= rho_i |x| on a domain, each proven by bisection on short
dyadic thresholds (UNSAT answers; every SAT answer replayed in the simulator as a witness), with the pieces
read as the model reads them (subnormal pieces flushed where ``subnormal_in`` is false) and scaled as the
scheme scales them (Ootomo-Yokota's 2^-11 dx).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from pysmt.shortcuts import And, Or

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import FP32, Format, get_format
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.backends.smt import SmtBackend
from tcsmt.errors import TcsmtError
from tcsmt.solve.solvers import solve
from tcsmt.verify.domain import Domain
from tcsmt.verify.lemmas import Lemma, Step, _domain_symbol, short_dyadic, tighten
from tcsmt.verify.schemes import OOTOMO_SCALE_LOG2, VENDOR, markidis_pairs, piece_pairs, pieces, scheme_key, split

SB = SmtBackend()
NB = NumpyBackend()
FP16 = get_format("fp16")


@dataclass
class ChainScheme:
    """A chain scheme's splitting: ``n`` pieces of ``fmt`` per input (``cut`` gives their patterns) and the
    piece products (i, j) = A_i . B_j accumulated per k-block, in order."""

    fmt: Format
    n: int
    pairs: list[tuple[int, int]]
    cut: Callable[[Any, Any], list[Any]]
    scales: tuple[int, ...] = ()
    """s_i: piece i stands for 2^-s_i times its pattern's value (Ootomo-Yokota's scaled residual); default 0"""
    split: tuple | None = None
    """what ``cut`` computes: two chain schemes with the same split cut every input into the same leading pieces
    (``pieces(x, fmt, n)`` begins with ``pieces(x, fmt, m)`` for m < n); None: not stated"""


def split_scheme(residual_log2: int, pairs: list[tuple[int, int]] | None = None) -> ChainScheme:
    """The fp16 split x_h = fp16(x), 2^-s lo with lo = fp16(2^s (x - x_h)) (verify_schemes.split): Markidis
    (s = 0), Ootomo-Yokota (s = 11)."""
    return ChainScheme(FP16, 2, pairs or [], lambda B, x: list(split(B, x, residual_log2)), (0, residual_log2),
                       ("fp16 split", residual_log2))


def chain_scheme(algo: str) -> ChainScheme:
    """The splitting of a chain scheme; TcsmtError for a scheme with another structure."""
    key = scheme_key(algo)
    if key in ("markidis", "markidis-full"):
        return split_scheme(0, markidis_pairs(key == "markidis-full"))
    if key in VENDOR:
        fmt, n, full, order = VENDOR[key]
        return ChainScheme(fmt, n, piece_pairs(n, full, order), lambda B, x: pieces(B, x, fmt, n), (),
                           ("pieces", fmt.name))
    if key == "ootomo":  # the pieces x_h and 2^-11 dx; the products are not one chain (_ootomo_chains)
        return split_scheme(OOTOMO_SCALE_LOG2, markidis_pairs(False))
    raise TcsmtError(f"no composed proof for {key}: only chain schemes (one tensor-core accumulator from +0: "
                     "markidis, markidis-full, bf16x9, bf16x3, tf32x3 and their orders) and ootomo are composed")


def _piece_units(B, x_dec: sem.Decoded, lsb: Any, piece: Any, fmt: Format, keep: bool,
                 scale: int = 0) -> tuple[Any, Any]:
    """(signed units, off-grid flag): the piece as the model reads it, times 2^-scale, in units of x's grid
    2^lsb, signed relative to x's sign; off-grid where a set bit would fall below that grid (then the units
    are wrong)."""
    d = sem.decode(B, fmt, piece, keep)
    sh = B.sub(B.sub(d.e, fmt.frac_bits + scale), lsb)
    up = B.shl(d.sig, B.min(B.max(sh, 0), 30), 30, fmt.frac_bits + 31)
    down_by = B.max(B.neg(sh), 0)
    units = B.ite(B.lt(sh, 0), B.shr(d.sig, down_by), up)
    off = B.and_(B.lt(sh, 0), B.low_nonzero(d.sig, down_by))
    special = B.or_(d.nan, d.inf)
    return B.ite(B.xor(d.neg, x_dec.neg), B.neg(units), units), B.or_(off, special)


def piece_lemma(cs: ChainScheme, keep: bool, dom: Domain, i: int, timeout: float) -> Lemma:
    """rho_i: |x - P_0 - ... - P_i| <= rho_i |x| for fp32 x in ``dom`` (x >= 0: the splits are odd)."""
    x, sym, cons = _domain_symbol(dom, "x")
    dx = sem.decode(SB, FP32, x)
    lsb = SB.sub(dx.e, FP32.frac_bits)
    parts = cs.cut(SB, x)
    rest, bad = dx.sig, SB.false()
    scales = cs.scales or (0,) * cs.n
    for piece, s in zip(parts[:i + 1], scales):
        u, off = _piece_units(SB, dx, lsb, piece, cs.fmt, keep, s)
        rest, bad = SB.fit(SB.sub(rest, u), 34), SB.or_(bad, off)
    mag = SB.ite(SB.lt(rest, 0), SB.neg(rest), rest)

    def ask(t: Fraction, limit: float):
        worse = SB.gt(SB.mul_const(mag, t.denominator), SB.mul_const(dx.sig, t.numerator))
        return solve(And(cons, Or(bad, worse)), {"x": sym}, "auto", limit)

    def value(model: dict[str, int]) -> Fraction:
        xv = np.array([model["x"]], dtype=np.int64)
        d = sem.decode(NB, FP32, xv)
        lsb_n = int(np.asarray(d.e)[0]) - FP32.frac_bits
        r = Fraction(int(np.asarray(d.sig)[0]))
        for piece, s in zip(cs.cut(NB, xv)[:i + 1], cs.scales or (0,) * cs.n):
            pd = sem.decode(NB, cs.fmt, piece, keep)
            if int(np.asarray(pd.nan)[0]) or int(np.asarray(pd.inf)[0]):
                return Fraction(1 << 60)
            v = Fraction(int(np.asarray(pd.sig)[0])) * Fraction(2) ** (int(np.asarray(pd.e)[0]) - cs.fmt.frac_bits - s
                                                                         - lsb_n)
            r -= -v if int(np.asarray(pd.neg)[0]) else v
        return abs(r) / int(np.asarray(d.sig)[0])

    read = "" if keep else " (subnormal pieces read as zero)"
    if any(cs.scales):
        read += ", piece i scaled by 2^-" + "/".join(str(s) for s in cs.scales)
    rest_text = " - ".join(f"P_{j}" for j in range(i + 1))
    stmt = f"|x - {rest_text}| <= rho_{i} |x| for fp32 x, {dom.describe()}, {cs.n} {cs.fmt.name} pieces{read}"
    return tighten(f"rho_{i}[{cs.fmt.name}{'' if keep else ', flushed'}]", stmt, ask, value, Fraction(1, 1 << 24),
                   timeout, max_steps=16)


def piece_abs_lemma(cs: ChainScheme, keep: bool, dom: Domain, i: int, timeout: float) -> Lemma:
    """r_i: |x - P_0 - ... - P_i| <= r_i for every fp32 x in ``dom`` (an absolute bound, for ``--abs``: its largest
    value sits in the domain's top binade, where |x| is not at its largest; x >= 0: the splits are odd)."""
    x, sym, cons = _domain_symbol(dom, "x")
    dx = sem.decode(SB, FP32, x)
    lsb = SB.sub(dx.e, FP32.frac_bits)
    parts = cs.cut(SB, x)
    rest, bad = dx.sig, SB.false()
    scales = cs.scales or (0,) * cs.n
    for piece, s in zip(parts[:i + 1], scales):
        u, off = _piece_units(SB, dx, lsb, piece, cs.fmt, keep, s)
        rest, bad = SB.fit(SB.sub(rest, u), 34), SB.or_(bad, off)
    mag = SB.ite(SB.lt(rest, 0), SB.neg(rest), rest)
    lo_e, hi_e = dom.exp_range
    lsb_min, smax = lo_e - FP32.frac_bits, hi_e - lo_e
    on_base = SB.shl(mag, SB.sub(lsb, lsb_min), smax, 34 + smax)  # |rest| / 2^lsb_min

    def ask(t: Fraction, limit: float):
        scale = Fraction(2) ** -lsb_min * t  # t / 2^lsb_min = num / den
        worse = SB.gt(SB.mul_const(on_base, scale.denominator), SB.const(scale.numerator))
        return solve(And(cons, Or(bad, worse)), {"x": sym}, "auto", limit)

    def value(model: dict[str, int]) -> Fraction:
        xv = np.array([model["x"]], dtype=np.int64)
        r = FP32.to_fraction(int(model["x"]))
        assert isinstance(r, Fraction)
        for piece, s in zip(cs.cut(NB, xv)[:i + 1], scales):
            pd = sem.decode(NB, cs.fmt, piece, keep)
            if int(np.asarray(pd.nan)[0]) or int(np.asarray(pd.inf)[0]):
                return Fraction(1 << 60)
            v = Fraction(int(np.asarray(pd.sig)[0])) * Fraction(2) ** (int(np.asarray(pd.e)[0]) - cs.fmt.frac_bits - s)
            r -= -v if int(np.asarray(pd.neg)[0]) else v
        return abs(r)

    read = "" if keep else " (subnormal pieces read as zero)"
    if any(cs.scales):
        read += ", piece i scaled by 2^-" + "/".join(str(s) for s in cs.scales)
    rest_text = " - ".join(f"P_{j}" for j in range(i + 1))
    stmt = f"|x - {rest_text}| <= r_{i} for fp32 x, {dom.describe()}, {cs.n} {cs.fmt.name} pieces{read}"
    hi = FP32.to_fraction(dom.hi_pattern)
    assert isinstance(hi, Fraction)
    name = f"r_{i}[{cs.fmt.name}{'' if keep else ', flushed'}]"
    first = ask(Fraction(0), timeout)  # the pieces may hold x exactly (three bf16 pieces: 24 bits)
    if first.status == "unsat":
        return Lemma(name, stmt, Fraction(0), Fraction(0), {}, [Step(Fraction(0), "unsat", first.seconds)], "exact")
    lem = tighten(name, stmt, ask, value, short_dyadic(hi / (1 << 24), 4, True), timeout, max_steps=16)
    lem.steps.insert(0, Step(Fraction(0), first.status, first.seconds))
    return lem
