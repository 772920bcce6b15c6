"""SMT encodings of ``tcsmt verify``'s questions: free fp32 inputs on a domain, scheme results, exact errors.

SMT questions are over free fp32 bit patterns a_0..a_{K-1}, b_0..b_{K-1} (C = 0), each restricted
to the domain LO <= |x| <= HI (LO = 0 also admits zeros and subnormals).  "error > EPS" is encoded
exactly in integers: the products, D and the error are placed on one common grid 2^L (L a
constant), so the relative test is q |D - P| > p sum|a_k b_k| for EPS = p/q.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from pysmt.fnode import FNode
from pysmt.shortcuts import BV, BVULE, And, BVExtract, Equals, Not, Or

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import FP32
from tcsmt.arith.params import ModelParams
from tcsmt.backends.smt import Bv, SmtBackend
from tcsmt.errors import InternalError, TcsmtError
from tcsmt.verify.domain import Domain
from tcsmt.verify.schemes import scheme, scheme_key

SB = SmtBackend()


@dataclass
class SmtProblem:
    """Free fp32 inputs on a domain, with the exact products as addends on static bounds."""

    K: int
    dom: Domain
    a: list[Bv]
    b: list[Bv]
    symbols: dict[str, FNode]
    constraint: FNode
    products: list[sem.Term]


def _magnitude(sym: FNode) -> FNode:
    return BVExtract(sym, 0, 30)


def make_problem(K: int, dom: Domain) -> SmtProblem:
    """Inputs va0.., vb0.. (32-bit patterns) constrained to the domain, and their exact products."""
    if K < 1 or K > 64:
        raise TcsmtError("--k must be between 1 and 64")
    a = [SB.symbol(f"va{i}_fp32", 32) for i in range(K)]
    b = [SB.symbol(f"vb{i}_fp32", 32) for i in range(K)]
    symbols = {f"a{i}": a[i].t.arg(0) for i in range(K)}
    symbols.update({f"b{i}": b[i].t.arg(0) for i in range(K)})
    lo, hi = BV(dom.lo_pattern, 31), BV(dom.hi_pattern, 31)
    cons = []
    for s in symbols.values():
        m = _magnitude(s)
        cons.append(BVULE(lo, m))
        cons.append(BVULE(m, hi))
    prods = [sem.product_term(SB, _EXACT_PRODUCTS, sem.decode(SB, FP32, x), sem.decode(SB, FP32, y),
                              exp_range=dom.exp_range)[0] for x, y in zip(a, b)]
    return SmtProblem(K, dom, a, b, symbols, And(cons), prods)


#: the exact fp32 products a*b of the problem: raw alignment exponent e(a) + e(b), like every
#: model's (only ``product_exponent`` is read by ``semantics.product_term``)
_EXACT_PRODUCTS = ModelParams(in_fmt="fp32", out_fmt="fp32", acc_fmt="fp32", product_exponent="raw")


def _sign_bit_clear(sym: FNode) -> FNode:
    return Equals(BVExtract(sym, 31, 31), BV(0, 1))


def _sign_symmetric(p: ModelParams | None) -> bool:
    """Negating every b_k negates the model's result exactly (sign-magnitude rounding throughout)."""
    if p is None:
        return True
    modes = {p.block_round, p.out_round, p.c_round}
    return p.align in ("trunc", "rne") and modes <= {"rz", "rne"}


def symmetry(prob: SmtProblem, algos: Sequence[str], params: ModelParams | Sequence[ModelParams | None] | None) -> FNode:
    """Constraints that keep one representative of inputs with identical errors (sound for unsat).

    (1) a_k >= 0: negating both a_k and b_k leaves every product, hence every
    scheme's result, unchanged.  (2) b_0 >= 0 when every rounding is
    sign-symmetric: negating all b negates D and P.  (3) a_0 <= a_1 <= ...
    when every algorithm is a tensor-core scheme and K fits one block of the
    model: a block sums its products exactly, so the order of k is immaterial.
    ``params``: the model of each algorithm (or one for all); (2) and (3) need their condition
    for every one of them.
    """
    K = prob.K
    ps: list[ModelParams | None] = list(params) if isinstance(params, (list, tuple)) else \
        [params if isinstance(params, ModelParams) else None] * len(algos)
    cons = [_sign_bit_clear(prob.symbols[f"a{i}"]) for i in range(K)]
    if all(_sign_symmetric(p) for p in ps):
        cons.append(_sign_bit_clear(prob.symbols["b0"]))
    if all(p is not None and K <= (p.block_k or p.instr_k or K) for p in ps) and \
            all(scheme_key(a) != "fp32" for a in algos):
        cons += [BVULE(prob.symbols[f"a{i}"], prob.symbols[f"a{i + 1}"]) for i in range(K - 1)]
    return And(cons)


def _special(B, bits) -> FNode:
    d = sem.decode(B, FP32, bits)
    return Or(d.nan, d.inf)


#: the finest grid a tensor-core scheme's result lives on for normal fp16 pieces:
#: fp16 products have their LSB at 2^-48 or above, Ootomo-Yokota's scaled correction at 2^-59
SCHEME_GRID = -60


