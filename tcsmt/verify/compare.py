"""``tcsmt verify --compare``: an input where one scheme's absolute error exceeds another's, or a proof that none exists.

Three stages, each answer replayed or proven:

1. **Simulator search** (:func:`search_rows`, deterministic: the same rows on every machine).  Both schemes run
   on fixed families of rows (:func:`candidate_rows`), then a seeded local search mutates the rows closest to
   an answer; a row where the first scheme's error is larger (checked exactly) is the answer.  The families
   reach what uniform sampling almost never does: ties of the splits, products that cancel, and rows whose
   split errors cancel in the exact sum, so that a scheme that loses its residuals is exact there.  Where the
   local search ends without an answer, rounds of rows built at the accumulator's rounding decisions
   (:mod:`tcsmt.verify.rounding_rows`: exact sums near an fp32 rounding midpoint, and factored rows whose exact
   sum is 0 while their pieces differ).
2. **Equal results** (only where every simulated row gave both schemes the same result): where one scheme's chain
   is the other's with extra instructions whose pieces are zero on the domain, a proof from small lemmas
   (:mod:`tcsmt.verify.chain_equal`); where the two multiply the same pieces in the same order on two paths, the
   proof by decoding (:func:`tcsmt.verify.chain_equal.path_equal`); otherwise one solver query "the two results differ" (unsat: neither error
   can exceed the other), which has no exact products in it and answers where the comparison query does not.
3. **The comparison query** (:func:`tcsmt.verify.smt.worse`), for what is left.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction
from functools import partial

import numpy as np
from pysmt.shortcuts import And, Equals, Not, Or

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import FP32, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.errors import InternalError, TcsmtError
from tcsmt.solve.solvers import solve
from tcsmt.verify.chain_equal import LemmaLine, extension_equal, path_equal, zero_facts, zero_pieces
from tcsmt.verify.domain import Domain
from tcsmt.verify.evaluate import params_for, random_inputs, simulate_scheme
from tcsmt.verify.pieces import chain_scheme
from tcsmt.verify.results import CompareResult, Witness, _model_inputs, replay
from tcsmt.verify.rounding_rows import factored_rows, midpoint_rows, short_tuned_rows, tuned_rows
from tcsmt.verify.row_cache import RowCache
from tcsmt.verify.schemes import scheme_key
from tcsmt.verify.search import tie_rows
from tcsmt.verify.smt import SB, error_terms, make_problem, output_pattern, scheme_term, symmetry, worse

SIGN = np.int64(0x80000000)
MAG = np.int64(0x7FFFFFFF)


@dataclass
class _Run:
    """Both schemes on rows of inputs: results and fp64 errors (the ranking only; answers are checked exactly)."""

    a: np.ndarray
    b: np.ndarray
    d1: np.ndarray
    d2: np.ndarray
    score: np.ndarray
    """(err1 - err2) / sum|a_k b_k| in fp64: positive rows are candidate answers"""


def _f64(x: np.ndarray) -> np.ndarray:
    return x.view(np.float32).astype(np.float64)


def _run(algos: tuple[str, str], ps: tuple[ModelParams | None, ModelParams | None], a: np.ndarray,
         b: np.ndarray, d: tuple[np.ndarray, np.ndarray] | None = None) -> _Run:
    """Both schemes on the rows (``d``: their results there, where already simulated)."""
    a, b = a.astype(np.uint32), b.astype(np.uint32)
    d1, d2 = d if d is not None else (simulate_scheme(algos[0], ps[0], a, b), simulate_scheme(algos[1], ps[1], a, b))
    prods = _f64(a) * _f64(b)
    exact = prods.sum(axis=1)
    norm = np.abs(prods).sum(axis=1)
    with np.errstate(invalid="ignore", over="ignore"):
        e1, e2 = np.abs(_f64(d1) - exact), np.abs(_f64(d2) - exact)
        score = np.where(norm > 0, (e1 - e2) / np.where(norm > 0, norm, 1), 0.0)
    score = np.where(np.isnan(score), np.where(np.isfinite(e2), np.inf, 0.0), score)
    score = np.where(d1 == d2, -np.inf, score)  # equal results: equal errors
    return _Run(a, b, d1, d2, score)


def _clip(m: np.ndarray, dom: Domain) -> np.ndarray:
    """Patterns with their magnitudes clipped into the domain (signs kept)."""
    mag = np.clip(m & MAG, dom.lo_pattern, dom.hi_pattern)
    return ((m & SIGN) | mag).astype(np.uint32)


def _short(x: np.ndarray, bits: int) -> np.ndarray:
    """fp32 patterns with their significands cut to ``bits`` bits (values a narrow piece format holds exactly,
    within its exponent range)."""
    drop = 23 - (bits - 1)
    return (x.astype(np.int64) & ~np.int64((1 << drop) - 1)).astype(np.uint32)


def candidate_rows(K: int, dom: Domain, n: int = 1024, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Fixed rows (seeded): 2n log-uniform random rows; n of the tie rows of
    :func:`tcsmt.verify.search.tie_rows` (all of them where there are fewer); the rows of :func:`_subnormal_ties`;
    n cancelling rows (the last
    product the negated first with a moved by a few units, and in half of them b moved too, in a quarter b_0
    given a_0's significand so that the two moves cancel to first order: the exact sum is small against the
    products); and 2n transfer rows: every a_k one short value (11 or 8 significant bits, or fp16's grid),
    every b_k a short value plus a small part d_k, the d_k summing to a few units (so the exact sum is nearly
    the short values', in half of them exactly, and a scheme that drops the small parts is exact there), half
    with a and b swapped."""
    rng = np.random.default_rng(seed)
    ta, tb = tie_rows(K, dom)
    if len(ta) > n:
        pick = np.sort(rng.choice(len(ta), n, replace=False))
        ta, tb = ta[pick], tb[pick]
    parts = [random_inputs(rng, 2 * n, K, dom, "loguniform"), (ta, tb), _subnormal_ties(K, dom)]
    ca, cb = random_inputs(rng, n, K, dom, "loguniform")
    if K >= 2:
        same = rng.random(n) < 0.25
        cb[:, 0] = np.where(same, _clip((cb[:, 0].astype(np.int64) & ~np.int64(0x7FFFFF))
                                        | (ca[:, 0].astype(np.int64) & 0x7FFFFF), dom), cb[:, 0])
        first, bfirst = ca[:, 0].astype(np.int64), cb[:, 0].astype(np.int64)
        j = rng.integers(-64, 65, n)
        step = np.where(rng.random(n) < 0.5, j, j << rng.integers(0, 20, n))
        ca[:, -1] = _clip((~first & SIGN) | ((first & MAG) + step), dom)
        move_b = np.where(same, -j, np.where(rng.random(n) < 0.5, rng.integers(-64, 65, n), 0))
        cb[:, -1] = _clip(bfirst + move_b, dom)
        parts.append((ca, cb))
        for swap in (False, True):
            xa, xb = _transfer(rng, n, K, dom)
            parts.append((xb, xa) if swap else (xa, xb))
    a = np.concatenate([p[0] for p in parts]).astype(np.uint32)
    b = np.concatenate([p[1] for p in parts]).astype(np.uint32)
    return a, b


