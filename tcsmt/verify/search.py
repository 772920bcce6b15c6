"""``tcsmt verify``'s solver searches: prove a bound, search the worst case (comparisons: :mod:`tcsmt.verify.compare`).

Every solver input is replayed in the simulator (:func:`tcsmt.verify.results.replay`) before it is
reported; an input whose replay disagrees with the solver's claim is an internal error.
"""
from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
from pysmt.shortcuts import And

from tcsmt.arith.formats import FP32
from tcsmt.arith.params import ModelParams
from tcsmt.arith.values import format_value
from tcsmt.errors import InternalError, TcsmtError
from tcsmt.solve.solvers import solve
from tcsmt.verify.absolute import compose_abs
from tcsmt.verify.domain import Domain
from tcsmt.verify.evaluate import errors_fp64, params_for, random_inputs, simulate_scheme
from tcsmt.verify.proof import compose
from tcsmt.verify.results import BoundResult, Query, Witness, WorstResult, _model_inputs, replay
from tcsmt.verify.schemes import kblocks, scheme_key
from tcsmt.verify.smt import error_terms, exceeds, make_problem, scheme_term, symmetry


def check_eps(eps: Fraction) -> Fraction:
    if eps <= 0:
        raise TcsmtError(f"--bound must be positive (got {format_value(eps)})")
    return eps


def prove_bound(algo: str, arch: str, K: int, dom: Domain, eps: Fraction, relative: bool = True,
                solver: str = "auto", timeout: float = 60.0) -> BoundResult:
    """Prove error <= eps on the whole domain (unsat) or return a replayed counterexample."""
    algo = scheme_key(algo)
    check_eps(eps)
    p = params_for(algo, arch)
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
            raise InternalError(f"solver counterexample has error {w.errors[algo]} <= {eps} "
                             f"in the simulator (a={a}, b={b})")
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


#: significands of the deterministic simulator candidates (ties and near-ties of the fp16 / bf16 /
#: tf32 splits, their residuals' ties, and the binade's ends; 1 + 2^-11 - 2^-21 at 2^-14 puts
#: Ootomo-Yokota's scaled residual 2^11 (x - x_h) just below fp16's normal range)
CANDIDATE_SIGNIFICANDS = (Fraction(1), 1 + Fraction(1, 1 << 11), 1 + Fraction(3, 1 << 12),
                          1 + Fraction(1, 1 << 11) + Fraction(1, 1 << 23),
                          1 + Fraction(1, 1 << 11) - Fraction(1, 1 << 21), 1 + Fraction(1, 1 << 8),
                          1 + Fraction(1, 1 << 8) + Fraction(1, 1 << 16), 2 - Fraction(1, 1 << 23),
                          1 + Fraction(1, 1 << 10) + Fraction(1, 1 << 11) + Fraction(1, 1 << 22))


def tie_rows(K: int, dom: Domain) -> tuple[np.ndarray, np.ndarray]:
    """Every row with all a_k = x, b_k = y for x, y in {2^e m: e over the domain's exponents, m in
    CANDIDATE_SIGNIFICANDS} within the domain (fp32 patterns, shape (n, K); n = 0 where none lies in it)."""
    lo_e, hi_e = dom.exp_range
    vals = sorted({FP32.from_fraction(Fraction(2) ** e * m) for e in range(lo_e, hi_e + 1)
                   for m in CANDIDATE_SIGNIFICANDS
                   if dom.lo <= Fraction(2) ** e * m <= dom.hi})
    v = np.array(vals, dtype=np.uint32)
    xa = np.repeat(v, len(v))
    xb = np.tile(v, len(v))
    return np.repeat(xa[:, None], K, axis=1), np.repeat(xb[:, None], K, axis=1)


#: significands of :func:`wrap_rows`: the last k-block's equal factors, and the sum C the earlier ones leave
WRAP_FACTORS = (Fraction(3, 2), Fraction(7, 4), Fraction(15, 8), Fraction(31, 16))
WRAP_SUMS = tuple(1 + Fraction(j, 16) for j in range(16))