@dataclass
class ErrorTerms:
    """|D - P| and sum|a_k b_k| as non-negative integers times 2^L (L a constant).

    ``outside`` is true where D does not fit the window the integers were
    sized for (D not a multiple of 2^L, or |D| too large); there ``err`` is
    meaningless, and every query treats such inputs as answers, so that an
    unsat answer still covers them (see :func:`exceeds`, :func:`worse`).
    """

    err: Bv
    norm: Bv
    L: int
    special: FNode
    outside: FNode
    out: Bv
    dval: Bv
    P: Bv


def grid(prob: SmtProblem) -> tuple[int, int]:
    """(L, H): every D of interest is a multiple of 2^L below 2^H in magnitude."""
    L = min(min(t.lsb_min for t in prob.products), SCHEME_GRID)
    H = max(t.lsb_max + t.mag_bits for t in prob.products) + max(0, (prob.K - 1).bit_length()) + 2
    return L, H


def _products_on_grid(prob: SmtProblem, L: int) -> tuple[Bv, Bv]:
    """(P, sum|p_k|) as integers times 2^L (P signed)."""
    mags = [sem.on_grid(SB, t, L, specials=False) for t in prob.products]  # the domain excludes inf and NaN
    s, norm = SB.ite(prob.products[0].neg, SB.neg(mags[0]), mags[0]), mags[0]
    for t, m in zip(prob.products[1:], mags[1:]):
        s = SB.add(s, SB.ite(t.neg, SB.neg(m), m))
        norm = SB.add(norm, m)
    return s, norm


def fp32_on_grid(D: Bv, L: int, H: int) -> tuple[Bv, FNode, FNode]:
    """(value, outside, special) of an fp32 pattern D as a signed integer times 2^L.

    ``outside``: D is non-zero and not a multiple of 2^L, or |D| >= 2^H (value then meaningless);
    ``special``: D is inf or NaN.
    """
    d = sem.decode(SB, FP32, D)
    lsb = SB.sub(d.e, FP32.frac_bits)
    top_lsb = H - (FP32.frac_bits + 1)
    nonzero = SB.ne(d.sig, 0)
    below = SB.lt(lsb, L)
    down = SB.ite(below, SB.sub(L, lsb), 0)
    fine = And(below, SB.low_nonzero(d.sig, down))
    outside = And(nonzero, Or(fine, SB.gt(lsb, top_lsb)))
    smax = top_lsb - L
    up = SB.shl(d.sig, SB.min(SB.max(SB.sub(lsb, L), 0), smax), smax, FP32.frac_bits + 1 + smax)
    dmag = SB.ite(below, SB.shr(d.sig, down), up)
    return SB.ite(d.neg, SB.neg(dmag), dmag), outside, Or(d.nan, d.inf)


def error_terms(prob: SmtProblem, D: Bv) -> ErrorTerms:
    """Exact error terms of one fp32 result D against the problem's exact dot product."""
    L, H = grid(prob)
    dval, outside, special = fp32_on_grid(D, L, H)
    P, norm = _products_on_grid(prob, L)
    diff = SB.sub(dval, P)
    err = SB.ite(SB.lt(diff, 0), SB.neg(diff), diff)
    return ErrorTerms(err, norm, L, special, outside, D, dval, P)


def exceeds(et: ErrorTerms, eps: Fraction, relative: bool) -> FNode:
    """The error is larger than eps (a non-finite D counts as larger; see ErrorTerms.outside)."""
    p, q = eps.numerator, eps.denominator
    if relative:
        lhs, rhs = SB.mul_const(et.err, q), SB.mul_const(et.norm, p)
    else:  # err * 2^L > p/q  <=>  q * err * 2^max(L,0) > p * 2^max(-L,0)
        lhs = SB.mul_const(et.err, q * (1 << max(et.L, 0)))
        rhs = SB.const(p * (1 << max(-et.L, 0)))
    return Or(et.special, et.outside, SB.gt(lhs, rhs))


def worse(e1: ErrorTerms, e2: ErrorTerms) -> FNode:
    """The first result is strictly less accurate than the second (absolute errors)."""
    if e1.L != e2.L:
        raise InternalError("error terms on different grids")
    # |D1 - P| > |D2 - P| <=> D1 > D2 and 2P < D1 + D2, or D1 < D2 and 2P > D1 + D2
    both_finite = And(Not(e1.special), Not(e2.special))
    s = SB.add(e1.dval, e2.dval)
    p2 = SB.add(e1.P, e1.P)
    mid = Or(And(SB.gt(e1.dval, e2.dval), SB.lt(p2, s)), And(SB.lt(e1.dval, e2.dval), SB.gt(p2, s)))
    return Or(e1.outside, e2.outside, And(e1.special, Not(e2.special)), And(both_finite, mid))


def scheme_term(algo: str, p: ModelParams | None, prob: SmtProblem) -> Bv:
    """The scheme's fp32 result as a term over the problem's inputs."""
    return scheme(algo)(SB, p, prob.a, prob.b)


def output_pattern(d: Bv) -> FNode:
    """The 32-bit result pattern of a scheme term (for evaluation with tcsmt.solve.evaluate)."""
    return SB.pattern(d, 32)
