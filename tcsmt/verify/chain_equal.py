"""Proofs that two schemes give equal results, from small lemmas (``tcsmt verify --compare``, stage 2).

**Zero pieces** (:func:`zero_pieces`): piece i of the split, as the scheme's model reads it (a model that flushes
subnormal inputs reads them as zero), is a finite zero for every fp32 x in the domain: one query on one free input.

**Extension** (:func:`extension_equal`): where the second scheme's tensor-core chain is the first one's with extra
instructions (the same split and path; the first scheme's piece products, in order, are a subsequence of the
second's, k-block by k-block) and every extra instruction multiplies only pieces that are zero on the domain, the
two results are equal as values (the same pattern, both zeros or both NaN) on every input, because:

* *zero lemma* (:func:`zero_pieces`): the pieces of the extra products are finite zeros as the model reads them;
* *identity lemma*: one instruction TC(U.V + C) of the path, with every u_k and v_k read as a finite zero, equals
  C as a value for every fp32 C (for every C that is not subnormal where the model flushes a subnormal C; then
  also the *no-subnormal lemma*: no instruction of the path returns an fp32 subnormal, so no accumulator is one);
* *zero-sign lemma* (only where a common instruction follows an extra one): TC(U.V + C1) and TC(U.V + C2) are
  equal as values for C1, C2 both zeros or both NaN.

By induction over the chain, the accumulators of the two schemes are equal as values after every instruction.
Each lemma is an unsat answer of the solver on free inputs (no domain, no exact products); markidis-full against
markidis below 2^-14, where every residual is zero, is the case it answers (CDNA2 included, whose exact block sums
made the whole-chain query time out).

**Decoding** (:func:`path_equal`): where the two schemes multiply the same pieces in the same order, each on its own
path, the pieces are the same values (same-decoding and grid lemmas) and, instruction by instruction, the two paths'
block grids are one or both fine enough to lose nothing (exponent lemma): the results are the same pattern
(markidis against tf32x3 on [1, 2]).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from pysmt.shortcuts import And, Equals, Not, Or

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import FP32, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.errors import TcsmtError
from tcsmt.solve.solvers import solve
from tcsmt.verify.domain import Domain
from tcsmt.verify.lemmas import _domain_symbol
from tcsmt.verify.pieces import NB, ChainScheme, chain_scheme
from tcsmt.verify.schemes import kblocks, tc
from tcsmt.verify.smt import SB, output_pattern

#: seconds at least for each lemma query (as the composed proofs: the answer must not depend on machine load)
LEMMA_TIMEOUT = 60.0


@dataclass
class LemmaLine:
    """One solver query of a proof: its statement, answer and time (``tcsmt verify --compare -v``)."""

    statement: str
    status: str
    seconds: float

    def text(self) -> str:
        return f"{self.status:>7} {self.seconds:6.2f} s  {self.statement}"


def _ask(log: list[LemmaLine], statement: str, query, symbols: dict, solver: str, timeout: float) -> str:
    ans = solve(query, symbols, solver, timeout)
    log.append(LemmaLine(statement, ans.status, ans.seconds))
    return ans.status


def zero_pieces(algo: str, dom: Domain, solver: str, timeout: float, keep: bool = True,
                log: list[LemmaLine] | None = None) -> tuple[list[int], int]:
    """(the pieces i of the scheme's split that the model reads as a finite zero (+0 or -0) for every fp32 x in the
    domain, queries asked): one query on one free input each ("piece i of x, as read, is not zero, or is NaN or
    infinite").  ``keep``: the model reads subnormal pieces (False: it flushes them to zero, as CDNA2 does with fp16
    inputs).  Markidis's residual fp16(x - x_h) is zero below 2^-24 (half of fp16's smallest subnormal at most),
    and so every product with it."""
    try:
        cs = chain_scheme(algo)
    except TcsmtError:
        return [], 0
    x, sym, cons = _domain_symbol(dom, "x")
    zero, asked = [], 0
    read = "" if keep else " (subnormals read as zero)"
    for i, piece in enumerate(cs.cut(SB, x)):
        d = sem.decode(SB, cs.fmt, piece, keep)
        asked += 1
        nonzero = SB.or_(SB.ne(d.sig, 0), SB.or_(d.nan, d.inf))
        stmt = f"zero lemma: piece {i} of {algo}'s split{read} is a finite zero for every x, {dom.describe()}"
        if _ask(log if log is not None else [], stmt, And(cons, nonzero), {"x": sym}, solver,  # cons: x >= 0,
                timeout) == "unsat":                                                          # the splits are odd
            zero.append(i)
    return zero, asked


def zero_facts(cs: ChainScheme, zero: list[int], keep: bool, inputs: list) -> list:
    """The facts of :func:`zero_pieces` for given input terms: piece i, as read, is a finite zero."""
    facts = []
    for x in inputs:
        parts = cs.cut(SB, x)
        for i in zero:
            d = sem.decode(SB, cs.fmt, parts[i], keep)
            facts.append(SB.and_(SB.eq(d.sig, 0), SB.not_(SB.or_(d.nan, d.inf))))
    return facts


def equal_values(d1, d2):
    """The fp32 result terms are equal as values: the same pattern, both zeros, or both NaN."""
    x, y = sem.decode(SB, FP32, d1), sem.decode(SB, FP32, d2)
    zero = SB.and_(SB.and_(SB.eq(x.sig, 0), SB.not_(SB.or_(x.nan, x.inf))),
                   SB.and_(SB.eq(y.sig, 0), SB.not_(SB.or_(y.nan, y.inf))))
    return Or(Equals(output_pattern(d1), output_pattern(d2)), zero, And(x.nan, y.nan))


def _is_subsequence(short: list, long: list) -> bool:
    it = iter(long)
    return all(any(s == x for x in it) for s in short)


def extra_pairs(c1: ChainScheme, c2: ChainScheme) -> list[tuple[int, int]] | None:
    """The piece products the second chain adds to the first's (in order, per k-block), or None where the second
    chain is not the first one's with extra products (another split, or the first one's products not a
    subsequence of the second's)."""
    if (c1.fmt, c1.scales, c1.split) != (c2.fmt, c2.scales, c2.split) or c1.split is None:
        return None
    if not _is_subsequence(c1.pairs, c2.pairs):
        return None
    rest = list(c2.pairs)
    for pr in c1.pairs:
        rest.remove(pr)
    return rest


