"""Solver lemmas on whole instructions and on the fp16 split, measured in benchmarks/bench_verify_proofs.py.

``tcsmt verify`` composes its bounds from smaller lemmas (:mod:`tcsmt.verify.proof`, :mod:`tcsmt.verify.stages`);
the instruction lemmas here state the same facts on a whole instruction at once, and show why that does not fit
the time (docs/verify.md, "Composed proofs").

Every lemma is a statement "Q <= c for every input of a stated set", proven by an UNSAT answer of
the solver to "Q > c"; the constant c is tightened by bisection on short dyadic thresholds, and
every SAT answer is replayed in the simulator (exact rationals) and kept as a witness (a lower
bound on the supremum of Q).  The query order depends only on the answers, never on time, so a
run that hits no time limit gives the same constants on any machine.

Lemmas:

* the split lemmas (|x - x_h| <= rho |x| and the residual's tail) are
  :func:`tcsmt.verify.pieces.piece_lemma`, for any split;
* tensor-core lemma (:func:`tc_lemma`): for one instruction TC(x.y + C) of a model on n free
  finite fp16 pairs and a free fp32 C that is zero or has 2^-48 <= |C| < 2^45:
  |TC - (sum x_i y_i + C)| <= gamma (sum |x_i y_i| + |C|).  The set contains every accumulator a
  scheme's chain can hold (fp16 products are multiples of 2^-48, so are their truncated and
  rounded sums; their magnitude stays below 64 * 4 * 65504^2 < 2^45 for K <= 64).  Its measure
  sum|x_i y_i| + |C| makes gamma large for subnormal pieces (their raw alignment exponent overstates
  them), and its C set admits fp32 values off the 2^-48 grid: :func:`instr_lemma` is the form a
  composition needs.
* one-instruction lemma (:func:`instr_lemma`): C = +0 or an fp32 multiple of 2^-48, pieces read as the
  model reads them (flushes), measure sum 2^(e(x_i) + e(y_i)) + |C| (any pieces) or sum|x_i y_i| + |C|
  (normal pieces); optionally compared on a grid relative to the largest exponent and split by which
  addend has it.  Proven in seconds for one product or from +0 at n = 2; with an accumulator at n = 2
  a minute or more per case (docs/verify.md).

The module is over 400 lines because the three lemma families share one proof method (the input sets of
free fp16 pairs and grid-aligned C, the bisection driver on dyadic thresholds, the witness replay in the
simulator); a split would put one method's pieces in several places.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from pysmt.fnode import FNode
from pysmt.shortcuts import BV, BVULE, And, BVExtract, Equals, Or

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import FP32, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.backends.smt import SmtBackend
from tcsmt.solve.solvers import Answer, solve
from tcsmt.verify.domain import Domain
from tcsmt.verify.schemes import split_units

SB = SmtBackend()
NB = NumpyBackend()
FP16 = get_format("fp16")

#: the accumulator set of :func:`tc_lemma`: C = 0 or 2^C_EMIN <= |C| < 2^(C_EMAX + 1)
C_EMIN, C_EMAX = -48, 44


@dataclass
class Step:
    """One solver query of a lemma: "Q > threshold" and the answer."""

    threshold: Fraction
    status: str
    seconds: float


@dataclass
class Lemma:
    """A proven constant (``bound``; None when no threshold was proven) and the best witness value."""

    name: str
    statement: str
    bound: Fraction | None
    found: Fraction
    witness: dict[str, int]
    steps: list[Step] = field(default_factory=list)
    stopped: str = ""
    spurious: int = 0
    """SAT answers of an abstracted query that the exact replay refutes"""
    floor: Fraction = Fraction(0)
    """the largest threshold with a spurious SAT answer (not provable with the abstraction)"""

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)


def short_dyadic(x: Fraction, bits: int, up: bool) -> Fraction:
    """x > 0 rounded up (or down) to ``bits`` significant bits: a short threshold for the solver."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    sc = Fraction(2) ** (bits - 1 - e)
    m = math.ceil(x * sc) if up else math.floor(x * sc)
    while m >= (1 << bits):
        sc /= 2
        m = math.ceil(x * sc) if up else math.floor(x * sc)
    return Fraction(m) / sc