def wrap_rows(K: int, p: ModelParams | None, dom: Domain) -> tuple[np.ndarray, np.ndarray]:
    """Rows that drive the last k-block's sum as high as it goes: every a_k = b_k = x in that k-block, and the
    earlier k-blocks' products leaving C = t exactly (in the k-block before the last a_k = t / m, b_k = 1 for m
    of them, m a power of two, the rest LO; every earlier k-block pairs +LO, -LO times b_k = 1, summing to 0);
    x in WRAP_FACTORS, t in WRAP_SUMS times 2^-1, 1, 2 (where every value lies in the domain).  A block whose
    carry bits can bind (Volta: 3, with 4 products and C) wraps on some of these: a random row never gets every
    addend to the largest exponent.  Empty with one k-block."""
    blocks = kblocks(K, p) if p is not None else [(0, K)]
    if len(blocks) < 2:
        return np.zeros((0, K), dtype=np.uint32), np.zeros((0, K), dtype=np.uint32)
    k_prev, k_last = blocks[-2][0], blocks[-1][0]
    m = 1 << ((k_last - k_prev).bit_length() - 1)  # t / m in m entries of the k-block before the last
    lo = FP32.to_fraction(dom.lo_pattern)
    assert isinstance(lo, Fraction)
    rows_a, rows_b = [], []
    for x in WRAP_FACTORS:
        for t in WRAP_SUMS:
            for s in (Fraction(1, 2), Fraction(1), Fraction(2)):
                v = t * s / m
                if not all(dom.lo <= y <= dom.hi for y in (x, v, Fraction(1))):
                    continue
                a: list[Fraction] = []
                b: list[Fraction] = []
                for k0, k1 in blocks[:-1]:  # earlier k-blocks: pairs +1, -1 (sum 0); the one before the last: t
                    n = k1 - k0
                    if k0 == k_prev:
                        a += [v] * m + [lo] * (n - m)
                        b += [Fraction(1)] * m + [lo] * (n - m)
                    else:
                        a += [lo, -lo] * (n // 2) + [lo] * (n % 2)
                        b += [Fraction(1)] * (n - n % 2) + [lo] * (n % 2)
                a += [x] * (K - k_last)
                b += [x] * (K - k_last)
                rows_a.append([FP32.from_fraction(y) for y in a])
                rows_b.append([FP32.from_fraction(y) for y in b])
    return np.array(rows_a, dtype=np.uint32).reshape(-1, K), np.array(rows_b, dtype=np.uint32).reshape(-1, K)


def simulator_candidates(algo: str, p: ModelParams | None, K: int, dom: Domain, relative: bool,
                         n_random: int = 4096, seed: int = 0) -> Witness | None:
    """The worst of a fixed set of inputs, by the simulator (deterministic: no solver, no time limit).

    The set: ``n_random`` log-uniform rows (seed ``seed``), the rows of :func:`tie_rows` and of :func:`wrap_rows`.
    Ties in the error keep the first row.
    """
    rng = np.random.default_rng(seed)
    a, b = random_inputs(rng, n_random, K, dom, "loguniform")
    ta, tb = tie_rows(K, dom)
    wa, wb = wrap_rows(K, p, dom)
    a = np.concatenate([a, ta, wa])
    b = np.concatenate([b, tb, wb])
    d = simulate_scheme(algo, p, a, b)
    errs = errors_fp64(d, a, b, relative)
    if not np.any(errs > 0):
        return None
    i = int(np.argmax(errs))
    return replay([algo], p, [int(x) for x in a[i]], [int(x) for x in b[i]], relative)


#: a relative error this large is "unbounded": the result has lost A.B (Volta's carry wrap gives D = +0 for A.B = 16
#: at K = 8; with LO = 0 inputs below every format's range give D = 0)
UNBOUNDED = Fraction(1, 2)


def largest_bounded_k(algo: str, arch: str, p: ModelParams, K: int, dom: Domain, timeout: float
                      ) -> tuple[int, Fraction] | None:
    """The largest K' < K with a composed relative bound below UNBOUNDED, and that bound (None: no K' has one)."""
    for k in range(K - 1, 0, -1):
        pr = compose(algo, arch, p, k, dom, timeout)
        if pr.bound is not None and pr.bound < UNBOUNDED:
            return k, pr.bound
    return None


#: a composed bound at most this factor above the worst input found ends the search (the README's target: within 2x)
COMPOSED_ENOUGH = 2
#: the least time limit of one lemma query of a composed proof (they answer in seconds; a generous limit
#: keeps the answer independent of the machine's load)
LEMMA_TIMEOUT = 60.0


def refine_witness(algo: str, p: ModelParams | None, K: int, dom: Domain, relative: bool, start: Witness,
                   rounds: int = 60, rows: int = 4096, seed: int = 0) -> Witness:
    """A worse input near ``start`` by a seeded local search in the simulator (deterministic: the same
    result on any machine).  Each round mutates ``rows`` copies of the best row so far (one fraction bit
    of one a_k and of one b_k flipped; in 30 % of the rows an exponent moved by -3..3), clipped into the
    domain, and keeps the worst; the result is replayed exactly."""
    rng = np.random.default_rng(seed)
    best_a = np.array(start.a, dtype=np.int64)
    best_b = np.array(start.b, dtype=np.int64)
    e0 = start.errors[algo]
    best = float(e0)
    idx = np.arange(rows)
    for _ in range(rounds):
        pair = []
        for row in (best_a, best_b):
            m = np.tile(row, (rows, 1))
            k = rng.integers(0, K, rows)
            m[idx, k] ^= np.left_shift(1, rng.integers(0, 23, rows))
            k2 = rng.integers(0, K, rows)
            step = np.where(rng.random(rows) < 0.3, rng.integers(-3, 4, rows), 0)
            m[idx, k2] += np.left_shift(step, 23)
            mag = np.clip(m & 0x7FFFFFFF, dom.lo_pattern, dom.hi_pattern)
            pair.append(((m & 0x80000000) | mag).astype(np.uint32))
        d = simulate_scheme(algo, p, pair[0], pair[1])
        errs = errors_fp64(d, pair[0], pair[1], relative)
        i = int(np.argmax(errs))
        if errs[i] > best:
            best, best_a, best_b = float(errs[i]), pair[0][i].astype(np.int64), pair[1][i].astype(np.int64)
    if best <= float(e0):
        return start
    w = replay([algo], p, [int(x) for x in best_a], [int(x) for x in best_b], relative)
    return w if w.errors[algo] > e0 else start


def refine_abs(algo: str, p: ModelParams | None, K: int, dom: Domain, start: Witness, rounds: int = 100,
               rows: int = 2048, keep: int = 32, seed: int = 0) -> Witness:
    """A larger absolute error by a seeded population search in the simulator (deterministic).  The absolute error
    is largest near the top of the domain, where it is the sum of every stage's loss, which a single bit flip
    rarely moves together: the population starts from ``start`` and 4096 rows with every |a_k|, |b_k| in the
    binade of the largest value below HI (significands in [1.5, 2)), keeps the ``keep`` largest errors, and each round flips one
    or two fraction bits of one a_k and one b_k of ``rows`` copies of them (in 10 % of the rows an exponent
    moves by -1..1).  The result is replayed exactly."""
    rng = np.random.default_rng(seed)
    top_e = (dom.hi_pattern - 1) >> 23  # the biased exponent of the largest value below HI
    sig = rng.integers(3 << 22, 1 << 24, size=(2, 4096, K)).astype(np.int64)
    top = ((top_e << 23) | (sig & 0x7FFFFF)).astype(np.int64)
    top = np.clip(top, dom.lo_pattern, dom.hi_pattern)
    pop_a = np.concatenate([np.array([start.a], dtype=np.int64), top[0]])
    pop_b = np.concatenate([np.array([start.b], dtype=np.int64), top[1]])

    def errs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a32, b32 = a.astype(np.uint32), b.astype(np.uint32)
        d = simulate_scheme(algo, p, a32, b32)
        prods = a32.view(np.float32).astype(np.float64) * b32.view(np.float32).astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            e = np.abs(d.view(np.float32).astype(np.float64) - prods.sum(axis=1))
        return np.where(np.isnan(e), np.inf, e)

    pop_e = errs(pop_a, pop_b)
    order = np.argsort(-pop_e, kind="stable")[:keep]
    pop_a, pop_b, pop_e = pop_a[order], pop_b[order], pop_e[order]
    idx = np.arange(rows)
    for _ in range(rounds):
        pick = rng.integers(0, len(pop_a), rows)
        new = []
        for src in (pop_a, pop_b):
            m = src[pick].copy()
            for _ in range(2):
                k = rng.integers(0, K, rows)
                flip = np.where(rng.random(rows) < 0.7, np.left_shift(1, rng.integers(0, 23, rows)), 0)
                m[idx, k] ^= flip
            k = rng.integers(0, K, rows)
            m[idx, k] += np.left_shift(np.where(rng.random(rows) < 0.1, rng.integers(-1, 2, rows), 0), 23)
            mag = np.clip(m & 0x7FFFFFFF, dom.lo_pattern, dom.hi_pattern)
            new.append((m & 0x80000000) | mag)
        e = errs(new[0], new[1])
        all_a, all_b = np.concatenate([pop_a, new[0]]), np.concatenate([pop_b, new[1]])
        all_e = np.concatenate([pop_e, e])
        order = np.argsort(-all_e, kind="stable")[:keep]
        pop_a, pop_b, pop_e = all_a[order], all_b[order], all_e[order]
    for i in range(len(pop_a)):  # the best row whose exact error beats the start
        w = replay([algo], p, [int(x) for x in pop_a[i]], [int(x) for x in pop_b[i]], False)
        if w.errors[algo] > start.errors[algo]:
            return w
        if i >= 3:
            break
    return start


def search_worst(algo: str, arch: str, K: int, dom: Domain, relative: bool = True, solver: str = "auto",
                 per_query: float = 20.0, budget: float | None = None, max_queries: int = 14,
                 tolerance: Fraction = Fraction(1, 8), prove_first: bool = True) -> WorstResult:
    """Search the largest error by iterative tightening.

    First, for the relative error of a scheme on tensor cores, a composed proof
    (:func:`tcsmt.verify.proof.compose`, small solver lemmas, at least LEMMA_TIMEOUT seconds each): where
    its bound is more than COMPOSED_ENOUGH times the worst simulator candidate, the candidate is refined by
    :func:`refine_witness`; where it is then within that factor the search ends there; otherwise the bound
    is the search's first proven bound (``prove_first=False`` skips it).

    The search starts from the worst of :func:`simulator_candidates` (its first threshold is that
    error times 1 + tolerance).  Each query asks for an input whose error exceeds a threshold t.  A sat
    answer is replayed in the simulator and raises the best error found; the
    next t is 4x the best (while no bound is known) or the geometric mean of
    the best and the bound.  An unsat answer proves "error <= t" on the whole
    domain and becomes the bound.  Stops when bound <= best (1 + tolerance),
    after ``max_queries``, or at the first query without an answer within
    ``per_query`` seconds (a time limit: the result is then incomplete).

    The thresholds depend only on the answers, never on elapsed time, so a
    search that hits no time limit gives the same result on any machine load.
    ``budget`` (seconds per model, None by default) adds a wall-clock limit:
    where it stops the search, the result depends on the machine's speed.
    """
    algo = scheme_key(algo)
    p = params_for(algo, arch)
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
    start = simulator_candidates(algo, p, K, dom, relative)
    e0 = start.errors[algo] if start is not None else None
    if start is not None and isinstance(e0, Fraction):
        best, res.witness = e0, start
        t = _dyadic(e0 * (1 + tolerance), 4, True)
    limit = max(per_query, LEMMA_TIMEOUT)
    if p is not None and prove_first:
        res.proof = (compose(algo, arch, p, K, dom, limit) if relative else compose_abs(algo, arch, p, K, dom, limit))
    if relative and best is not None and best >= UNBOUNDED:
        res.bound = res.proof.bound if res.proof is not None else None
        res.unbounded = True
        res.stopped = f"unbounded: an input reaches relative error {float(best):.3g} >= {UNBOUNDED}"
        if p is not None and prove_first:
            res.bounded_k = largest_bounded_k(algo, arch, p, K, dom, limit)
        res.seconds = time.perf_counter() - t0
        return res
    if res.proof is not None and res.proof.bound is not None:
        res.bound = res.proof.bound
        if res.witness is not None and best is not None and res.bound > COMPOSED_ENOUGH * best:
            res.witness = (refine_witness(algo, p, K, dom, relative, res.witness) if relative
                           else refine_abs(algo, p, K, dom, res.witness))
            e1 = res.witness.errors[algo]
            if isinstance(e1, Fraction):
                best = e1
        if best is not None and res.bound <= COMPOSED_ENOUGH * best:
            res.stopped = f"composed proof within {COMPOSED_ENOUGH}x of the worst input found"
            res.seconds = time.perf_counter() - t0
            return res
        if best is not None:
            nxt = _between(best, res.bound)
            if nxt is None:
                res.stopped = "no threshold left between best and bound"
                res.seconds = time.perf_counter() - t0
                return res
            t = nxt
    while len(res.queries) < max_queries:
        left = per_query if budget is None else budget - (time.perf_counter() - t0)
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
                raise InternalError(f"solver input has error {e} <= {t} in the simulator "
                                 f"(a={a}, b={b})")
            if isinstance(e, float):  # a non-finite result: nothing larger to find
                res.witness, res.stopped = w, "non-finite result found"
                break
            if best is None or e > best:
                best, res.witness = e, w
        elif ans.status == "unsat":
            res.bound = t if res.bound is None else min(res.bound, t)
        else:
            res.stopped = f"solver timeouts: no answer within {per_query:g} s at threshold {format_value(t)}"
            break
        if best is not None and res.bound is not None and res.bound <= best * (1 + tolerance):
            res.stopped = "bound within tolerance of the best error"
            break
        if best is None:  # only unsat answers so far: look lower for a witness
            nxt = _dyadic(t / 256, 4, False) if t > Fraction(1, 1 << 100) else None
        else:
            nxt = _dyadic(best * 4, 4, True) if res.bound is None else _between(best, res.bound)
        if nxt is None:
            res.stopped = "no threshold left between best and bound" if res.bound else "threshold range exhausted"
            break
        t = nxt
    else:
        res.stopped = f"{max_queries} queries"
    res.seconds = time.perf_counter() - t0
    return res
