"""Composed proofs of error bounds for tensor-core chain schemes (``tcsmt verify``; docs/verify.md, "Composed proofs").

A whole-scheme solver query (24 x 24-bit products, the splits, every instruction and the exact error
at once) does not answer within minutes; this module proves a bound from small lemmas instead, each
an UNSAT answer on the model's own semantics, and composes them with exact rational arithmetic.

Schemes covered: the chain schemes, where every fp32 input x is cut into pieces P_0(x), ..., P_(n-1)(x)
of a narrow format and chosen piece products are accumulated in one tensor-core accumulator from +0
(Markidis, ``markidis-full``, the vendor piece schemes bf16x9 / bf16x3 / tf32x3 and their orders), and
Ootomo-Yokota (pieces x_h and 2^-11 dx; a main chain per k-block added with RN32, a correction chain,
and the final RN32 addition: :func:`_ootomo_chains`).
Inputs: fp32 with LO <= |a_k|, |b_k| <= HI, LO > 0.  The bound is on the relative error
|D - A.B| / N with N = sum_k |a_k| |b_k|.

Lemmas (solver, UNSAT answers):

* piece lemmas (:func:`tcsmt.verify.pieces.piece_lemma`, bisection): |x - P_0 - ... - P_i| <= rho_i |x| on the domain, with
  every piece read as the model reads it (subnormals flushed where ``subnormal_in`` is false);
* stage lemmas (:mod:`tcsmt.verify.stages`, one query each): the block's rounding into the accumulator
  is within u |v| + a of its input v, and placing an addend on a window's grid 2^L loses less than 2^L.

Static facts of the semantics: :func:`tcsmt.arith.semantics.block_shape` (each block FMA is one rounding of
aligned sums with the stated alignments and no binding carry bit).

Composition (exact rationals; the proof in docs/verify.md, "Composed proofs"):

* with pi_0 = 1 + rho_0 and pi_i = rho_(i-1) + rho_i bounding |P_i| / |x|, and kappa_i =
  max(pi_i, 2^emin(fmt) / LO) bounding 2^e(P_i) / |x| (e the alignment exponent, emin for a
  subnormal or zero piece), the products the chain drops cost
  |A.B - P| <= (sum over dropped (i, j) of pi_i pi_j + (2 + rho_(n-1)) rho_(n-1)) N, where P is the
  exact sum of the piece products the chain adds (a = sum_i P_i + R_a, |R_a| <= rho_(n-1) |a|);
* every block FMA of the chain (D_j = BLK(pieces, C = D_(j-1)), D_0 = +0) adds at most
  (1 + u) lambda 2^T + u |X_j + C| + a (:class:`tcsmt.arith.semantics.BlockShape`), with
  2^T <= kappa_i kappa_j N + |C| + 2^extra_top, |X_j| <= pi_i pi_j N, |C| <= (sum of earlier |X|) + e;
  where the model flushes a subnormal C, reading it costs less than 2^emin more;
* an RN32 addition of two fp32 values (``verify_schemes.rn32_sum``: a 48-bit window, truncated, then
  RNE) adds (1 + u) 2^-47 2^T + u (|x| + |y|) + a, with the same two stage lemmas;
* so |D - A.B| <= sum_S c_S N_S + d <= (max_S c_S) N + d (N_S: the share of N of the k-subset S a block
  covers; the subsets partition k), and the relative bound is max_S c_S + d / N_min with N_min = K LO^2.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import FP32, Format, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.errors import TcsmtError
from tcsmt.verify.domain import Domain
from tcsmt.verify.lemmas import Lemma
from tcsmt.verify.pieces import ChainScheme, chain_scheme, piece_lemma
from tcsmt.verify.schemes import _ADD_WINDOW, _EXACT, OOTOMO_SCALE_LOG2, kblocks, scheme_key
from tcsmt.verify.schemes import scale as scale_term
from tcsmt.verify.stages import StageLemma, align_lemma, band_round_lemma, round_lemma

NB = NumpyBackend()
FP16 = get_format("fp16")


@dataclass
class Proof:
    """A composed bound (None where some lemma is missing: ``missing`` says which) and its lemmas."""

    algo: str
    arch: str
    K: int
    dom: Domain
    bound: Fraction | None = None
    split_part: Fraction = Fraction(0)
    chain_part: Fraction = Fraction(0)
    lemmas: list[Lemma | StageLemma] = field(default_factory=list)
    missing: str = ""
    seconds: float = 0.0

    @property
    def queries(self) -> int:
        return sum(len(lem.steps) if isinstance(lem, Lemma) else 1 for lem in self.lemmas)


# ------------------------------------------------------------------ composition
@dataclass(frozen=True)
class _BlockConst:
    """The constants of one block FMA: (1 + u) (lambda 2^T + loss) + u |X + C| + a, T <= ... or 2^extra_top, where
    the carry bits can bind loss <= wrap (|X| + up 2^T) (:class:`tcsmt.arith.semantics.BlockShape`), and with
    C = +0 loss <= wrap0 (|X| + up 2^T) (0 where the products alone cannot reach the carry bits)."""

    u: Fraction
    lam: Fraction
    a: Fraction
    extra: Fraction
    wrap: Fraction = Fraction(0)
    wrap0: Fraction = Fraction(0)
    up: Fraction = Fraction(0)
    band: bool = False  # the per-binade rounding lemma holds: |round(v) - v| <= u 2^(ceil(log2 |v|) - 1) + a
    alignments: tuple[sem.Alignment, ...] = ()  # the block's alignment levels (BlockShape), each with its unit
    units: tuple[Fraction, ...] = ()


def _block_terms(p: ModelParams, n: int) -> tuple[list[sem.Term], sem.Term]:
    """The static facts of a block's addends (n products and a general C; values are placeholders)."""
    zeros = [np.zeros(1, dtype=np.int64) for _ in range(n)]
    pterms, c_term, _ = sem.block_terms(NB, p, zeros, zeros, np.zeros(1, dtype=np.int64), get_format(p.c_fmt))
    return pterms, c_term


