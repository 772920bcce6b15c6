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
"""
from __future__ import annotations

from dataclasses import dataclass

from pysmt.shortcuts import And, Equals, Not, Or

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import FP32
from tcsmt.arith.params import ModelParams
from tcsmt.errors import TcsmtError
from tcsmt.solve.solvers import solve
from tcsmt.verify.domain import Domain
from tcsmt.verify.lemmas import _domain_symbol
from tcsmt.verify.pieces import ChainScheme, chain_scheme
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

