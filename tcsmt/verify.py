"""Verify fp32 emulation on fp16 tensor cores: bulk statistics (simulator), worst cases and proofs (SMT).

The schemes themselves are defined once in :mod:`tcsmt.verify_schemes`; this
module evaluates them on numpy arrays, encodes questions about their error
for the solver, and replays every solver answer through the simulator.

Errors of a computed D against the exact dot product P = sum_k a_k b_k (an
exact rational: every fp32 product is exact):

* absolute error: |D - P|;
* relative error: |D - P| / sum_k |a_k b_k|.  This is the usual measure for
  dot products (bounds of the form gamma_K |a|.|b|); it equals |D - P| / |P|
  whenever the products do not cancel (all of one sign), and stays finite
  under cancellation, where |D - P| / |P| is unbounded for every scheme.

SMT questions are over free fp32 bit patterns a_0..a_{K-1}, b_0..b_{K-1}
(C = 0), each restricted to the domain LO <= |x| <= HI (LO = 0 also admits
zeros and subnormals).  "error > EPS" is encoded exactly in integers: the
products, D and the error are placed on one common grid 2^L (L a constant),
so the relative test is q |D - P| > p sum|a_k b_k| for EPS = p/q.
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from pysmt.fnode import FNode
from pysmt.shortcuts import BV, BVULE, And, BVExtract, Equals, Not, Or

from . import files
from . import semantics as sem
from .backend_numpy import NumpyBackend
from .backend_smt import Bv, SmtBackend
from .errors import TcsmtError
from .formats import FP32, Format, get_format
from .params import ModelParams
from .registry import architectures, resolve
from .solvers import solve
from .values import format_value, parse_value
from .verify_schemes import ALGOS, canonical, check_path, scheme

NB = NumpyBackend()
SB = SmtBackend()
FP16: Format = get_format("fp16")
CHUNK = 1 << 14
FP16_MAX = FP16.max_finite

DEFAULT_RANGE = "2^-14..2^14"
DEFAULT_K = 2
COMPARE_RANGES = ("2^-36..2^-14", "2^-14..2^14", "1..2")


# ------------------------------------------------------------------ domain
@dataclass(frozen=True)
class Domain:
    """Inputs with LO <= |x| <= HI (fp32 values; LO = 0 admits zeros and subnormals)."""

    lo: Fraction
    hi: Fraction
    text: str

    @property
    def lo_pattern(self) -> int:
        """Smallest fp32 magnitude pattern in the domain."""
        return _fp32_pattern_at_least(self.lo)

    @property
    def hi_pattern(self) -> int:
        """Largest fp32 magnitude pattern in the domain."""
        return _fp32_pattern_at_most(self.hi)

    @property
    def exp_range(self) -> tuple[int, int]:
        """Range of the fp32 decoded exponent e (emin = -126 for subnormals) on the domain."""
        lo_e = -126 if self.lo_pattern < (1 << 23) else (self.lo_pattern >> 23) - 127
        hi_e = max(-126, (self.hi_pattern >> 23) - 127)
        return lo_e, hi_e


def _fp32_pattern_at_most(v: Fraction) -> int:
    """Largest non-negative fp32 pattern whose value is <= v (v >= 0, finite)."""
    lo, hi = 0, 0x7F7FFFFF
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if FP32.to_fraction(mid) <= v:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _fp32_pattern_at_least(v: Fraction) -> int:
    """Smallest non-negative fp32 pattern whose value is >= v."""
    p = _fp32_pattern_at_most(v)
    return p if FP32.to_fraction(p) == v else p + 1


def parse_range(text: str) -> Domain:
    """Parse ``LO..HI`` (exact values such as ``2^-14..2^14``); raises TcsmtError when unusable."""
    if ".." not in text:
        raise TcsmtError(f"bad --range {text!r}: write LO..HI, e.g. 2^-14..2^14")
    lo_t, hi_t = text.split("..", 1)
    try:
        lo, hi = parse_value(lo_t), parse_value(hi_t)
    except TcsmtError as exc:
        raise TcsmtError(f"bad --range {text!r}: {exc}") from exc
    if lo < 0 or hi <= 0:
        raise TcsmtError(f"bad --range {text!r}: LO and HI bound magnitudes (0 <= LO < HI)")
    if lo >= hi:
        raise TcsmtError(f"bad --range {text!r}: LO must be below HI")
    if hi > FP16_MAX:
        raise TcsmtError(f"bad --range {text!r}: HI must be at most 65504 (the schemes split into fp16)")
    d = Domain(lo, hi, text)
    if d.lo_pattern > d.hi_pattern:
        raise TcsmtError(f"bad --range {text!r}: no fp32 value lies in it")
    return d


# --------------------------------------------------------------- simulator
def simulate_scheme(algo: str, p: ModelParams | None, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fp32 result patterns of ``algo`` for fp32 patterns a, b of shape (n, K)."""
    fn = scheme(algo)
    a = np.asarray(a, dtype=np.uint32)
    b = np.asarray(b, dtype=np.uint32)
    if a.ndim != 2 or a.shape != b.shape or a.shape[1] == 0:
        raise TcsmtError(f"a and b must have one shape (n, K) with K >= 1; got {a.shape} and {b.shape}")
    n, K = a.shape
    out = np.empty(n, dtype=np.uint32)
    for s in range(0, n, CHUNK):
        e = min(n, s + CHUNK)
        cols_a = [a[s:e, k].astype(np.int64) for k in range(K)]
        cols_b = [b[s:e, k].astype(np.int64) for k in range(K)]
        d = fn(NB, p, cols_a, cols_b)
        out[s:e] = np.broadcast_to(np.asarray(d), (e - s,)).astype(np.uint32)
    return out