def _subnormal_ties(K: int, dom: Domain) -> tuple[np.ndarray, np.ndarray]:
    """Rows with every a_k = x, b_k = y (and swapped) for x near a midpoint of fp16's subnormal grid, (j + 1/2) 2^-24
    for j in 0..3 and 1020..1023, moved by -2..2 fp32 units (fp16(x) rounds up or down there, and the residual
    is half a unit: Ootomo-Yokota's scaled residual 2^11 (x - x_h) is then fp16's 2^-14 while x_h may be flushed),
    y such a value or a power of two of the domain."""
    fmt = get_format("fp16")
    unit = Fraction(2) ** (fmt.emin - fmt.frac_bits)
    xs: set[int] = set()
    for j in (0, 1, 2, 3, 1020, 1021, 1022, 1023):
        mid = FP32.from_fraction((j + Fraction(1, 2)) * unit)
        xs.update(mid + d for d in range(-2, 3))
    xs = {x for x in xs if dom.lo_pattern <= x <= dom.hi_pattern}
    lo_e, hi_e = dom.exp_range
    pows = {FP32.from_fraction(Fraction(2) ** e) for e in range(max(lo_e, -126), hi_e + 1)}
    ys = sorted(xs | {y for y in pows if dom.lo_pattern <= y <= dom.hi_pattern})
    pairs = [(x, y) for x in sorted(xs) for y in ys]
    pairs += [(y, x) for x, y in pairs]
    a = np.array([[x] * K for x, _ in pairs], dtype=np.uint32).reshape(-1, K)
    b = np.array([[y] * K for _, y in pairs], dtype=np.uint32).reshape(-1, K)
    return a, b