def tighten(name: str, statement: str, ask: Callable[[Fraction, float], Answer],
            value: Callable[[dict[str, int]], Fraction], start: Fraction, timeout: float,
            tolerance: Fraction = Fraction(1, 16), max_steps: int = 12, abstracted: bool = False) -> Lemma:
    """Bisect the smallest proven threshold (UNSAT) above the largest replayed witness (SAT).

    Thresholds: ``start``; while nothing is proven, 8x the larger of the threshold and the witness;
    then the shortest dyadic (5 to 24 bits) near the geometric mean of the witness and the proven
    bound, stopping once bound <= witness (1 + tolerance).  A timeout stops the lemma (the proven bound so far stands).
    """
    lem = Lemma(name, statement, None, Fraction(0), {})
    t = start
    for _ in range(max_steps):
        ans = ask(t, timeout)
        lem.steps.append(Step(t, ans.status, ans.seconds))
        if ans.status == "sat":
            v = value(ans.model)
            if not v > t and not abstracted:
                raise AssertionError(f"lemma {name}: solver witness has value {v} <= {t} when replayed")
            if v > lem.found:
                lem.found, lem.witness = v, dict(ans.model)
            if not v > t:  # a spurious answer of the abstraction: t is not proven, nothing found above it
                lem.spurious += 1
                lem.floor = max(lem.floor, t)
        elif ans.status == "unsat":
            lem.bound = t
        else:
            lem.stopped = f"solver {ans.status} after {ans.seconds:.1f} s at threshold {float(t):.3g}"
            return lem
        if lem.bound is None:
            t = short_dyadic(max(t, lem.found) * 8, 5, True)
            continue
        low = max(lem.found, lem.floor)
        if lem.bound <= low * (1 + tolerance) or lem.bound == 0:
            lem.stopped = "converged" if lem.floor <= lem.found else "converged (abstraction limit)"
            return lem
        lo = low if low > 0 else lem.bound / (1 << 16)
        gm = Fraction(math.sqrt(float(lo) * float(lem.bound)))
        mids = [m for m in (short_dyadic(gm, bits, True) for bits in (5, 8, 12, 16, 24)) if lo < m < lem.bound]
        if not mids:
            lem.stopped = "no threshold left between witness and bound"
            return lem
        t = mids[0]
    lem.stopped = f"{max_steps} queries"
    return lem


# ------------------------------------------------------------------ split lemmas
def _domain_symbol(dom: Domain, name: str) -> tuple[object, FNode, FNode]:
    """A free fp32 input x >= 0 with LO <= x <= HI (the split of -x is the negated split of x)."""
    x = SB.symbol(name, 32)
    sym = x.t.arg(0)
    cons = And(Equals(BVExtract(sym, 31, 31), BV(0, 1)), BVULE(BV(dom.lo_pattern, 31), BVExtract(sym, 0, 30)),
               BVULE(BVExtract(sym, 0, 30), BV(dom.hi_pattern, 31)))
    return x, sym, cons


def _abs(B, v):
    return B.ite(B.lt(v, 0), B.neg(v), v)


def _pair_symbols(n: int) -> tuple[list[Any], list[Any], Any, dict[str, FNode]]:
    """The free inputs of a one-instruction lemma: fp16 patterns x0..x(n-1), y0..y(n-1) and an fp32 pattern c
    (back-end values), and their solver symbols by name."""
    xs = [SB.symbol(f"x{i}", 16) for i in range(n)]
    ys = [SB.symbol(f"y{i}", 16) for i in range(n)]
    c = SB.symbol("c", 32)
    syms = {f"x{i}": xs[i].t.arg(0) for i in range(n)}
    syms.update({f"y{i}": ys[i].t.arg(0) for i in range(n)})
    syms["c"] = c.t.arg(0)
    return xs, ys, c, syms