def exact_dot(a: Sequence[int], b: Sequence[int]) -> Fraction:
    """sum_k a_k b_k exactly, for fp32 patterns."""
    return sum((Fraction(FP32.to_fraction(x)) * Fraction(FP32.to_fraction(y)) for x, y in zip(a, b)), Fraction(0))


def abs_products(a: Sequence[int], b: Sequence[int]) -> Fraction:
    """sum_k |a_k b_k| exactly, for fp32 patterns."""
    return sum((abs(Fraction(FP32.to_fraction(x)) * Fraction(FP32.to_fraction(y))) for x, y in zip(a, b)), Fraction(0))


def error_of(d_bits: int, a: Sequence[int], b: Sequence[int], relative: bool) -> Fraction | float:
    """Exact error of the fp32 result ``d_bits`` (inf when D is not finite; see module docstring)."""
    d = FP32.to_fraction(int(d_bits))
    if isinstance(d, float):
        return math.inf
    err = abs(d - exact_dot(a, b))
    if not relative:
        return err
    norm = abs_products(a, b)
    if norm == 0:
        return Fraction(0) if err == 0 else math.inf
    return err / norm


def random_inputs(rng: np.random.Generator, n: int, K: int, dom: Domain, dist: str) -> tuple[np.ndarray, np.ndarray]:
    """fp32 patterns (n, K) for A and B, random signs, magnitudes in the domain.

    ``loguniform``: log2|x| uniform over [log2 max(LO, 2^-126), log2 HI];
    ``uniform``: |x| uniform over [LO, HI].  Values are rounded to fp32 and
    clipped to the domain's extreme fp32 values.
    """
    out = []
    lo_v = float(FP32.to_fraction(dom.lo_pattern))
    hi_v = float(FP32.to_fraction(dom.hi_pattern))
    for _ in range(2):
        if dist == "loguniform":
            l0 = math.log2(max(lo_v, 2.0 ** -126))
            mag = np.exp2(rng.uniform(l0, math.log2(hi_v), size=(n, K)))
        elif dist == "uniform":
            mag = rng.uniform(lo_v, hi_v, size=(n, K))
        else:
            raise TcsmtError(f"unknown distribution {dist!r} (known: loguniform, uniform)")
        x = np.clip(mag, lo_v, hi_v).astype(np.float32)
        x = np.clip(x, np.float32(lo_v), np.float32(hi_v))
        sign = rng.integers(0, 2, size=(n, K)).astype(np.uint32) << np.uint32(31)
        out.append(x.view(np.uint32) | sign)
    return out[0], out[1]