def _free_pattern(name: str, width: int, symbols: dict):
    x = SB.symbol(name, width)
    symbols[name] = x.t.arg(0)
    return x


def extension_equal(algos: tuple[str, str], p: ModelParams, K: int, dom: Domain, solver: str, timeout: float,
                    log: list[LemmaLine]) -> tuple[bool, int]:
    """(the two schemes' results are equal as values on every input, queries asked): the extension proof of the
    module docstring, on one path ``p`` shared by both; (False, queries) where it does not apply or a lemma is
    not proven."""
    try:
        cs = [chain_scheme(a) for a in algos]
    except TcsmtError:
        return False, 0
    if "ootomo" in algos:  # two chains, not one (pieces.chain_scheme)
        return False, 0
    short, long_ = (0, 1) if len(cs[0].pairs) <= len(cs[1].pairs) else (1, 0)
    extra = extra_pairs(cs[short], cs[long_])
    if not extra:
        return False, 0
    timeout = max(timeout, LEMMA_TIMEOUT)
    keep = p.subnormal_in
    zero, asked = zero_pieces(algos[long_], dom, solver, timeout, keep, log)
    if not all(i in zero and j in zero for i, j in extra):
        return False, asked
    fmt = cs[0].fmt
    lengths = sorted({k1 - k0 for k0, k1 in kblocks(K, p)})
    flush_c = not p.subnormal_c
    for n in lengths:  # identity lemma, for each k-block length
        symbols: dict = {}
        us = [_free_pattern(f"u{k}", fmt.storage_bits, symbols) for k in range(n)]
        vs = [_free_pattern(f"v{k}", fmt.storage_bits, symbols) for k in range(n)]
        c = _free_pattern("c", 32, symbols)
        facts = []
        for x in us + vs:
            d = sem.decode(SB, fmt, x, keep)
            facts.append(SB.and_(SB.eq(d.sig, 0), SB.not_(SB.or_(d.nan, d.inf))))
        _, expf, frac = SB.fields(FP32, c)
        if flush_c:
            facts.append(SB.not_(SB.and_(SB.eq(expf, 0), SB.ne(frac, 0))))
        asked += 1
        stmt = (f"identity lemma: TC(U.V + C) = C as a value, {n} product(s) of {fmt.name} zeros as {p.name} reads "
                f"them, every fp32 C{' not subnormal' if flush_c else ''}")
        if _ask(log, stmt, And(*facts, Not(equal_values(tc(SB, p, us, vs, c), c))), symbols, solver,
                timeout) != "unsat":
            return False, asked
    if flush_c:  # no accumulator is subnormal: every one is +0 or an instruction's result
        for n in lengths:
            symbols = {}
            us = [_free_pattern(f"u{k}", fmt.storage_bits, symbols) for k in range(n)]
            vs = [_free_pattern(f"v{k}", fmt.storage_bits, symbols) for k in range(n)]
            c = _free_pattern("c", 32, symbols)
            _, expf, frac = SB.fields(FP32, tc(SB, p, us, vs, c))
            asked += 1
            stmt = f"no-subnormal lemma: TC(U.V + C) of {p.name} is never an fp32 subnormal ({n} product(s))"
            if _ask(log, stmt, And(SB.eq(expf, 0), SB.ne(frac, 0)), symbols, solver, timeout) != "unsat":
                return False, asked
    pairs = cs[long_].pairs
    if any(pr not in extra for pr in pairs[pairs.index(extra[0]) + 1:]) or len(kblocks(K, p)) > 1:
        for n in lengths:  # zero-sign lemma: a common instruction after an extra one
            symbols = {}
            us = [_free_pattern(f"u{k}", fmt.storage_bits, symbols) for k in range(n)]
            vs = [_free_pattern(f"v{k}", fmt.storage_bits, symbols) for k in range(n)]
            c1, c2 = _free_pattern("c1", 32, symbols), _free_pattern("c2", 32, symbols)
            d1, d2 = sem.decode(SB, FP32, c1), sem.decode(SB, FP32, c2)
            zeros = SB.and_(SB.and_(SB.eq(d1.sig, 0), SB.not_(SB.or_(d1.nan, d1.inf))),
                            SB.and_(SB.eq(d2.sig, 0), SB.not_(SB.or_(d2.nan, d2.inf))))
            same = Or(zeros, And(d1.nan, d2.nan))
            asked += 1
            stmt = (f"zero-sign lemma: TC(U.V + C1) = TC(U.V + C2) as values for C1, C2 both zeros or both NaN "
                    f"({p.name}, {n} product(s))")
            query = And(same, Not(equal_values(tc(SB, p, us, vs, c1), tc(SB, p, us, vs, c2))))
            if _ask(log, stmt, query, symbols, solver, timeout) != "unsat":
                return False, asked
    return True, asked