# ------------------------------------------------------------------ tensor-core lemma
def tc_lemma(p: ModelParams, n: int, timeout: float) -> Lemma:
    """gamma of one instruction of ``p`` on n product pairs and an accumulator C (module docstring)."""
    from tcsmt.verify.smt import fp32_on_grid  # the error-term helpers live with the query encodings

    xs, ys, c, syms = _pair_symbols(n)
    cons = [BVULE(BVExtract(v.t.arg(0), 10, 14), BV(30, 5)) for v in xs + ys]  # finite fp16
    ce = BVExtract(syms["c"], 23, 30)
    cons.append(Or(Equals(BVExtract(syms["c"], 0, 30), BV(0, 31)),
                   And(BVULE(BV(C_EMIN + 127, 8), ce), BVULE(ce, BV(C_EMAX + 127, 8)))))
    D = sem.dot(SB, p, xs, ys, c)
    L = C_EMIN - FP32.frac_bits  # C's finest bit; products' LSBs are at 2^-48 or above
    H = C_EMAX + 4
    terms = [sem.product_term(SB, p, sem.decode(SB, FP16, x), sem.decode(SB, FP16, y))[0] for x, y in zip(xs, ys)]
    ct = sem.value_term(SB, sem.decode(SB, FP32, c))[0]
    ct = sem.Term(ct.neg, ct.mag, ct.lsb, ct.top, ct.mag_bits, L, C_EMAX - FP32.frac_bits, C_EMIN, C_EMAX,
                  ct.gap_min, ct.head)
    S = N = None
    for t in [*terms, ct]:
        m = sem.on_grid(SB, t, L, specials=False)
        v = SB.ite(t.neg, SB.neg(m), m)
        S = v if S is None else SB.add(S, v)
        N = m if N is None else SB.add(N, m)
    dval, outside, special = fp32_on_grid(D, L, H)
    err = _abs(SB, SB.sub(dval, S))
    base = And(cons)

    def ask(t: Fraction, limit: float) -> Answer:
        worse = SB.gt(SB.mul_const(err, t.denominator), SB.mul_const(N, t.numerator))
        return solve(And(base, Or(special, outside, worse)), syms, "bitwuzla", limit)

    def value(model: dict[str, int]) -> Fraction:
        xa = [np.array([model[f"x{i}"]], dtype=np.int64) for i in range(n)]
        ya = [np.array([model[f"y{i}"]], dtype=np.int64) for i in range(n)]
        d = FP32.to_fraction(int(np.asarray(sem.dot(NB, p, xa, ya, np.array([model["c"]], dtype=np.int64)))[0]))
        xv = [FP16.to_fraction(model[f"x{i}"]) for i in range(n)]
        yv = [FP16.to_fraction(model[f"y{i}"]) for i in range(n)]
        cv = FP32.to_fraction(model["c"])
        if isinstance(d, float):
            return Fraction(1 << 60)  # a non-finite result: no finite gamma (replayed as huge)
        assert not isinstance(cv, float)
        exact = sum((Fraction(a) * Fraction(b) for a, b in zip(xv, yv)), Fraction(0)) + cv
        norm = sum((abs(Fraction(a) * Fraction(b)) for a, b in zip(xv, yv)), Fraction(0)) + abs(cv)
        return abs(d - exact) / norm if norm else Fraction(0)

    stmt = (f"|TC - (x.y + C)| <= gamma (|x|.|y| + |C|) for one {p.name} instruction on {n} finite fp16 "
            f"pairs, fp32 C = 0 or 2^{C_EMIN} <= |C| < 2^{C_EMAX + 1}")
    return tighten(f"gamma[{p.name}, n={n}]", stmt, ask, value, Fraction(1, 1 << 22), timeout)


# ------------------------------------------------------------------ one instruction, composable
#: every fp16 product is a multiple of 2^PRODUCT_GRID (subnormal x subnormal: 2^-24 * 2^-24), and so is
#: every truncated or rounded sum of such products, hence every accumulator a scheme's chain holds
PRODUCT_GRID = -48
#: the instruction lemma's accumulators: |C| < 2^INSTR_C_TOP (fp16 products are below 2^32)
INSTR_C_TOP = 46


def _fp16_exact(bits: int, keep_subnormals: bool) -> tuple[Fraction, int]:
    """(value, decoded exponent) of a finite fp16 pattern as the model reads it (subnormals flushed to a
    zero of their sign when ``keep_subnormals`` is false; the exponent is emin for subnormals and zeros)."""
    d = sem.decode(NB, FP16, np.array([bits], dtype=np.int64), keep_subnormals)
    sig, e = int(np.asarray(d.sig)[0]), int(np.asarray(d.e)[0])
    v = Fraction(sig) * Fraction(2) ** (e - FP16.frac_bits)
    return (-v if int(np.asarray(d.neg)[0]) else v), e