class _Cache:
    """Stage lemmas proven once per run (they depend only on their stated parameters)."""

    def __init__(self) -> None:
        self.rounds: dict[tuple, tuple[StageLemma, Fraction, Fraction]] = {}
        self.aligns: dict[tuple, tuple[StageLemma, Fraction]] = {}
        self.pieces: dict[tuple, Lemma] = {}


CACHE = _Cache()


def _align(mode: str, frac_bits: int, gap: int, mag_bits: int, d_min: int, timeout: float) -> tuple[StageLemma, Fraction]:
    """:func:`tcsmt.verify.stages.align_lemma`, proven once per run for these parameters."""
    key = (mode, frac_bits, gap, mag_bits, d_min)
    if key not in CACHE.aligns:
        CACHE.aligns[key] = align_lemma(mode, frac_bits, gap, mag_bits, d_min, timeout)
    return CACHE.aligns[key]


def _round(fmt: Format, frac_bits: int, mode: str, keep: bool, width: int, lsb_min: int, timeout: float,
           lsb_max: int | None = None) -> tuple[StageLemma, Fraction, Fraction]:
    """:func:`tcsmt.verify.stages.round_lemma`, proven once per run for these parameters."""
    key = (fmt.name, frac_bits, mode, keep, width, lsb_min, lsb_max)
    if key not in CACHE.rounds:
        CACHE.rounds[key] = round_lemma(fmt, frac_bits, mode, keep, width, lsb_min, timeout, lsb_max)
    return CACHE.rounds[key]


def _note(used: list, lem: Any) -> None:
    """List a lemma once among those a proof used."""
    if not any(x is lem for x in used):
        used.append(lem)