# ------------------------------------------------------------------ one chain of piece products on two paths
#: the parameters whose values must agree on the two paths for :func:`path_equal`: what the block reads after its
#: alignment exponent (the rounding, zero signs, overflow, formats of C and of the result)
ROUNDING_PARAMETERS = ("block_frac_bits", "block_round", "subnormal_out", "overflow_result", "zero_sign", "acc_fmt",
                       "out_fmt", "c_fmt", "subnormal_c", "align", "c_mode", "late_align", "sum_frac_bits",
                       "product_groups", "c_drop")


def _piece_bounds(cs: ChainScheme, keep: bool, dom: Domain, i: int, solver: str, timeout: float,
                  log: list[LemmaLine]) -> tuple[int, int] | None:
    """(g, m): piece i of the split, as read, is a finite multiple of 2^g below 2^m in magnitude for every x of the
    domain (*grid lemma*, one query on one free input; the candidate from the pieces of 4,096 seeded inputs of the
    domain and its ends, lowered (g) and raised (m) by one after a sat answer, at most 4 tries).  None where no
    candidate is proven."""
    rng = np.random.default_rng(0)
    xs = np.concatenate([rng.integers(dom.lo_pattern, dom.hi_pattern + 1, 4096, dtype=np.int64),
                         np.array([dom.lo_pattern, dom.hi_pattern], dtype=np.int64)])
    dn = sem.decode(NB, cs.fmt, cs.cut(NB, xs)[i], keep)
    sig, e = np.asarray(dn.sig).astype(np.int64), np.asarray(dn.e).astype(np.int64)
    nz = sig != 0
    if not nz.any():
        return None
    f = cs.fmt.frac_bits
    g = min(int(ex) - f + (int(s) & -int(s)).bit_length() - 1 for s, ex in zip(sig[nz], e[nz]))
    m = max(int(ex) - f + int(s).bit_length() for s, ex in zip(sig[nz], e[nz]))
    x, sym, cons = _domain_symbol(dom, "x")
    d = sem.decode(SB, cs.fmt, cs.cut(SB, x)[i], keep)
    for _ in range(4):
        stmt = (f"grid lemma: piece {i} of the {cs.fmt.name} split, as read, is a finite multiple of 2^{g} below "
                f"2^{m} for every x, {dom.describe()}")
        status = _ask(log, stmt, And(cons, SB.not_(_on_grid_below(d, g, m))), {"x": sym}, solver, timeout)
        if status == "unsat":
            return g, m
        if status != "sat":
            return None
        g, m = g - 1, m + 1
    return None