def instr_lemma(p: ModelParams, n: int, timeout: float, measure: str = "tops", heads: bool = False,
                c_set: str = "grid", exp_fields: tuple[int, int] | None = None, start: Fraction | None = None,
                max_steps: int = 12, abstract: bool = False, relative: int | None = None,
                top: str | None = None) -> Lemma:
    """gamma with |D - (x.y + C)| <= gamma * mu for one instruction D = TC(x.y + C) of model ``p`` on n
    free fp16 pairs: the building block of a composed bound on a whole tensor-core chain.

    Inputs: x_i, y_i finite fp16 (normal, |v| >= 2^-14, where ``heads``; exponent fields pinned to
    ``exp_fields`` = (lo, hi) for case splits and tests); C = +0 (``c_set = "zero"``) or an fp32
    multiple of 2^PRODUCT_GRID with |C| < 2^INSTR_C_TOP (``"grid"``: every accumulator a chain of fp16
    products can hold, see PRODUCT_GRID).  x_i y_i is the exact product of the values the model reads
    (subnormals flushed where ``p.subnormal_in`` is false), so the lemma states the arithmetic error of
    the instruction only.  The measure mu is sum_i 2^(e(x_i) + e(y_i)) + |C| (``"tops"``: the alignment
    exponents the window is relative to, e = emin for subnormals and zeros; a bound for any pieces) or
    sum_i |x_i y_i| + |C| (``"products"``; meaningful with ``heads``).  A result that is inf, NaN or off
    the grid counts as exceeding every threshold.

    ``top`` ("c" or a product index "0", "1", ...): only the inputs where that addend's exponent (e(C), or
    e(x_i) + e(y_i)) is the largest, C non-zero for "c": one case of a case split; the cases "c", "0", ...,
    "n-1" together cover every input (a zero C decodes with fp32's emin, below every product's).

    ``relative = R``: the solver compares on the grid g = 2^(E - R) relative to E = max(e(x_i) + e(y_i),
    e(C)) instead of the absolute grid 2^PRODUCT_GRID: every product, C and D are truncated to multiples of
    g (each loses less than g) and mu to mu' <= mu / g.  2^E <= mu (a term of the "tops" measure, |C|, or
    with ``heads`` a product |x_i y_i| >= 2^(e(x_i) + e(y_i))), so a proven |D' - S'| <= t mu' gives
    |D - S| <= (t + (n + 2) 2^-R) mu: the lemma's bound is t + (n + 2) 2^-R.  Every shift is then relative
    to E, as the model's own alignment is.
    """
    from tcsmt.verify.smt import fp32_on_grid

    if measure not in ("tops", "products") or c_set not in ("grid", "zero"):
        raise ValueError(f"instr_lemma: measure {measure!r}, c_set {c_set!r}")
    G = PRODUCT_GRID
    xs, ys, c, syms = _pair_symbols(n)
    cons = []
    for v in xs + ys:
        f = BVExtract(v.t.arg(0), 10, 14)
        lo, hi = exp_fields if exp_fields is not None else (1 if heads else 0, 30)
        cons += [BVULE(BV(lo, 5), f), BVULE(f, BV(hi, 5))]
    cval, c_off, c_special = fp32_on_grid(c, G, INSTR_C_TOP)
    cons += [SB.not_(c_off), SB.not_(c_special)]
    if c_set == "zero":
        cons.append(Equals(syms["c"], BV(0, 32)))
    D = sem.dot(SB, p, xs, ys, c)
    if top is not None:  # a case split: which addend has the largest exponent
        dc = sem.decode(SB, FP32, c)
        es = [SB.add(sem.decode(SB, FP16, x, p.subnormal_in).e, sem.decode(SB, FP16, y, p.subnormal_in).e)
              for x, y in zip(xs, ys)]
        lead = dc.e if top == "c" else es[int(top)]
        cons += [SB.le(e, lead) for e in [dc.e, *es]]
        if top == "c":
            cons.append(SB.not_(Equals(BVExtract(syms["c"], 0, 30), BV(0, 31))))
    if relative is not None:
        if measure == "products" and not heads:
            raise ValueError("instr_lemma: relative grid with the products measure needs heads")
        err, mu, outside, special = _relative_terms(p, xs, ys, c, D, measure, relative)
        slack = Fraction(n + 2, 1 << relative)
    else:
        err, mu, outside, special = _absolute_terms(p, xs, ys, cval, D, measure)
        slack = Fraction(0)
    ask = _ask_exceeds(And(cons), err, mu, Or(special, outside), syms, abstract)
    return _instr_tighten(p, n, measure, heads, c_set, exp_fields, start, timeout, max_steps, abstract or slack > 0,
                          ask, slack, relative, top)