def _fp16_grid(x: np.ndarray, lo: float) -> np.ndarray:
    """fp32 patterns rounded to fp16 values (its subnormal grid 2^-24 included), at least ``lo`` in magnitude."""
    v = np.clip(np.abs(_f64(x)), lo, 65504.0).astype(np.float16).astype(np.float32)
    v = np.where(v >= lo, v, np.float32(lo)) * np.where(_f64(x) < 0, -1, 1).astype(np.float32)
    return v.astype(np.float32).view(np.uint32)


def _transfer(rng: np.random.Generator, n: int, K: int, dom: Domain) -> tuple[np.ndarray, np.ndarray]:
    """Transfer rows (see :func:`candidate_rows`)."""
    lo = max(float(FP32.to_fraction(dom.lo_pattern)), 2.0 ** -126)
    x, _ = random_inputs(rng, n, 1, dom, "loguniform")
    y, _ = random_inputs(rng, n, K, dom, "loguniform")
    kind = rng.integers(0, 3, n)
    xs = np.where(kind == 0, _short(x[:, 0], 11), np.where(kind == 1, _short(x[:, 0], 8), _fp16_grid(x[:, 0], lo)))
    ys = np.where(kind[:, None] == 0, _short(y, 11), np.where(kind[:, None] == 1, _short(y, 8), _fp16_grid(y, lo)))
    yv = _f64(ys)
    # small parts below the short values' last bit: |d| < 2^-12 |y| (fp16 / tf32 precision) or 2^-9 (bf16)
    scale = np.exp2(-rng.uniform(12.5, 40, (n, K)))
    d = yv * scale * rng.choice([-1.0, 1.0], (n, K))
    d[:, -1] = -d[:, :-1].sum(axis=1) if K > 1 else d[:, -1]
    b = (yv + d).astype(np.float32).view(np.uint32).astype(np.int64)
    b[:, -1] += rng.integers(-8, 9, n)  # a few units off an exact transfer
    b = np.where(np.abs(yv) > 0, b, ys.astype(np.int64))
    a = np.repeat(xs[:, None], K, axis=1).astype(np.int64)
    a = (a & MAG) | (rng.integers(0, 2, (n, K)).astype(np.int64) << 31)
    # half the rows exact: every b_k in y_0's binade, y_k on fp16's grid there, b_k = y_k + j_k units with
    # sum j_k = 0 and |j_k| below half of that grid, b_k of a_k's sign: A.B is then exactly x sum y_k, fp16(b_k) = y_k
    exact = rng.random(n) < 0.5
    if dom.hi_pattern >= FP32.from_fraction(Fraction(1, 1 << 22)):  # values on fp16's grid: at least 2^-24
        sub = Domain(max(dom.lo, Fraction(1, 1 << 22)), dom.hi, dom.text)
        xe, _ = random_inputs(rng, n, 1, sub, "loguniform")
        ye, _ = random_inputs(rng, n, K, sub, "loguniform")
        xs, ys = np.where(exact, xe[:, 0], xs), np.where(exact[:, None], ye, ys)
    binade = (ys[:, :1].astype(np.int64) >> 23) << 23
    e = (binade >> 23) - 127
    drop = np.clip(-1 - e, 13, 22)  # fraction bits below fp16's grid there: 13, or more below 2^-14
    y_same = binade | (ys.astype(np.int64) & 0x7FFFFF & ~((np.int64(1) << drop) - 1))
    j = rng.integers(-(1 << 10), 1 << 10, (n, K)) << (drop - 12)  # below half of fp16's grid
    j[:, -1] = -j[:, :-1].sum(axis=1) if K > 1 else 0
    half = (np.int64(1) << (drop - 1)) - 1
    j = np.clip(j, -half, half)
    b_exact = (y_same + j) | (a & SIGN)
    x_drop = np.clip(-1 - ((xs.astype(np.int64) >> 23) - 127), 13, 22)  # x on fp16's grid too
    x_grid = xs.astype(np.int64) & ~((np.int64(1) << x_drop) - 1)
    a_exact = np.repeat(x_grid[:, None], K, axis=1) | (a & SIGN)
    return (_clip(np.where(exact[:, None], a_exact, a), dom),
            _clip(np.where(exact[:, None], b_exact, b), dom))