def errors_fp64(d: np.ndarray, a: np.ndarray, b: np.ndarray, relative: bool) -> np.ndarray:
    """Errors of fp32 results ``d`` for many rows, each the fp64 rounding of the exact value.

    fp32 products are exact in fp64; |D - P| and sum|a_k b_k| are summed with
    math.fsum (correctly rounded), so each error is within 2^-52 of the exact one.
    """
    av = a.view(np.float32).astype(np.float64)
    bv = b.view(np.float32).astype(np.float64)
    prods = av * bv
    dv = d.view(np.float32).astype(np.float64)
    out = np.empty(len(d))
    for i in range(len(d)):
        if not math.isfinite(dv[i]):
            out[i] = math.inf
            continue
        err = abs(math.fsum([dv[i], *(-prods[i])]))
        if relative:
            norm = math.fsum(np.abs(prods[i]))
            out[i] = err / norm if norm else (0.0 if err == 0 else math.inf)
        else:
            out[i] = err
    return out


# ------------------------------------------------------------ architectures
def fp16_paths() -> list[tuple[str, ModelParams]]:
    """Every built-in architecture with an fp16 -> fp32 path (its first such path)."""
    out = []
    for name, arch in architectures().items():
        cands = arch.find_paths("fp16", "fp32", None)
        if cands:
            out.append((name, cands[0].params))
    return out


def model_for(arch: str) -> ModelParams:
    """The fp16 -> fp32 model of a spec (``volta``, ``volta:carry2``, ``hopper:extra_bits=3`` ...)."""
    p = resolve(arch, "fp16", "fp32")
    check_path(p)
    return p


# ---------------------------------------------------------------- SMT terms
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


def symmetry(prob: SmtProblem, algos: Sequence[str], p: ModelParams | None) -> FNode:
    """Constraints that keep one representative of inputs with identical errors (sound for unsat).

    (1) a_k >= 0: negating both a_k and b_k leaves every product, hence every
    scheme's result, unchanged.  (2) b_0 >= 0 when every rounding is
    sign-symmetric: negating all b negates D and P.  (3) a_0 <= a_1 <= ...
    when every algorithm is a tensor-core scheme and K fits one block of the
    model: a block sums its products exactly, so the order of k is immaterial.
    """
    K = prob.K
    cons = [_sign_bit_clear(prob.symbols[f"a{i}"]) for i in range(K)]
    if _sign_symmetric(p):
        cons.append(_sign_bit_clear(prob.symbols["b0"]))
    if p is not None and all(canonical(a) != "fp32" for a in algos) and K <= (p.block_k or p.instr_k or K):
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


def error_terms(prob: SmtProblem, D: Bv) -> ErrorTerms:
    """Exact error terms of one fp32 result D against the problem's exact dot product."""
    L, H = grid(prob)
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
    dval = SB.ite(d.neg, SB.neg(dmag), dmag)
    P, norm = _products_on_grid(prob, L)
    diff = SB.sub(dval, P)
    err = SB.ite(SB.lt(diff, 0), SB.neg(diff), diff)
    return ErrorTerms(err, norm, L, Or(d.nan, d.inf), outside, D, dval, P)


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
        raise TcsmtError("internal error: error terms on different grids")
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
    """The 32-bit result pattern of a scheme term (for evaluation with tcsmt.smt_eval)."""
    return SB.pattern(d, 32)


# ------------------------------------------------------------------ results
@dataclass
class Witness:
    """One input (fp32 patterns) with each algorithm's result and exact error."""

    a: list[int]
    b: list[int]
    exact: Fraction
    results: dict[str, int]
    errors: dict[str, Fraction | float]