def _absolute_terms(p: ModelParams, xs: list, ys: list, cval: Any, D: Any, measure: str) -> tuple[Any, Any, Any, Any]:
    """(|D - S|, mu, outside, special) on the absolute grid 2^PRODUCT_GRID (see :func:`instr_lemma`)."""
    from tcsmt.verify.smt import fp32_on_grid

    G, H = PRODUCT_GRID, INSTR_C_TOP + 2
    S, mu = cval, _abs(SB, cval)
    for x, y in zip(xs, ys):
        dx, dy = sem.decode(SB, FP16, x, p.subnormal_in), sem.decode(SB, FP16, y, p.subnormal_in)
        t = sem.product_term(SB, p, dx, dy)[0]
        m = sem.on_grid(SB, t, G, specials=False)
        S = SB.add(S, SB.ite(t.neg, SB.neg(m), m))
        if measure == "products":
            mu = SB.add(mu, m)
        else:
            top_max = 2 * FP16.emax - G
            mu = SB.add(mu, SB.shl(1, SB.sub(SB.add(dx.e, dy.e), G), top_max, top_max + 1))
    dval, outside, special = fp32_on_grid(D, G, H)
    return _abs(SB, SB.sub(dval, S)), mu, outside, special


def _rel(B, neg: Any, mag: Any, mag_bits: int, lsb: Any, base: Any, smax: int) -> Any:
    """(-1)^neg * mag * 2^lsb as a signed integer on the grid 2^base, its magnitude truncated; lsb - base <= smax."""
    sh = B.sub(lsb, base)
    up = B.shl(mag, B.min(B.max(sh, 0), smax), smax, mag_bits + smax)
    m = B.shr(up, B.max(B.neg(sh), 0))
    return B.ite(neg, B.neg(m), m)


def _relative_terms(p: ModelParams, xs: list, ys: list, c: Any, D: Any, measure: str,
                    R: int) -> tuple[Any, Any, Any, Any]:
    """(|D' - S'|, mu', outside, special) on the grid 2^(E - R) (see :func:`instr_lemma`)."""
    dc = sem.decode(SB, FP32, c)
    decs = [(sem.decode(SB, FP16, x, p.subnormal_in), sem.decode(SB, FP16, y, p.subnormal_in)) for x, y in zip(xs, ys)]
    tops = [SB.add(dx.e, dy.e) for dx, dy in decs]
    E = dc.e  # a zero C decodes with e = emin(fp32), below every product's exponent sum
    for e_sum in tops:
        E = SB.max(E, e_sum)
    base = SB.sub(E, R)
    S = _rel(SB, dc.neg, dc.sig, FP32.frac_bits + 1, SB.sub(dc.e, FP32.frac_bits), base, R - FP32.frac_bits)
    mu = _abs(SB, S)
    for (dx, dy), top in zip(decs, tops):
        t = sem.product_term(SB, p, dx, dy)[0]
        v = _rel(SB, t.neg, t.mag, t.mag_bits, t.lsb, base, R - 2 * FP16.frac_bits)
        S = SB.add(S, v)
        if measure == "products":
            mu = SB.add(mu, _abs(SB, v))
        else:
            sh = SB.sub(top, base)
            mu = SB.add(mu, SB.ite(SB.lt(sh, 0), 0, SB.shl(1, SB.max(sh, 0), R, R + 1)))
    dd = sem.decode(SB, FP32, D)
    d_lsb = SB.sub(dd.e, FP32.frac_bits)
    smax = R - FP32.frac_bits + 8  # a sum of n + 1 addends below 2^(E + 2) each stays far below 2^(E + 8)
    outside = SB.gt(SB.sub(d_lsb, base), smax)
    dval = _rel(SB, dd.neg, dd.sig, FP32.frac_bits + 1, d_lsb, base, smax)
    return _abs(SB, SB.sub(dval, S)), mu, outside, Or(dd.nan, dd.inf)