def _mutate(rng: np.random.Generator, a: np.ndarray, b: np.ndarray, dom: Domain, rows: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` mutations of the given rows (each a random one of them): one fraction bit of one a_k and one
    b_k flipped, in 30 % of the rows an exponent moved by -3..3, in 10 % one entry copied onto another."""
    K = a.shape[1]
    pick = rng.integers(0, len(a), rows)
    idx = np.arange(rows)
    out = []
    for src in (a, b):
        m = src[pick].astype(np.int64)
        k = rng.integers(0, K, rows)
        m[idx, k] ^= np.left_shift(1, rng.integers(0, 23, rows))
        k2 = rng.integers(0, K, rows)
        step = np.where(rng.random(rows) < 0.3, rng.integers(-3, 4, rows), 0)
        m[idx, k2] += np.left_shift(step, 23)
        if K > 1:
            copy = rng.random(rows) < 0.1
            k3, k4 = rng.integers(0, K, rows), rng.integers(0, K, rows)
            m[idx, k4] = np.where(copy, m[idx, k3], m[idx, k4])
        out.append(_clip(m, dom))
    return out[0], out[1]


#: the local search of :func:`search_rows`: rounds, rows per round, rows kept between rounds
LOCAL_ROUNDS, LOCAL_ROWS, LOCAL_KEEP = 24, 1024, 16
#: the rounding rounds of :func:`search_rows`: rounds, midpoint rows (and as many tuned ones), factored rows per round
ROUNDING_ROUNDS, MIDPOINT_ROWS, FACTORED_ROWS = 16, 4096, 2048


def _answer(algos: tuple[str, str], ps: dict[str, ModelParams | None], run: _Run) -> Witness | None:
    """The first of the best-scoring rows whose exact replay makes algos[0] the less accurate, or None."""
    for i in np.argsort(-run.score, kind="stable")[:32]:
        if not run.score[i] > -1e-12:  # fp64 ranking: near-ties are checked exactly too
            break
        w = replay([algos[0], algos[1], "fp32"], ps, [int(x) for x in run.a[i]], [int(x) for x in run.b[i]],
                   relative=False)
        if w.errors[algos[0]] > w.errors[algos[1]]:
            return w
    return None


def search_rows(algo1: str, algo2: str, arch: str, K: int, dom: Domain, seed: int = 0,
                cache: RowCache | None = None) -> tuple[Witness | None, bool]:
    """(an input where algo1's error exceeds algo2's, or None; whether every row gave both the same result).

    The rows of :func:`candidate_rows`, then LOCAL_ROUNDS rounds of :func:`_mutate` on the LOCAL_KEEP rows of
    highest score so far (the fp64 difference of the errors over sum|a_k b_k|), then ROUNDING_ROUNDS rounds of
    :func:`tcsmt.verify.rounding_rows.midpoint_rows`, :func:`~tcsmt.verify.rounding_rows.tuned_rows`,
    :func:`~tcsmt.verify.rounding_rows.factored_rows` and :func:`~tcsmt.verify.rounding_rows.short_tuned_rows`
    (each family on its own seeded stream, so that each gives the rows it gives alone);
    deterministic.  ``cache``: the candidate rows, the rounding rounds and each scheme's results on them, shared
    with the other comparisons on this domain (:mod:`tcsmt.verify.row_cache`; the same answers, faster)."""
    algos = (scheme_key(algo1), scheme_key(algo2))
    p1, p2 = params_for(algos[0], arch), params_for(algos[1], arch)
    ps = {algos[0]: p1, algos[1]: p2, "fp32": None}
    rc = cache if cache is not None else RowCache()

    def shared(key: tuple) -> _Run:
        a, b = rc.rows[key]
        return _run(algos, (p1, p2), a, b, (rc.simulate(algos[0], p1, key), rc.simulate(algos[1], p2, key)))

    run = shared(rc.get(("candidate", K, dom, seed), partial(candidate_rows, K, dom, seed=seed)))
    same = bool(np.all(run.d1 == run.d2))
    w = _answer(algos, ps, run)
    if w is not None or same:
        return w, same
    rng = np.random.default_rng(seed + 1)
    keep = np.argsort(-run.score, kind="stable")[:LOCAL_KEEP]
    ka, kb, ks = run.a[keep], run.b[keep], run.score[keep]
    for _ in range(LOCAL_ROUNDS):
        ma, mb = _mutate(rng, ka, kb, dom, LOCAL_ROWS)
        r = _run(algos, (p1, p2), ma, mb)
        w = _answer(algos, ps, r)
        if w is not None:
            return w, False
        allA, allB = np.concatenate([ka, r.a]), np.concatenate([kb, r.b])
        allS = np.concatenate([ks, r.score])
        top = np.argsort(-allS, kind="stable")[:LOCAL_KEEP]
        ka, kb, ks = allA[top], allB[top], allS[top]
    families = ((("midpoint", K, dom), 2, partial(midpoint_rows, n=MIDPOINT_ROWS, K=K, dom=dom)),
                (("tuned", K, dom), 3, partial(tuned_rows, n=MIDPOINT_ROWS, K=K, dom=dom)),
                (("factored", K, dom), 4, partial(factored_rows, n=FACTORED_ROWS, K=K, dom=dom)),
                (("short tuned", K, dom), 5, partial(short_tuned_rows, n=MIDPOINT_ROWS, K=K, dom=dom)))
    for i in range(ROUNDING_ROUNDS):
        for family, s, make in families:  # one stream per family
            key = rc.round_rows(family, i, seed + s, make)
            w = _answer(algos, ps, shared(key)) if len(rc.rows[key][0]) else None
            if w is not None:
                return w, False
    return None, False


#: proofs that two schemes' results are equal, by (the two schemes, arch, K, LO, HI): (equal, a model where they
#: differ or None, queries asked, the queries' lines); both directions of a comparison ask once
EQUAL: dict[tuple, tuple[bool, dict[str, int] | None, int, list[LemmaLine]]] = {}


def _equal_results(prob, algos: tuple[str, str], ps: tuple[ModelParams | None, ModelParams | None], terms: tuple,
                   sym, solver: str, timeout: float, log: list[LemmaLine]
                   ) -> tuple[bool, dict[str, int] | None, int]:
    """Whether the two result terms are equal as values (+0 = -0) on every input of the problem.  First the
    extension proof of :mod:`tcsmt.verify.chain_equal` where both schemes run on one path; otherwise the query "they
    differ" (unsat: equal), with the proven facts of :func:`zero_pieces` (each piece, as the scheme's model reads it,
    a finite zero on the whole domain) added for every input, which spares the solver the splits' rounding.
    (equal, a model where they differ, queries)."""
    asked = 0
    if ps[0] is not None and ps[0] == ps[1]:
        eq, asked = extension_equal(algos, ps[0], len(prob.a), prob.dom, solver, timeout, log)
        if eq:
            return True, None, asked
    elif ps[0] is not None and ps[1] is not None:
        eq, asked = path_equal(algos, (ps[0], ps[1]), len(prob.a), prob.dom, solver, timeout, log)
        if eq:
            return True, None, asked
    d1, d2 = terms
    differ = Not(Or(Equals(output_pattern(d1), output_pattern(d2)), And(_is_zero(d1), _is_zero(d2))))
    facts = []
    for algo, p in dict(zip(algos, ps)).items():
        keep = p.subnormal_in if p is not None else True
        zero, n = zero_pieces(algo, prob.dom, solver, timeout, keep, log)
        asked += n
        if zero:
            facts += zero_facts(chain_scheme(algo), zero, keep, prob.a + prob.b)
    ans = solve(And(prob.constraint, sym, *facts, differ), prob.symbols, solver, timeout)
    log.append(LemmaLine(f"the results of {algos[0]} and {algos[1]} differ on an input, {prob.dom.describe()}",
                         ans.status, ans.seconds))
    return ans.status == "unsat", ans.model if ans.status == "sat" else None, asked + 1


def _is_zero(d) -> object:
    """The fp32 result term is +0 or -0."""
    dec = sem.decode(SB, FP32, d)
    return SB.and_(SB.eq(dec.sig, 0), SB.not_(SB.or_(dec.nan, dec.inf)))


def compare(algo1: str, algo2: str, arch: str, K: int, dom: Domain, solver: str = "auto",
            timeout: float = 60.0, cache: RowCache | None = None) -> CompareResult:
    """Find an input where algo1's absolute error exceeds algo2's, or prove there is none (module docstring:
    the simulator search, then where both schemes gave the same result on every row a proof that they always
    do, then the comparison query).  ``timeout``: seconds for each solver query; ``cache``: rows and results shared
    with the other comparisons on ``dom`` (:func:`search_rows`)."""
    a1, a2 = scheme_key(algo1), scheme_key(algo2)
    if a1 == a2:
        raise TcsmtError("--compare needs two different algorithms")
    p1, p2 = params_for(a1, arch), params_for(a2, arch)
    ps = {a1: p1, a2: p2, "fp32": None}
    t0 = time.perf_counter()
    res = CompareResult(a1, a2, arch, K, dom, "timeout", None, 0.0)
    w, same = search_rows(a1, a2, arch, K, dom, cache=cache)
    if w is not None:
        res.status, res.witness, res.how = "found", w, "simulator search"
        res.seconds = time.perf_counter() - t0
        return res
    prob = make_problem(K, dom)
    t1, t2 = scheme_term(a1, p1, prob), scheme_term(a2, p2, prob)
    sym = symmetry(prob, [a1, a2], [p1, p2])
    if same:
        key = (frozenset((a1, a2)), arch, K, dom.lo, dom.hi)
        if key not in EQUAL:
            log: list[LemmaLine] = []
            EQUAL[key] = (*_equal_results(prob, (a1, a2), (p1, p2), (t1, t2), sym, solver, timeout, log), log)
        eq, model, asked, lines = EQUAL[key]
        res.queries += asked
        res.lemmas = list(lines)
        if eq:
            how = "solver)"
            if any(line.statement.startswith("identity lemma") for line in lines):
                how = "composed: zero-piece and identity lemmas, -v)"
            elif any(line.statement.startswith("exponent lemma") for line in lines):
                how = "composed: same-decoding, grid and exponent lemmas, -v)"
            res.status, res.how = "impossible", "the results are equal on every input (" + how
            res.seconds = time.perf_counter() - t0
            return res
        if model is not None:
            a, b = _model_inputs(prob, model)
            w = replay([a1, a2, "fp32"], ps, a, b, relative=False)
            if w.errors[a1] > w.errors[a2]:
                res.status, res.witness, res.how = "found", w, "solver (the results differ)"
                res.seconds = time.perf_counter() - t0
                return res
    e1, e2 = error_terms(prob, t1), error_terms(prob, t2)
    ans = solve(And(prob.constraint, sym, worse(e1, e2)), prob.symbols, solver, timeout)
    res.queries += 1
    if ans.status == "unsat":
        res.status, res.how = "impossible", "solver"
    elif ans.status == "sat":
        a, b = _model_inputs(prob, ans.model)
        w = replay([a1, a2, "fp32"], ps, a, b, relative=False)
        if not w.errors[a1] > w.errors[a2]:
            raise InternalError(f"solver input does not make {a1} worse than {a2} in the "
                                f"simulator (a={a}, b={b})")
        res.status, res.witness, res.how = "found", w, "solver"
    res.seconds = time.perf_counter() - t0
    return res