def replay(algos: Sequence[str], p: ModelParams | None, a: list[int], b: list[int], relative: bool) -> Witness:
    """Each algorithm's result and exact error on one input, from the simulator."""
    av = np.array([a], dtype=np.uint32)
    bv = np.array([b], dtype=np.uint32)
    res, errs = {}, {}
    for algo in algos:
        d = int(simulate_scheme(algo, p, av, bv)[0])
        res[algo] = d
        errs[algo] = error_of(d, a, b, relative)
    return Witness(list(a), list(b), exact_dot(a, b), res, errs)


def _model_inputs(prob: SmtProblem, model: dict[str, int]) -> tuple[list[int], list[int]]:
    return [model[f"a{i}"] for i in range(prob.K)], [model[f"b{i}"] for i in range(prob.K)]


@dataclass
class Query:
    """One solver call: the threshold asked, the answer and its time."""

    threshold: Fraction
    status: str
    seconds: float


@dataclass
class BoundResult:
    """--bound: proven (unsat), counterexample (sat, replayed) or timeout."""

    algo: str
    arch: str
    K: int
    dom: Domain
    eps: Fraction
    relative: bool
    status: str
    witness: Witness | None
    seconds: float
    solver: str = ""


@dataclass
class WorstResult:
    """Worst-case search: the largest error found (replayed) and the smallest proven bound."""

    algo: str
    arch: str
    K: int
    dom: Domain
    relative: bool
    witness: Witness | None
    bound: Fraction | None
    queries: list[Query] = field(default_factory=list)
    seconds: float = 0.0
    stopped: str = ""

    @property
    def found(self) -> Fraction | float | None:
        return None if self.witness is None else self.witness.errors[self.algo]


@dataclass
class CompareResult:
    """--compare: an input where algo1 is less accurate than algo2, or a proof that none exists."""

    algo1: str
    algo2: str
    arch: str
    K: int
    dom: Domain
    status: str  # found, impossible, timeout
    witness: Witness | None
    seconds: float


def _arch_label(p: ModelParams | None, arch: str) -> str:
    return arch if p is not None else "-"


def _params(algo: str, arch: str) -> ModelParams | None:
    return None if canonical(algo) == "fp32" else model_for(arch)


def check_eps(eps: Fraction) -> Fraction:
    if eps <= 0:
        raise TcsmtError(f"--bound must be positive (got {format_value(eps)})")
    return eps


def prove_bound(algo: str, arch: str, K: int, dom: Domain, eps: Fraction, relative: bool = True,
                solver: str = "auto", timeout: float = 60.0) -> BoundResult:
    """Prove error <= eps on the whole domain (unsat) or return a replayed counterexample."""
    algo = canonical(algo)
    check_eps(eps)
    p = _params(algo, arch)
    t0 = time.perf_counter()
    prob = make_problem(K, dom)
    et = error_terms(prob, scheme_term(algo, p, prob))
    dom_c = And(prob.constraint, symmetry(prob, [algo], p))
    ans = solve(And(dom_c, exceeds(et, eps, relative)), prob.symbols, solver, timeout)
    res = BoundResult(algo, arch, K, dom, eps, relative, "timeout", None, 0.0, ans.solver)
    if ans.status == "unsat":
        res.status = "proven"
    elif ans.status == "sat":
        a, b = _model_inputs(prob, ans.model)
        w = replay([algo], p, a, b, relative)
        if not w.errors[algo] > eps:
            raise TcsmtError(f"internal error: solver counterexample has error {w.errors[algo]} <= {eps} "
                             f"in the simulator (a={a}, b={b}); please report it")
        res.status, res.witness = "counterexample", w
    res.seconds = time.perf_counter() - t0
    return res