def _instr_tighten(p: ModelParams, n: int, measure: str, heads: bool, c_set: str, exp_fields: tuple[int, int] | None,
                   start: Fraction | None, timeout: float, max_steps: int, abstracted: bool,
                   ask: Callable[[Fraction, float], Answer], slack: Fraction, relative: int | None,
                   top: str | None) -> Lemma:
    """Bisect :func:`instr_lemma`'s gamma (``slack`` added to the proven threshold, see ``relative``)."""
    G = PRODUCT_GRID

    def value(model: dict[str, int]) -> Fraction:
        xa = [np.array([model[f"x{i}"]], dtype=np.int64) for i in range(n)]
        ya = [np.array([model[f"y{i}"]], dtype=np.int64) for i in range(n)]
        d = FP32.to_fraction(int(np.asarray(sem.dot(NB, p, xa, ya, np.array([model["c"]], dtype=np.int64)))[0]))
        cv = FP32.to_fraction(model["c"])
        if isinstance(d, float) or isinstance(cv, float):
            return Fraction(1 << 60)  # a non-finite result: no finite gamma (replayed as huge)
        exact, total = cv, abs(cv)
        for i in range(n):
            (xv, ex), (yv, ey) = _fp16_exact(model[f"x{i}"], p.subnormal_in), _fp16_exact(model[f"y{i}"], p.subnormal_in)
            exact += xv * yv
            total += abs(xv * yv) if measure == "products" else Fraction(2) ** (ex + ey)
        return abs(d - exact) / total if total else Fraction(0)

    mu_text = "sum|x_i y_i| + |C|" if measure == "products" else "sum 2^(e(x_i)+e(y_i)) + |C|"
    pieces = "normal" if heads else "finite"
    if exp_fields is not None:
        pieces += f", exponent fields {exp_fields[0]}..{exp_fields[1]}"
    cs = "C = +0" if c_set == "zero" else f"fp32 C a multiple of 2^{G} with |C| < 2^{INSTR_C_TOP}"
    stmt = (f"|TC - (x.y + C)| <= gamma ({mu_text}) for one {p.name} instruction on {n} {pieces} fp16 pairs, {cs}")
    if top is not None:
        stmt += ", where " + ("C is non-zero and has" if top == "c" else f"product {top} has") + \
            " the largest exponent (one case of a split)"
    if relative is not None:
        stmt += f" (compared on the grid 2^(E - {relative}); bound = proven threshold + {n + 2} * 2^-{relative})"
    lem = tighten(f"gamma[{p.name}, n={n}, {measure}]", stmt, ask, value, start or Fraction(1, 1 << 20), timeout,
                  max_steps=max_steps, abstracted=abstracted)
    if lem.bound is not None:
        lem.bound += slack
    return lem


# ------------------------------------------------------------------ product abstraction
def _ask_exceeds(base: FNode, err: Any, measure: Any, escape: FNode, syms: dict[str, Any],
                 abstract: bool) -> Callable[[Fraction, float], Answer]:
    """The query of a lemma "err <= t * measure" at threshold t: an input of ``base`` with ``err > t * measure``
    or one that leaves the lemma's set (``escape``: a special value, an output off the grid); with
    ``abstract``, the products abstracted first (:func:`abstract_products`)."""

    def ask(t: Fraction, limit: float) -> Answer:
        worse = SB.gt(SB.mul_const(err, t.denominator), SB.mul_const(measure, t.numerator))
        f = And(base, Or(escape, worse))
        if not abstract:
            return solve(f, syms, "bitwuzla", limit)
        g, fresh = abstract_products(f)
        return solve(g, {**syms, **fresh}, "bitwuzla", limit)

    return ask