def _block_const(p: ModelParams, n: int, timeout: float, used: list, factor_top: Fraction,
                 band: bool = False) -> _BlockConst | str:
    """The constants of a block FMA of ``p`` on n products, or the reason there are none (``factor_top``
    bounds 2^e of every factor: where a zero product joins the alignment at z + e(other factor)).  With ``band``
    the per-binade rounding lemma (:func:`tcsmt.verify.stages.band_round_lemma`) is asked too, and its answer is
    :attr:`_BlockConst.band`."""
    pterms, c_term = _block_terms(p, n)
    try:
        shape = sem.block_shape(p, pterms, c_term)
    except TcsmtError as exc:
        return str(exc)
    lam = Fraction(0)
    units: list[Fraction] = []
    terms = [*pterms, c_term]
    F = p.window_frac_bits
    widest = max([al.frac_bits for al in shape.alignments] or [0])
    # a window sum (an addend of a later alignment) is below 2^(E + head + carries) on the grid 2^(E - F)
    sum_bits = max(t.head for t in terms) + widest + 2 + (n + 1).bit_length() + 2
    for al in shape.alignments:
        gap = min(t.gap_min for t in terms)  # every addend's top - lsb, sums' included (their gap is F)
        mbits = max([t.mag_bits for t in terms] + [sum_bits])
        e_max = max([t.top_max for t in terms] + [shape.extra_top])  # E, at every level
        d_min = min(t.lsb_min for t in terms) - (e_max - al.frac_bits) - 2
        lem, unit = _align(al.mode, al.frac_bits, gap, mbits, d_min, timeout)
        _note(used, lem)
        if lem.status != "unsat":
            return f"{lem.name}: solver {lem.status}"
        lam += al.addends * unit / (1 << al.frac_bits)
        units.append(unit)
    acc = get_format(p.acc_fmt)
    lsb_max: int | None = None
    if F is None:  # the exact sum (sem.block_sum): its width, on the fixed grid of the finest addend
        width = sem.block_sum(NB, terms, None, p).mag_bits
        lsb_min = lsb_max = min(t.lsb_min for t in terms)
    else:  # a window sum, on the grid 2^(E - F) (or finer in after_sum)
        width = sum_bits
        lsb_min = min([t.top_min for t in terms] + [shape.extra_top]) - widest - 1
    lem, u, a = _round(acc, shape.round_frac_bits, shape.round_mode, shape.keep_subnormals, width, lsb_min, timeout,
                       lsb_max)
    _note(used, lem)
    if lem.status != "unsat":
        return f"{lem.name}: solver {lem.status}"
    banded = False
    if band:
        key = ("band", acc.name, shape.round_frac_bits, shape.round_mode, shape.keep_subnormals, width, lsb_min,
               lsb_max)
        if key not in CACHE.rounds:
            CACHE.rounds[key] = band_round_lemma(acc, shape.round_frac_bits, shape.round_mode,
                                                 shape.keep_subnormals, width, lsb_min, timeout, lsb_max)
        blem = CACHE.rounds[key][0]
        _note(used, blem)
        banded = blem.status == "unsat"
    extra = Fraction(2) ** shape.extra_top
    if shape.zero_product is not None:  # z + e(other factor): the factor is a piece, 2^e <= kappa |x| <= kappa HI
        z = Fraction(2) ** shape.zero_product
        extra = max(extra, z * z, z * factor_top)
    if shape.carry_cap is None:
        return _BlockConst(u, lam, a, extra, band=banded, alignments=shape.alignments, units=tuple(units))
    # the wrap loses w * (aligned product magnitudes) at most: |X| / 2^L, plus one unit each where they round up
    top = Fraction(1 << shape.carry_cap)
    w = top / (top - shape.c_units)
    w0 = Fraction(0) if shape.p_units < top else w
    up = Fraction(n if p.align != "trunc" else 0, 1 << (F or 0))
    return _BlockConst(u, lam, a, extra, w, w0, up, banded, shape.alignments, tuple(units))


def _piece_bounds(cs: ChainScheme, p: ModelParams, dom: Domain, lo: Fraction, timeout: float,
                  proof: Proof) -> list[Fraction] | None:
    """rho_0..rho_(n-1) from the piece lemmas (cached), or None (``proof.missing`` says why)."""
    rho: list[Fraction] = []
    for i in range(cs.n):
        key = (cs.fmt.name, cs.n, cs.scales, p.subnormal_in, dom.lo_pattern, dom.hi_pattern, i)  # the split's facts
        if key not in CACHE.pieces:
            CACHE.pieces[key] = piece_lemma(cs, p.subnormal_in, dom, i, timeout)
        lem = CACHE.pieces[key]
        proof.lemmas.append(lem)
        if lem.bound is None:
            proof.missing = f"{lem.name}: {lem.stopped}"
            return None
        rho.append(lem.bound)
    return rho


@dataclass
class _Err:
    """A bound sum_S c_S N_S + d of an error or a magnitude, with N_S = sum over k in S of |a_k| |b_k| for the
    k-subsets S the blocks cover (they partition k, so sum_S N_S = N); every c_S >= 0, hence the bound is at
    most (max_S c_S) N + d (:attr:`coef`)."""

    c: dict[tuple[int, ...], Fraction] = field(default_factory=dict)
    d: Fraction = Fraction(0)

    def __add__(self, other: _Err) -> _Err:
        c = dict(self.c)
        for key, v in other.c.items():
            c[key] = c.get(key, Fraction(0)) + v
        return _Err(c, self.d + other.d)

    def times(self, f: Fraction) -> _Err:
        return _Err({key: v * f for key, v in self.c.items()}, self.d * f)

    @property
    def coef(self) -> Fraction:
        return max(self.c.values(), default=Fraction(0))