def _on_grid_below(d: sem.Decoded, g: int, m: int | None = None):
    """The decoded value is finite, a multiple of 2^g and (unless m is None) below 2^m in magnitude."""
    lsb = SB.sub(d.e, d.fmt.frac_bits)
    sh = SB.sub(g, lsb)
    ok = SB.and_(SB.not_(SB.or_(d.nan, d.inf)), SB.not_(SB.and_(SB.gt(sh, 0), SB.low_nonzero(d.sig, SB.max(sh, 0)))))
    if m is None:
        return ok
    return SB.and_(ok, SB.or_(SB.eq(d.sig, 0), SB.lt(SB.add(lsb, SB.msb(d.sig, d.fmt.frac_bits + 1)), m)))


def _static_path_conditions(p: ModelParams, n: int) -> bool:
    """Whether an instruction of n products on path p is one window block whose result depends on the addends'
    values and the grids it aligns them to only (read from the parameters): one block (:func:`sem.groups`), grids
    that :func:`sem.block_grids` states (C aligned with the products, or after their sum), chain reduction,
    unbounded carries (a wrap would depend on the grid), raw product exponents (a product's alignment exponent is
    its factors' exponent sum), no block scales, no operand conversion, the result in the accumulator's format.
    (A product overflow rule is checked against the grid lemmas' bounds in :func:`path_equal`.)"""
    return (len(sem.groups(n, p)[0]) == 1 and p.c_mode in ("aligned", "after_sum") and p.reduction == "chain"
            and p.window_frac_bits is not None and p.carry_bits == "unbounded" and p.product_exponent == "raw"
            and not p.scale_fmt and not p.operand_fmt and not p.b_fmt and p.out_fmt == p.acc_fmt
            and (p.c_mode == "aligned" or (p.product_groups == 1 and p.c_drop is None)))


def _finite_chain(cs: ChainScheme, bounds: list[tuple[int, int]], blocks: list[tuple[int, int]],
                  ps: tuple[ModelParams, ModelParams]) -> bool:
    """Whether every accumulator of the chain stays below 2^127 (finite), a static bound: with |C| <= M, n products
    below 2^(m_i + m_j) and E at most the larger of |C|'s exponent and a product's alignment exponent (raw: below
    2^(m_i + m_j + 2f), f the pieces' fraction bits, where a factor is subnormal), a block of F >= log2(n + 1) + 2
    fraction bits loses at most (n + 1) 2^(E - F) <= 2^(E - 1) in its alignment and rounds by less than the sum
    itself, so |D| <= 2 (M + n 2^(m_i + m_j + 2f))."""
    bound = Fraction(0)
    for k0, k1 in blocks:
        n = k1 - k0
        if any((p.window_frac_bits or 0) < (n + 1).bit_length() + 2 for p in ps):
            return False
        for i, j in cs.pairs:
            bound = 2 * (bound + n * Fraction(2) ** (bounds[i][1] + bounds[j][1] + 2 * cs.fmt.frac_bits))
    return bound < Fraction(2) ** 127