def abstract_products(formula: FNode, prefix: str = "mul") -> tuple[FNode, dict[str, FNode]]:
    """Replace every product of two non-constant bit-vectors by a fresh variable M, constrained by
    linear facts the true product satisfies (an over-approximation: UNSAT stays a proof).

    For X, Y >= 0 (the significands the semantics multiplies, zero-extended), with msb the index of
    the leading one: M = 0 iff X = 0 or Y = 0; X 2^msb(Y) <= M < X 2^(msb(Y)+1) and
    Y 2^msb(X) <= M < Y 2^(msb(X)+1), because 2^msb(Y) <= Y < 2^(msb(Y)+1).
    """
    from pysmt.shortcuts import BVULT, BVAdd, BVLShl, BVZExt, FreshSymbol, Iff, Implies, Not
    from pysmt.typing import BVType

    from tcsmt.backends.smt import Bv

    muls: list[FNode] = []
    seen: set[int] = set()
    stack = [formula]
    while stack:
        f = stack.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        if f.is_bv_mul() and not f.arg(0).is_constant() and not f.arg(1).is_constant():
            muls.append(f)
        stack.extend(f.args())
    subst, facts, fresh = {}, [], {}
    for f in muls:
        w = f.bv_width()
        m = FreshSymbol(BVType(w), prefix + "%d")
        fresh[m.symbol_name()] = m
        x, y = f.arg(0), f.arg(1)
        zero = BV(0, w)
        facts.append(Iff(Equals(m, zero), Or(Equals(x, zero), Equals(y, zero))))
        for u, v in ((x, y), (y, x)):
            mv = SB.msb(Bv(v, w), w).t  # the leading-one index of v (v > 0 where it is used)
            sh = BVZExt(mv, w - mv.bv_width()) if mv.bv_width() < w else mv
            lo = BVLShl(u, sh)
            hi = BVLShl(u, BVAdd(sh, BV(1, w)))
            facts.append(Implies(Not(Equals(v, zero)), And(BVULE(lo, m), BVULT(m, hi))))
        subst[f] = m
    return And(formula.substitute(subst), *facts), fresh


# ------------------------------------------------------------------ chain lemmas
def lo_within(B, lo: Any, hi: Any, residual_log2: int):
    """|2^-s lo| <= 2^(e(x_h) - 11) for fp16 patterns lo, x_h (e = emin for subnormal x_h).

    As patterns: |lo| <= 2^m with m = e(x_h) - 11 + s, i.e. lo's magnitude pattern is at most the
    pattern of 2^m (fp16 magnitude patterns are ordered like their values; 2^m below fp16's
    smallest subnormal allows only lo = 0).
    """
    m = B.add(sem.decode(B, FP16, hi).e, residual_log2 - 11)
    _, expf, frac = B.fields(FP16, lo)
    mag = B.add(B.mul_const(expf, 1 << FP16.frac_bits), frac)
    normal = B.mul_const(B.add(m, 1 - FP16.emin), 1 << FP16.frac_bits)
    sub_shift = B.sub(m, FP16.emin - FP16.frac_bits)
    sub = B.shl(1, B.min(B.max(sub_shift, 0), FP16.frac_bits), FP16.frac_bits, FP16.frac_bits + 2)
    limit = B.ite(B.ge(m, FP16.emin), normal, B.ite(B.ge(sub_shift, 0), sub, 0))
    return B.le(mag, limit)


def lo_lemma(dom: Domain, residual_log2: int, timeout: float) -> Lemma:
    """Prove :func:`lo_within` for the split of every x in the domain (a yes/no lemma: bound 0 = none exceed)."""
    x, sym, cons = _domain_symbol(dom, "x")
    u = split_units(SB, x, residual_log2)
    ans = solve(And(cons, SB.not_(lo_within(SB, u.lo, u.hi, residual_log2))), {"x": sym}, "bitwuzla", timeout)
    s = f"2^-{residual_log2} lo" if residual_log2 else "lo"
    lem = Lemma(f"lo[s={residual_log2}]", f"|{s}| <= 2^(e(x_h) - 11) for fp32 x, {dom.describe()}",
                Fraction(0) if ans.status == "unsat" else None, Fraction(0), dict(ans.model),
                [Step(Fraction(0), ans.status, ans.seconds)])
    if ans.status == "sat":
        raise AssertionError(f"split lemma lo[s={residual_log2}] fails at x = {ans.model['x']:#010x}")
    lem.stopped = "proven" if ans.status == "unsat" else f"solver {ans.status}"
    return lem


@dataclass
class ChainSpec:
    """A tensor-core computation on fp16 pieces: ``build(B, pieces)`` gives (D pattern, product pairs),
    where pieces maps names (``ah0``, ``al0``, ...) to patterns and each pair names two of them;
    ``bounded`` lists (lo name, hi name, s) for the :func:`lo_within` constraints."""

    title: str
    names: list[str]
    build: Callable[..., tuple[Any, list[tuple[str, str]]]]
    bounded: list[tuple[str, str, int]]
    #: names of the x_h pieces and the fp16 magnitude patterns (lo, hi) they lie between:
    #: fp16(LO) <= |x_h| <= fp16(HI) as RNE is monotone
    heads: list[str] = field(default_factory=list)
    head_range: tuple[int, int] = (0, 0x7BFF)
    #: pairs (x, y) of the products whose lower bounds |x| 2^e(y) <= |x y| (y normal: its significand
    #: is at least 2^10) sum to A' <= A, the measure Gamma refers to (linear: no multiplication)
    lower: list[tuple[str, str]] = field(default_factory=list)