def _dyadic(x: Fraction, bits: int, up: bool) -> Fraction:
    """x > 0 rounded to ``bits`` significant bits (up or down), a short dyadic threshold."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    sc = Fraction(2) ** (bits - 1 - e)
    m = x * sc
    m_int = math.ceil(m) if up else math.floor(m)
    while m_int >= (1 << bits):
        sc /= 2
        m = x * sc
        m_int = math.ceil(m) if up else math.floor(m)
    return Fraction(m_int) / sc


def _between(lo: Fraction, hi: Fraction) -> Fraction | None:
    """A short dyadic strictly between lo and hi near their geometric mean, or None."""
    mid = Fraction(math.sqrt(float(lo) * float(hi))) if lo > 0 else hi / 16
    for bits in (4, 8, 16, 32):
        t = _dyadic(mid, bits, True)
        if lo < t < hi:
            return t
    return None


def search_worst(algo: str, arch: str, K: int, dom: Domain, relative: bool = True, solver: str = "auto",
                 per_query: float = 20.0, budget: float = 60.0, max_queries: int = 14,
                 tolerance: Fraction = Fraction(1, 8)) -> WorstResult:
    """Search the largest error by iterative tightening.

    Each query asks for an input whose error exceeds a threshold t.  A sat
    answer is replayed in the simulator and raises the best error found; the
    next t is 4x the best (while no bound is known) or the geometric mean of
    the best and the lower of the bound and the lowest threshold a query
    timed out on.  An unsat answer proves "error <= t" on the whole domain and
    becomes the bound.  Stops when bound <= best (1 + tolerance), after three
    timeouts, or when the budget is spent.
    """
    algo = canonical(algo)
    p = _params(algo, arch)
    t0 = time.perf_counter()
    prob = make_problem(K, dom)
    et = error_terms(prob, scheme_term(algo, p, prob))
    dom_c = And(prob.constraint, symmetry(prob, [algo], p))
    res = WorstResult(algo, arch, K, dom, relative, None, None)
    if relative:
        t = Fraction(1, 1 << 24)
    else:
        hi = FP32.to_fraction(dom.hi_pattern)
        assert isinstance(hi, Fraction)  # the domain is finite
        t = _dyadic(Fraction(1, 1 << 24) * hi ** 2, 4, True)
    best: Fraction | None = None
    ceiling: Fraction | None = None  # the lowest threshold a query timed out on
    timeouts = 0
    while len(res.queries) < max_queries:
        left = budget - (time.perf_counter() - t0)
        if left <= 0.5:
            res.stopped = "budget spent"
            break
        ans = solve(And(dom_c, exceeds(et, t, relative)), prob.symbols, solver, min(per_query, left))
        res.queries.append(Query(t, ans.status, ans.seconds))
        if ans.status == "sat":
            a, b = _model_inputs(prob, ans.model)
            w = replay([algo], p, a, b, relative)
            e = w.errors[algo]
            if not e > t:
                raise TcsmtError(f"internal error: solver input has error {e} <= {t} in the simulator "
                                 f"(a={a}, b={b}); please report it")
            if isinstance(e, float):  # a non-finite result: nothing larger to find
                res.witness, res.stopped = w, "non-finite result found"
                break
            if best is None or e > best:
                best, res.witness = e, w
        elif ans.status == "unsat":
            res.bound = t if res.bound is None else min(res.bound, t)
        else:
            timeouts += 1
            ceiling = t if ceiling is None else min(ceiling, t)
            if best is None or timeouts >= 3:
                res.stopped = f"{timeouts} solver timeouts of {per_query:g} s"
                break
        if best is not None and res.bound is not None and res.bound <= best * (1 + tolerance):
            res.stopped = "bound within tolerance of the best error"
            break
        if best is None:  # only unsat answers so far: look lower for a witness
            nxt = _dyadic(t / 256, 4, False) if t > Fraction(1, 1 << 100) else None
        else:
            top = min(x for x in (res.bound, ceiling) if x is not None) if (res.bound or ceiling) else None
            nxt = _dyadic(best * 4, 4, True) if top is None else _between(best, top)
        if nxt is None:
            res.stopped = "no threshold left between best and bound" if res.bound else "threshold range exhausted"
            break
        t = nxt
    else:
        res.stopped = f"{max_queries} queries"
    res.seconds = time.perf_counter() - t0
    return res


def compare(algo1: str, algo2: str, arch: str, K: int, dom: Domain, solver: str = "auto",
            timeout: float = 60.0) -> CompareResult:
    """Find inputs where algo1's absolute error exceeds algo2's, or prove there are none."""
    a1, a2 = canonical(algo1), canonical(algo2)
    if a1 == a2:
        raise TcsmtError("--compare needs two different algorithms")
    p1, p2 = _params(a1, arch), _params(a2, arch)
    t0 = time.perf_counter()
    prob = make_problem(K, dom)
    e1 = error_terms(prob, scheme_term(a1, p1, prob))
    e2 = error_terms(prob, scheme_term(a2, p2, prob))
    sym = symmetry(prob, [a1, a2], p1 or p2)
    ans = solve(And(prob.constraint, sym, worse(e1, e2)), prob.symbols, solver, timeout)
    res = CompareResult(a1, a2, arch, K, dom, "timeout", None, 0.0)
    if ans.status == "unsat":
        res.status = "impossible"
    elif ans.status == "sat":
        a, b = _model_inputs(prob, ans.model)
        p = p1 or p2
        w = replay([a1, a2, "fp32"], p, a, b, relative=False)
        if not w.errors[a1] > w.errors[a2]:
            raise TcsmtError(f"internal error: solver input does not make {a1} worse than {a2} in the "
                             f"simulator (a={a}, b={b}); please report it")
        res.status, res.witness = "found", w
    res.seconds = time.perf_counter() - t0
    return res


# -------------------------------------------------------------- statistics
@dataclass
class Stats:
    """Error distribution of one algorithm on one architecture."""

    algo: str
    arch: str
    n: int
    median: float
    p95: float
    max: float
    errors: np.ndarray
    seconds: float


def stats(arch: str, algos: Sequence[str], K: int, n: int, dom: Domain, dist: str = "loguniform",
          relative: bool = True, seed: int = 0) -> list[Stats]:
    """Errors of each algorithm on the same n random dot products of length K (simulator)."""
    if n < 1:
        raise TcsmtError("--n must be at least 1")
    if K < 1:
        raise TcsmtError("--k must be at least 1")
    rng = np.random.default_rng(seed)
    a, b = random_inputs(rng, n, K, dom, dist)
    out = []
    for algo in algos:
        algo = canonical(algo)
        p = _params(algo, arch)
        t0 = time.perf_counter()
        d = simulate_scheme(algo, p, a, b)
        errs = errors_fp64(d, a, b, relative)
        out.append(Stats(algo, arch, n, float(np.median(errs)), float(np.percentile(errs, 95)),
                         float(np.max(errs)), errs, time.perf_counter() - t0))
    return out


def write_plot(results: Sequence[Stats], path: str | files.Output, relative: bool, force: bool = False) -> str:
    """Histogram of log2 errors per algorithm/arch; returns a message (missing matplotlib included).

    ``path`` is a file name (claimed here; replaced only with ``force``, and then only a regular file)
    or an output already claimed with :func:`tcsmt.files.output`.  The format follows the suffix
    (png without one); the file is written atomically.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (pip install 'tcsmt[plot]')"
    out = path if isinstance(path, files.Output) else files.output(path, force)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for s in results:
        e = s.errors[np.isfinite(s.errors) & (s.errors > 0)]
        if e.size:
            ax.hist(np.log2(e), bins=80, histtype="step", label=f"{s.arch} {s.algo}")
    ax.set_xlabel("log2 " + ("relative" if relative else "absolute") + " error")
    ax.set_ylabel("count")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fmt = out.path.suffix[1:].lower() or "png"
    try:
        out.write_with(lambda fh: fig.savefig(fh, format=fmt))
    finally:
        plt.close(fig)
    return f"plot written to {out.path}"


__all__ = [
    "ALGOS", "COMPARE_RANGES", "DEFAULT_K", "DEFAULT_RANGE", "BoundResult", "CompareResult", "Domain", "Stats",
    "Witness", "WorstResult", "compare", "error_of", "error_terms", "errors_fp64", "exact_dot", "fp16_paths",
    "make_problem", "model_for", "output_pattern", "parse_range", "prove_bound", "random_inputs", "replay",
    "scheme_term", "search_worst", "simulate_scheme", "stats", "write_plot",
]