def _chain(p: ModelParams, K: int, pairs: list[tuple[int, int]], pi: list[Fraction], kappa: list[Fraction],
           factor_top: Fraction, timeout: float, proof: Proof, k_ranges: list[tuple[int, int]] | None = None
           ) -> tuple[_Err, _Err] | None:
    """(error, magnitude of the exact sum) of one tensor-core accumulator chain from +0: for each k-block, for
    each piece pair (i, j), acc = TC(A_i . B_j + acc), block by block as :func:`tcsmt.arith.semantics.groups` cuts
    the instruction; pi / kappa bound |piece| / |x| and 2^e(piece) / |x| as the model sees the pieces.
    None where a block has no constants (``proof.missing``)."""
    e, a = _Err(), _Err()  # |D_j - (X_1 + ... + X_j)| <= e;  |X_1| + ... + |X_j| <= a
    flush_c = Fraction(0) if p.subnormal_c else Fraction(2) ** get_format(p.c_fmt).emin
    first = True  # the first block's C is +0
    for k0, k1 in (k_ranges or kblocks(K, p)):
        for i, j in pairs:
            for instr in sem.groups(k1 - k0, p):
                for ks in instr:
                    bc = _block_const(p, len(ks), timeout, proof.lemmas, factor_top)
                    if isinstance(bc, str):
                        proof.missing = bc
                        return None
                    share = tuple(k0 + k for k in ks)  # this block's products: N_share
                    x = _Err({share: pi[i] * pi[j]})
                    c = a + e  # |C| <= c
                    two_t = _Err({share: kappa[i] * kappa[j]}) + c + _Err(d=bc.extra)  # 2^T
                    w = bc.wrap0 if first else bc.wrap
                    loss = x.times(w) + two_t.times(w * bc.up)
                    e = (e + (two_t.times(bc.lam) + loss).times(1 + bc.u) + (x + c).times(bc.u)
                         + _Err(d=bc.a + flush_c * (1 + bc.u)))
                    a = a + x
                    first = False
    return e, a


def _rn32_const(timeout: float, proof: Proof, scale: int) -> _BlockConst | None:
    """The constants of ``rn32_sum`` on two fp32 addends, the second scaled by 2^scale (verify_schemes: the
    two aligned in a window of _ADD_WINDOW bits, truncated, the sum rounded to nearest even, IEEE)."""
    zero = np.zeros(1, dtype=np.int64)
    t = sem.value_term(NB, sem.decode(NB, FP32, zero))[0]
    terms = [t, scale_term(NB, t, scale)]
    F = _ADD_WINDOW
    d_min = min(s.lsb_min for s in terms) - max(s.top_max for s in terms) + F - 2
    lem, unit = _align(_EXACT.align, F, t.gap_min, t.mag_bits + 2, d_min, timeout)
    _note(proof.lemmas, lem)
    width = sem.block_sum(NB, terms, F, _EXACT).mag_bits
    lsb_min = min(s.top_min for s in terms) - F - 1
    rlem, u, a = _round(FP32, FP32.frac_bits, "rne", _EXACT.subnormal_out, width, lsb_min, timeout)
    _note(proof.lemmas, rlem)
    if lem.status != "unsat" or rlem.status != "unsat":
        proof.missing = f"rn32 addition: solver {lem.status}/{rlem.status}"
        return None
    # a subnormal addend aligns at emin (-126), the scaled one at emin + scale
    return _BlockConst(u, 2 * unit / (1 << F), a, Fraction(2) ** max(FP32.emin, FP32.emin + scale))


def _rn32_err(bc: _BlockConst, x: _Err, y: _Err) -> _Err:
    """The error of RN32(x + y) for addends bounded by x and y: (1 + u) lambda 2^T + u (|x| + |y|) + a."""
    return (x + y + _Err(d=bc.extra)).times((1 + bc.u) * bc.lam) + (x + y).times(bc.u) + _Err(d=bc.a)