def chain_lemma(p: ModelParams, spec: ChainSpec, timeout: float, abstract: bool = True) -> Lemma:
    """Gamma with |D - S| <= Gamma * A for the chain on every admissible set of fp16 pieces.

    S is the exact sum of the chain's products, A the sum of their magnitudes.  Pieces are free
    finite fp16 values, constrained only by ``spec.bounded`` (each proven for the domain by
    :func:`lo_lemma`): a superset of what the scheme's splits produce.  Every product is a multiple
    of 2^-48, hence so is D (truncated and rounded sums of such values).
    """
    from tcsmt.verify.smt import fp32_on_grid

    sv = {n: SB.symbol(n, 16) for n in spec.names}
    syms = {n: v.t.arg(0) for n, v in sv.items()}
    cons = [BVULE(BVExtract(v.t.arg(0), 10, 14), BV(30, 5)) for v in sv.values()]
    cons += [lo_within(SB, sv[lo], sv[hi], s) for lo, hi, s in spec.bounded]
    for n in spec.heads:
        m = BVExtract(syms[n], 0, 14)
        cons += [BVULE(BV(spec.head_range[0], 15), m), BVULE(m, BV(spec.head_range[1], 15))]
    D, pairs = spec.build(SB, sv)
    L, H = -48, 48
    S = A = None
    for x, y in pairs:
        t = sem.product_term(SB, p, sem.decode(SB, FP16, sv[x]), sem.decode(SB, FP16, sv[y]))[0]
        m = sem.on_grid(SB, t, L, specials=False)
        v = SB.ite(t.neg, SB.neg(m), m)
        S = v if S is None else SB.add(S, v)
        A = m if A is None else SB.add(A, m)
    if spec.lower:
        if not spec.head_range[0] >= 1 << FP16.frac_bits or not all(y in spec.heads for _, y in spec.lower):
            raise AssertionError("chain lemma: |x| 2^e(y) <= |x y| needs a normal y (a head with |y| >= 2^-14)")
        A = None
        for x, y in spec.lower:
            dx_, dy_ = sem.decode(SB, FP16, sv[x]), sem.decode(SB, FP16, sv[y])
            t = sem.Term(SB.false(), dx_.sig, SB.add(SB.sub(dx_.e, FP16.frac_bits), dy_.e), dx_.e,
                         FP16.frac_bits + 1, FP16.emin - FP16.frac_bits + FP16.emin,
                         FP16.emax - FP16.frac_bits + FP16.emax, 0, 0, 0, 1)
            m = sem.on_grid(SB, t, L, specials=False)
            A = m if A is None else SB.add(A, m)
    dval, outside, special = fp32_on_grid(D, L, H)
    err = _abs(SB, SB.sub(dval, S))
    ask = _ask_exceeds(And(cons), err, A, Or(special, outside), syms, abstract)

    def value(model: dict[str, int]) -> Fraction:
        nv = {n: np.array([model[n]], dtype=np.int64) for n in spec.names}
        d_bits, prs = spec.build(NB, nv)
        d = FP32.to_fraction(int(np.asarray(d_bits).reshape(-1)[0]))
        if isinstance(d, float):
            return Fraction(1 << 60)
        vals = {n: Fraction(FP16.to_fraction(model[n])) for n in spec.names}
        exact = sum((vals[x] * vals[y] for x, y in prs), Fraction(0))
        norm = sum((abs(vals[x] * vals[y]) for x, y in prs), Fraction(0))
        return abs(d - exact) / norm if norm else Fraction(0)

    stmt = f"|D - S| <= Gamma * A for {spec.title} on {p.name} (free finite fp16 pieces"
    stmt += ", |2^-s lo| <= 2^(e(x_h) - 11))" if spec.bounded else ")"
    return tighten(f"Gamma[{spec.title}, {p.name}]", stmt, ask, value, Fraction(1, 1 << 21), timeout,
                   abstracted=abstract)


def now() -> float:
    return time.perf_counter()