def path_equal(algos: tuple[str, str], ps: tuple[ModelParams, ModelParams], K: int, dom: Domain, solver: str,
               timeout: float, log: list[LemmaLine]) -> tuple[bool, int]:
    """(the two schemes' results are the same fp32 pattern on every input, queries asked), where both cut every
    input into the same number of pieces and multiply the same pieces in the same order, each on its own path
    (markidis on fp16 against tf32x3 on tf32, on [1, 2]).  Lemmas:

    * *same-decoding lemma* (one query per piece, one free input): piece i of the second split, as its model reads
      it, is piece i of the first as the first model reads it, redecoded (:func:`sem.redecoded`: the same finite
      value; an fp16 subnormal normalized in tf32);
    * *grid lemma* (:func:`_piece_bounds`, one query per piece): piece i is a finite multiple of 2^g_i below 2^m_i;
    * *exponent lemma* (one query per instruction of the chain, up to its C; no products' magnitudes, only whether
      they are zero): for operands with those facts, and C = +0 (the first instruction) or a finite fp32 value, the
      block exponents E_1, E_2 of the two paths' instructions (:func:`sem.block_exponent`, F_1, F_2 their window
      fraction bits) satisfy E_1 = E_2, or E_1 - F_1 <= G and E_2 - F_2 <= G, with G = min over the chain's products
      (i, j) of g_i + g_j.

    Then, by induction over the chain (both start from +0 and, instruction by instruction, read the same C):
    every addend of every instruction is a multiple of 2^G (the products by the grid lemmas; C, +0 or a result:
    aligning to 2^(E - F) and rounding to fp32 keep a multiple of 2^G one, as their grids are powers of two), and
    the exact product of equal values is one value, so the two paths' addends are the same values.  A block aligns
    each addend to 2^(E - F) by its value and E alone, so with E_1 = E_2 (and the same F and alignment) the aligned
    sums are equal; with E - F <= G on both paths nothing is lost and both are the exact sum.  The rest of the
    block (rounding, zero signs, overflow: ROUNDING_PARAMETERS, equal on the two paths) reads the sum's value, so
    the results are the same pattern.  Static conditions (:func:`_static_path_conditions`, ROUNDING_PARAMETERS
    equal, the same k-blocks at this K); (False, queries) where they fail or a lemma is not proven."""
    try:
        cs = [chain_scheme(a) for a in algos]
    except TcsmtError:
        return False, 0
    if "ootomo" in algos or cs[0].n != cs[1].n or cs[0].pairs != cs[1].pairs or any(any(c.scales) for c in cs):
        return False, 0
    if (cs[1].fmt.emin, -cs[1].fmt.frac_bits) > (cs[0].fmt.emin, -cs[0].fmt.frac_bits):
        # the pieces of the narrower format are redecoded in the wider one (the result is symmetric)
        cs, algos, ps = cs[::-1], (algos[1], algos[0]), (ps[1], ps[0])
    blocks = kblocks(K, ps[0])
    if (blocks != kblocks(K, ps[1]) or any(getattr(ps[0], f) != getattr(ps[1], f) for f in ROUNDING_PARAMETERS)
            or not all(_static_path_conditions(p, k1 - k0) for p in ps for k0, k1 in blocks)
            or cs[1].fmt.frac_bits < cs[0].fmt.frac_bits
            or (ps[0].c_mode == "after_sum" and ps[0].window_frac_bits != ps[1].window_frac_bits)):
        return False, 0
    timeout = max(timeout, LEMMA_TIMEOUT)
    keep = (ps[0].subnormal_in, ps[1].subnormal_in)
    start = len(log)
    x, sym, cons = _domain_symbol(dom, "x")
    cuts = [c.cut(SB, x) for c in cs]
    for i in range(cs[0].n):  # same-decoding lemmas
        d0, d1 = (sem.decode(SB, c.fmt, cut[i], kp) for c, cut, kp in zip(cs, cuts, keep))
        r = sem.redecoded(SB, d0, cs[1].fmt)
        same = SB.and_(SB.and_(SB.eq(r.sig, d1.sig), SB.eq(r.e, d1.e)), SB.not_(SB.xor(r.neg, d1.neg)))
        special = SB.or_(SB.or_(d0.nan, d0.inf), SB.or_(d1.nan, d1.inf))
        stmt = (f"same-decoding lemma: piece {i} of {algos[1]}'s split as {ps[1].name} reads it is piece {i} of "
                f"{algos[0]}'s as {ps[0].name} reads it, finite, redecoded in {cs[1].fmt.name} (the same value; a "
                f"subnormal normalized) for every x, {dom.describe()}")
        if _ask(log, stmt, And(cons, SB.or_(special, SB.not_(same))), {"x": sym}, solver, timeout) != "unsat":
            return False, len(log) - start
    bounds = []
    for i in range(cs[0].n):
        b = _piece_bounds(cs[0], keep[0], dom, i, solver, timeout, log)
        if b is None:
            return False, len(log) - start
        bounds.append(b)
    G = min(bounds[i][0] + bounds[j][0] for i, j in cs[0].pairs)
    if not _finite_chain(cs[0], bounds, blocks, ps) or any(
            p.product_inf is not None and bounds[i][1] + bounds[j][1] > p.product_inf for p in ps for i, j in cs[0].pairs):
        return False, len(log) - start  # (every product below 2^(m_i + m_j): a product overflow rule never fires)
    shapes: list[tuple[int, int, int, bool]] = []
    for k0, k1 in blocks:
        for t, (i, j) in enumerate(cs[0].pairs):
            if (k1 - k0, i, j, k0 == 0 and t == 0) not in shapes:
                shapes.append((k1 - k0, i, j, k0 == 0 and t == 0))
    Fs = [p.window_frac_bits or 0 for p in ps]  # a window on both paths (_static_path_conditions)
    for n, i, j, first in shapes:  # exponent lemmas
        symbols: dict = {}
        facts: list = []
        prods: tuple[list, list] = ([], [])
        for k in range(n):
            u0, v0 = (sem.decode(SB, cs[0].fmt, _free_pattern(f"{nm}_{k}", cs[0].fmt.storage_bits, symbols), keep[0])
                      for nm in ("u", "v"))
            facts += [_on_grid_below(u0, *bounds[i]), _on_grid_below(v0, *bounds[j])]
            # whether the product is zero: the only part of its magnitude that E reads
            nonzero = SB.ite(SB.or_(SB.eq(u0.sig, 0), SB.eq(v0.sig, 0)), 0, 1)
            for side, (u, v) in enumerate(((u0, v0), (sem.redecoded(SB, u0, cs[1].fmt),
                                                       sem.redecoded(SB, v0, cs[1].fmt)))):
                term, fl = sem.product_term(SB, ps[side], u, v)
                prods[side].append((dataclasses.replace(term, mag=nonzero), fl))
        c = SB.const(0) if first else _free_pattern("c", 32, symbols)
        if not first:
            facts.append(_on_grid_below(sem.decode(SB, FP32, c), G))
        grids = []
        for p, pr in zip(ps, prods):
            pterms, c_term, _ = sem.block_addends(SB, p, pr, c, get_format(p.c_fmt))
            grids.append(sem.block_grids(SB, p, pterms, c_term))
        if grids[0] is None or grids[1] is None or len(grids[0]) != len(grids[1]):
            return False, len(log) - start
        ok = SB.true()
        for L0, L1 in zip(grids[0], grids[1]):
            ok = SB.and_(ok, SB.or_(SB.eq(L0, L1), SB.and_(SB.le(L0, G), SB.le(L1, G))))
        levels = "" if len(grids[0]) == 1 else f" at each of its {len(grids[0])} alignments"
        stmt = (f"exponent lemma: the block grids of TC(U.V + C) on {ps[0].name} and {ps[1].name} are one, or both "
                f"at most 2^{G}{levels} (F = {Fs[0]}, {Fs[1]}), for {n} product(s) of pieces {i} x {j} "
                f"(multiples of 2^{bounds[i][0]}, 2^{bounds[j][0]} below 2^{bounds[i][1]}, 2^{bounds[j][1]}) read "
                f"alike by both paths, C = {'+0' if first else f'a finite multiple of 2^{G}'}")
        if _ask(log, stmt, And(*facts, SB.not_(ok)), symbols, solver, timeout) != "unsat":
            return False, len(log) - start
    return True, len(log) - start