def compose(algo: str, arch: str, p: ModelParams, K: int, dom: Domain, timeout: float) -> Proof:
    """A composed bound on the relative error of scheme ``algo`` on model ``p`` (module docstring)."""
    t0 = time.perf_counter()
    proof = Proof(scheme_key(algo), arch, K, dom)
    try:
        cs = chain_scheme(algo)
    except TcsmtError as exc:
        proof.missing = str(exc)
        return proof
    lo = FP32.to_fraction(dom.lo_pattern)
    hi = FP32.to_fraction(dom.hi_pattern)
    assert isinstance(lo, Fraction) and isinstance(hi, Fraction)
    if lo == 0:
        proof.missing = "the domain admits zero inputs: a relative bound needs LO > 0"
        return proof
    rho = _piece_bounds(cs, p, dom, lo, timeout, proof)
    if rho is None:
        proof.seconds = time.perf_counter() - t0
        return proof
    pi = [1 + rho[0]] + [rho[i - 1] + rho[i] for i in range(1, cs.n)]
    last = rho[-1]
    dropped = [(i, j) for i in range(cs.n) for j in range(cs.n) if (i, j) not in cs.pairs]
    proof.split_part = sum((pi[i] * pi[j] for i, j in dropped), Fraction(0)) + (2 + last) * last
    # as the tensor cores see the pieces: 2^s_i P_i
    seen = [q * (1 << s) for q, s in zip(pi, cs.scales or (0,) * cs.n)]
    kappa = [max(q, Fraction(2) ** cs.fmt.emin / lo) for q in seen]
    factor_top = max(kappa) * hi
    if proof.algo == "ootomo":
        total = _ootomo_chains(p, K, seen, kappa, factor_top, timeout, proof)
    else:
        chain = _chain(p, K, cs.pairs, seen, kappa, factor_top, timeout, proof)
        total = None if chain is None else (chain[0], chain[1])
    if total is None:
        proof.seconds = time.perf_counter() - t0
        return proof
    err, mag = total
    n_min = K * lo * lo
    n_max = K * hi * hi
    top = (mag + err).coef * n_max + mag.d + err.d
    if top >= Fraction(2) ** (get_format(p.acc_fmt).emax - 1):
        proof.missing = "the accumulator could overflow on this domain"
    elif p.product_inf is not None and max(seen) ** 2 * hi * hi * 4 >= Fraction(2) ** p.product_inf:
        proof.missing = f"products can reach the model's product_inf = 2^{p.product_inf}"
    else:
        proof.chain_part = err.coef + err.d / n_min
        proof.bound = proof.split_part + proof.chain_part
    proof.seconds = time.perf_counter() - t0
    return proof


def _ootomo_chains(p: ModelParams, K: int, seen: list[Fraction], kappa: list[Fraction], factor_top: Fraction,
                   timeout: float, proof: Proof) -> tuple[_Err, _Err] | None:
    """(error, magnitude) of Ootomo-Yokota after its splits: per k-block tmp = TC(A_h.B_h + 0) and
    main = RN32(main + tmp); the correction chain corr = TC(dA.B_h + corr), TC(A_h.dB + corr) (dx = 2^11 lo,
    as ``seen`` says); D = RN32(main + 2^-11 corr)."""
    add = _rn32_const(timeout, proof, 0)
    fin = _rn32_const(timeout, proof, -OOTOMO_SCALE_LOG2)
    if add is None or fin is None:
        return None
    em, am = _Err(), _Err()  # main: error, magnitude of its exact sum
    for kb in kblocks(K, p):
        tmp = _chain(p, K, [(0, 0)], seen, kappa, factor_top, timeout, proof, [kb])
        if tmp is None:
            return None
        et, at = tmp
        em = em + et + _rn32_err(add, am + em, at + et)
        am = am + at
    corr = _chain(p, K, [(1, 0), (0, 1)], seen, kappa, factor_top, timeout, proof)
    if corr is None:
        return None
    ec, ac = corr
    scale = Fraction(1, 1 << OOTOMO_SCALE_LOG2)
    err = em + ec.times(scale) + _rn32_err(fin, am + em, (ac + ec).times(scale))
    return err, am + ac.times(scale)


def reset_cache() -> None:
    """Forget the lemmas proven so far (tests, benchmarks: time a cold proof)."""
    CACHE.rounds.clear()
    CACHE.aligns.clear()
    CACHE.pieces.clear()
