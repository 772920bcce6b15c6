"""Composed proofs of absolute error bounds (``tcsmt verify --abs``): the lemmas of :mod:`tcsmt.verify.proof`,
combined over magnitudes instead of shares of sum|a_k b_k|.

The relative proof bounds |D - A.B| by c N + d with N = sum_k |a_k| |b_k|; evaluated at |a_k| = |b_k| = HI that
charges each piece its largest relative size (a residual is largest relative to x where x's significand is
1) at the largest |x| (where the significand is 2): twice the piece per factor.  Here every quantity is a
magnitude over the whole domain (0 included: LO = 0 admits zeros and subnormals):

* absolute piece lemmas (:func:`tcsmt.verify.pieces.piece_abs_lemma`): |x - P_0 - ... - P_i| <= r_i, so
  |P_0| <= HI + r_0 and |P_i| <= r_(i-1) + r_i (times 2^s_i as the tensor cores see a scaled piece), and
  2^e(P_i) <= max(|P_i|, 2^emin(fmt)) for its alignment exponent e;
* the split: a b - sum over the pairs the scheme adds of P_i(a) P_j(b) = the dropped pairs + P(a) R(b) + R(a) b
  with |P(a)| <= HI + r, so per k at most sum_dropped p_i p_j + (HI + r) r + r HI;
* each block FMA (the same stage lemmas and block fact as the relative proof) adds at most
  (1 + u) lambda 2^T + u (|X| + |C|) + a, with 2^T the largest alignment exponent of its addends:
  2^T <= max(2^e(P_i) 2^e(P_j), max(|C|, 2^emin(fp32)), 2^extra_top), |X| <= n p_i p_j, |C| <= the sum so far
  plus its error; a flushed subnormal C costs less than 2^emin(fp32) more; where the carry bits can bind
  (Volta) the wrap adds (1 + u) w (|X| + up 2^T) (:class:`tcsmt.arith.semantics.BlockShape`);
* Ootomo-Yokota's RN32 additions: (1 + u) lambda max(|x|, |y|, 2^extra) + u (|x| + |y|) + a.
"""
from __future__ import annotations

import time
from fractions import Fraction

from pysmt.shortcuts import And

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import FP32, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.errors import TcsmtError
from tcsmt.solve.solvers import solve
from tcsmt.verify.domain import Domain
from tcsmt.verify.lemmas import _domain_symbol
from tcsmt.verify.pieces import ChainScheme, chain_scheme, piece_abs_lemma
from tcsmt.verify.proof import CACHE, Proof, _block_const, _block_terms, _BlockConst, _rn32_const
from tcsmt.verify.schemes import OOTOMO_SCALE_LOG2, kblocks, scheme_key
from tcsmt.verify.stages import SB, StageLemma, add_zero_lemma, align_exact_lemma, align_shrink_lemma
from tcsmt.verify.top_inputs import OnTop, below_hi, prefix_lemma, top_chain_error, top_grid, top_residual_lemma


def _pow2_at_most(x: Fraction) -> Fraction:
    """The largest power of two <= x (x > 0)."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    return Fraction(2) ** e


def _pow2_below(x: Fraction) -> Fraction:
    """The largest power of two strictly below x (0 for x <= 0)."""
    if x <= 0:
        return Fraction(0)
    q = _pow2_at_most(x)
    return q / 2 if q == x else q


def _stage(key: tuple, make, proof: Proof) -> bool:
    """A stage lemma proven once per run (cached with the others), listed among the proof's lemmas; whether it
    holds (UNSAT)."""
    if key not in CACHE.aligns:
        CACHE.aligns[key] = (make(), Fraction(0))
    lem: StageLemma = CACHE.aligns[key][0]
    if not any(x is lem for x in proof.lemmas):
        proof.lemmas.append(lem)
    return lem.status == "unsat"


def _head_bound(cs: ChainScheme, keep: bool, dom: Domain, hi: Fraction, timeout: float, proof: Proof
                ) -> Fraction | None:
    """HI where ``fmt`` holds HI exactly and the head lemma holds: |P_0(x)| <= HI for every fp32 x in the
    domain, the piece as the model reads it (one query on one free input: P_0 = fmt(x) rounds to nearest and
    HI is a value of fmt, so it never passes HI); None otherwise (the bound HI + r_0 stands)."""
    if cs.scales and cs.scales[0]:
        return None
    try:
        hi_pattern = cs.fmt.from_fraction(hi)
    except TcsmtError:  # HI is not a value of fmt
        return None
    key = ("head", cs.fmt.name, cs.n, cs.scales, keep, dom.lo_pattern, dom.hi_pattern)

    def make() -> StageLemma:
        x, sym, cons = _domain_symbol(dom, "x")
        d = sem.decode(SB, cs.fmt, cs.cut(SB, x)[0], keep)
        q = sem.decode(SB, cs.fmt, SB.const(hi_pattern), keep)
        above = SB.or_(SB.gt(d.e, q.e), SB.and_(SB.eq(d.e, q.e), SB.gt(d.sig, q.sig)))
        t0 = time.perf_counter()
        ans = solve(And(cons, SB.or_(SB.or_(d.nan, d.inf), above)), {"x": sym}, "auto", timeout)
        return StageLemma(f"head[{cs.fmt.name}]", f"|P_0(x)| <= {float(hi):g} for fp32 x, {dom.describe()}",
                          ans.status, time.perf_counter() - t0)

    return hi if _stage(key, make, proof) else None


def _shrinks(p: ModelParams, timeout: float, proof: Proof) -> bool:
    """Whether every alignment of the block truncates magnitudes (so |v| <= the sum of the addends'
    magnitudes before the rounding), by the align-shrink lemma."""
    F = p.window_frac_bits
    if F is None or p.align != "trunc" or (p.c_mode == "after_sum" and p.late_align != "trunc"):
        return False
    if p.c_mode not in ("aligned", "after_sum"):
        return False
    bits = max(F, p.sum_frac_bits or 0)
    return _stage(("align-shrink", bits), lambda: align_shrink_lemma(bits, 1, 64, -(bits + 64), timeout), proof)


def _residuals(cs: ChainScheme, p: ModelParams, dom: Domain, timeout: float, proof: Proof) -> list[Fraction] | None:
    """r_0..r_(n-1) from the absolute piece lemmas (cached), or None (``proof.missing`` says why)."""
    out = []
    for i in range(cs.n):
        key = ("abs", cs.fmt.name, cs.n, cs.scales, p.subnormal_in, dom.lo_pattern, dom.hi_pattern, i)
        if key not in CACHE.pieces:
            CACHE.pieces[key] = piece_abs_lemma(cs, p.subnormal_in, dom, i, timeout)
        lem = CACHE.pieces[key]
        proof.lemmas.append(lem)
        if lem.bound is None:
            proof.missing = f"{lem.name}: {lem.stopped}"
            return None
        out.append(lem.bound)
    return out


class _Chain:
    """A tensor-core accumulator chain from +0 over magnitudes: ``err`` bounds |D - X| and ``mag`` |X| (X the exact
    sum of the piece products added so far)."""

    def __init__(self, p: ModelParams, pieces: list[Fraction], exps: list[Fraction], factor_top: Fraction,
                 timeout: float, proof: Proof, caps: list[Fraction] | None = None) -> None:
        self.p, self.pieces, self.exps, self.factor_top = p, pieces, exps, factor_top
        self.timeout, self.proof = timeout, proof
        self.err, self.mag = Fraction(0), Fraction(0)
        self.caps = caps  # |X| <= caps[t] after block t (a case of :mod:`tcsmt.verify.top_inputs`), or None
        self.blocks = 0
        self.v_tops: list[Fraction] = []  # each block's bound on its sum before the rounding (band rounding)
        self.errs: list[Fraction] = []  # err after each block
        self.flush_c = Fraction(0) if p.subnormal_c else Fraction(2) ** get_format(p.c_fmt).emin
        self.first = True  # the first block's C is +0
        self.shrink = _shrinks(p, timeout, proof)

    def add(self, i: int, j: int, n: int) -> bool:
        """acc = BLK(n products P_i(a_k) P_j(b_k), C = acc) for one block; False where the block has no constants."""
        bc = _block_const(self.p, n, self.timeout, self.proof.lemmas, self.factor_top, band=True)
        if isinstance(bc, str):
            self.proof.missing = bc
            return False
        x = n * self.pieces[i] * self.pieces[j]
        c = self.mag + self.err
        if self.caps is not None and self.blocks:  # C = X + error, |X| capped after the previous block
            c = min(c, self.caps[self.blocks - 1] + self.err)
        # 2^T: every exponent here is a power of two at most its addend's magnitude bound (2^e(C) <= |C| <= c)
        two_t = max(self.exps[i] * self.exps[j], _pow2_at_most(c) if c > 0 else Fraction(0),
                    Fraction(2) ** FP32.emin, bc.extra)
        loss = (bc.wrap0 if self.first else bc.wrap) * (x + bc.up * two_t)  # where the carry bits can bind
        align = self._align(bc, i, j, n, two_t)
        if bc.band:  # |v| <= V; the rounding charged at the largest power of two below V
            v_top = x + c if self.shrink and loss == 0 else x + c + align + loss
            if self.caps is not None:  # v = X + (C's error) - (what the alignments and the wrap lose)
                v_top = min(v_top, self.caps[self.blocks] + self.err + align + loss)
            self.v_tops.append(v_top)
            self.err += align + loss + bc.u * _pow2_below(v_top) + bc.a + self.flush_c * (1 + bc.u)
        else:
            self.err += (1 + bc.u) * (align + loss) + bc.u * (x + c) + bc.a + self.flush_c * (1 + bc.u)
        self.mag += x
        self.first = False
        self.blocks += 1
        self.errs.append(self.err)
        return True

    def _align(self, bc: _BlockConst, i: int, j: int, n: int, two_t: Fraction) -> Fraction:
        """What the block's alignments lose, at most: per level (:class:`tcsmt.arith.semantics.Alignment`) each
        addend less than unit 2^(E - frac_bits), E <= T; a products-only level's E is at most the largest product
        exponent (or extra_top).  Three cases, the largest counts: E set by a product (E <= its exponent bound): C
        loses at most one unit there (nothing where C = +0), and where the product that sets E lies on the grid
        (:meth:`_setter_exact`) it loses nothing; E set by C (E <= T): every product may lose, and an accumulator
        C (f = frac_bits(c_fmt) fraction bits, LSB 2^(e(C) - f)) on a level with frac_bits >= f loses nothing
        where e(C) = E (the align-exact lemma for the level's mode); E set by extra_top: every addend may lose."""
        if not bc.alignments:  # no levels known: every addend charged at 2^T
            return bc.lam * two_t
        top_p = max(self.exps[i] * self.exps[j], bc.extra)
        f_c = get_format(self.p.c_fmt).frac_bits
        total = Fraction(0)
        for level, (al, unit) in enumerate(zip(bc.alignments, bc.units)):
            each = unit / (1 << al.frac_bits)
            others = al.addends - (1 if al.holds_c else 0)
            fit = 1 if level == 0 and others == n and self._setter_exact(al, n) else 0
            if not al.holds_c:
                total += (others - fit) * each * top_p if not fit else max((others - 1) * each * top_p,
                                                                            others * each * bc.extra)
                continue
            exact = _align_exact(al.mode, al.frac_bits, f_c, self.timeout, self.proof)
            c_zero = exact and self.first  # C = +0
            by_product = (others - fit) * each * top_p + (0 if c_zero else each * top_p)
            if self.first:  # C = +0 joins E only as extra_top (a zero C's exponent)
                by_other = others * each * max(bc.extra, Fraction(2) ** FP32.emin) + (0 if c_zero else
                                                                                     each * two_t)
            else:
                by_other = others * each * two_t + (0 if exact and al.frac_bits >= f_c else each * two_t)
            by_extra = (others + (0 if c_zero else 1)) * each * bc.extra  # E set by extra_top: C may lose too
            total += max(by_product, by_other, by_extra)
        return total

    def _setter_exact(self, al: sem.Alignment, n: int) -> bool:
        """Whether a non-zero product whose exponent sets this level's E is placed exactly: the level aligns the
        block's n products on one grid (c_mode "aligned", or "after_sum" with one product group), every product's
        LSB lies gap = fa + fb below its raw exponent with gap <= frac_bits (so at or above the grid 2^(E -
        frac_bits) where its exponent is E), and the align-exact lemma holds for the level's mode and widths."""
        p = self.p
        if p.product_exponent != "raw" or p.zero_exponent is not None or not (
                p.c_mode == "aligned" or (p.c_mode == "after_sum" and p.product_groups == 1)):
            return False
        pterms, _ = _block_terms(p, n)
        f_c = get_format(p.c_fmt).frac_bits
        # raw product exponents: top = e_a + e_b and lsb = top - (fa + fb) for every product, so gap_min is the
        # gap itself (semantics.product_term)
        gaps = {t.gap_min for t in pterms}
        if len(gaps) != 1:
            return False
        gap = gaps.pop()
        if not 1 <= gap <= al.frac_bits or max(t.mag_bits for t in pterms) > f_c + 1 + al.frac_bits + 2:
            return False
        return _align_exact(al.mode, al.frac_bits, f_c, self.timeout, self.proof)


def _align_exact(mode: str, frac_bits: int, c_frac: int, timeout: float, proof: Proof) -> bool:
    """Whether the align-exact lemma holds for this level (an addend on the grid, or zero, placed exactly)."""
    return _stage(("align-exact", mode, frac_bits),
                  lambda: align_exact_lemma(mode, frac_bits, 1, c_frac + 1 + frac_bits + 2, timeout), proof)


def _chain(p: ModelParams, K: int, pairs: list[tuple[int, int]], pieces: list[Fraction], exps: list[Fraction],
           factor_top: Fraction, timeout: float, proof: Proof, k_ranges: list[tuple[int, int]] | None = None,
           caps: list[Fraction] | None = None) -> _Chain | None:
    ch = _Chain(p, pieces, exps, factor_top, timeout, proof, caps)
    for k0, k1 in (k_ranges or kblocks(K, p)):
        for i, j in pairs:
            for instr in sem.groups(k1 - k0, p):
                for ks in instr:
                    if not ch.add(i, j, len(ks)):
                        return None
    return ch


def _top_split(cs: ChainScheme, p: ModelParams, K: int, dom: Domain, hi: Fraction, piece: list[Fraction],
               exps: list[Fraction], factor_top: Fraction, timeout: float, proof: Proof) -> Fraction | None:
    """The chain error by the case split of :mod:`tcsmt.verify.top_inputs` (Markidis's chain: one block of K
    products per piece product, C aligned with them; the head lemma holds), or None where it does not apply or a
    lemma does not hold."""
    if cs.n != 2 or cs.pairs != [(0, 0), (0, 1), (1, 0)] or any(cs.scales or ()) or p.c_mode != "aligned":
        return None
    if [len(ks) for k0, k1 in kblocks(K, p) for instr in sem.groups(k1 - k0, p) for ks in instr] != [K]:
        return None
    total = K * hi * hi
    try:
        above = FP32.to_fraction(FP32.from_fraction(total) + 1)
    except TcsmtError:  # K HI^2 is not an fp32 value
        return None
    if not isinstance(above, Fraction):  # K HI^2 is fp32's largest finite value
        return None
    step = above - total
    keep, gap = p.subnormal_in, hi - below_hi(cs, hi)
    caps = []
    for t in (1, 2, 3):  # off the top: |S_t| <= K HI^2 - m_t (every head at HI with both signs too: 2 HI p_1 <= ...)
        for margin in (hi * gap / 2, hi * gap / 4):
            key = ("prefix", cs.fmt.name, cs.split, keep, dom.lo_pattern, dom.hi_pattern, t, margin)
            if 2 * hi * (hi - piece[1]) >= margin and _stage(
                    key, lambda t=t, m=margin: prefix_lemma(cs, p, keep, dom, hi, t, m, timeout), proof):
                caps.append(total - margin)
                break
        else:
            return None
    off = _chain(p, K, cs.pairs, piece, exps, factor_top, timeout, proof, caps=caps)
    plain = _chain(p, K, cs.pairs, piece, exps, factor_top, timeout, proof)
    bc = _block_const(p, K, timeout, proof.lemmas, factor_top, band=True)
    if off is None or plain is None or isinstance(bc, str) or not bc.band or len(bc.alignments) != 1:
        return None
    al, f_c = bc.alignments[0], get_format(p.c_fmt).frac_bits
    rkey = ("top-residual", cs.fmt.name, cs.split, keep, dom.lo_pattern, dom.hi_pattern)
    if not (al.holds_c and al.frac_bits >= f_c and _align_exact(al.mode, al.frac_bits, f_c, timeout, proof)
            and _stage(rkey, lambda: top_residual_lemma(cs, keep, dom, hi, timeout), proof)):
        return None
    v2 = Fraction(2) ** (((hi.numerator & -hi.numerator).bit_length() - 1) - (hi.denominator.bit_length() - 1))
    on = top_chain_error(plain.errs[0], plain.v_tops[0], 2, bc.u, bc.a, bc.units[0] / (1 << al.frac_bits),
                         al.mode == "trunc", OnTop(K, total, step, K * hi * piece[1],
                                                   v2 * Fraction(2) ** top_grid(hi), max(exps[0] * exps[1], bc.extra)))
    return None if on is None else max(off.err, on)


def _rn32(bc: _BlockConst, x: Fraction, y: Fraction) -> Fraction:
    """The error of RN32(x + y) for addends of magnitude at most x and y."""
    return (1 + bc.u) * bc.lam * max(x, y, bc.extra) + bc.u * (x + y) + bc.a


def compose_abs(algo: str, arch: str, p: ModelParams, K: int, dom: Domain, timeout: float) -> Proof:
    """A composed bound on the absolute error |D - A.B| of scheme ``algo`` on model ``p`` (module docstring)."""
    t0 = time.perf_counter()
    proof = Proof(scheme_key(algo), arch, K, dom)
    try:
        cs = chain_scheme(algo)
    except TcsmtError as exc:
        proof.missing = str(exc)
        return proof
    hi = FP32.to_fraction(dom.hi_pattern)
    assert isinstance(hi, Fraction)
    r = _residuals(cs, p, dom, timeout, proof)
    if r is None:
        proof.seconds = time.perf_counter() - t0
        return proof
    head = _head_bound(cs, p.subnormal_in, dom, hi, timeout, proof)
    piece = [head if head is not None else hi + r[0]] + [r[i - 1] + r[i] for i in range(1, cs.n)]
    dropped = [(i, j) for i in range(cs.n) for j in range(cs.n) if (i, j) not in cs.pairs]
    per_k = sum((piece[i] * piece[j] for i, j in dropped), Fraction(0)) + (hi + r[-1]) * r[-1] + r[-1] * hi
    proof.split_part = K * per_k
    seen = [q * (1 << s) for q, s in zip(piece, cs.scales or (0,) * cs.n)]  # as the tensor cores see them
    emin = Fraction(2) ** cs.fmt.emin
    exps = [max(_pow2_at_most(q), emin) if q > 0 else emin for q in seen]
    factor_top = max(exps)
    if proof.algo == "ootomo":
        total = _ootomo(p, K, seen, exps, factor_top, timeout, proof)
    else:
        ch = _chain(p, K, cs.pairs, seen, exps, factor_top, timeout, proof)
        total = None if ch is None else (ch.err, ch.mag)
        if ch is not None and head is not None:  # the case split at the top of the domain, where it applies
            split = _top_split(cs, p, K, dom, hi, piece, exps, factor_top, timeout, proof)
            if split is not None and split < ch.err:
                total = (split, ch.mag)
    if total is None:
        proof.seconds = time.perf_counter() - t0
        return proof
    err, mag = total
    biggest = max(seen)
    if mag + err >= Fraction(2) ** (get_format(p.acc_fmt).emax - 1):
        proof.missing = "the accumulator could overflow on this domain"
    elif p.product_inf is not None and biggest ** 2 * 4 >= Fraction(2) ** p.product_inf:
        proof.missing = f"products can reach the model's product_inf = 2^{p.product_inf}"
    else:
        proof.chain_part = err
        proof.bound = proof.split_part + proof.chain_part
    proof.seconds = time.perf_counter() - t0
    return proof


def _add_zero(timeout: float, proof: Proof) -> bool:
    """Whether ``rn32_sum(+0, y) = y`` is proven (:func:`tcsmt.verify.stages.add_zero_lemma`, once per run)."""
    return _stage(("add-zero",), lambda: add_zero_lemma(timeout), proof)


def _ootomo(p: ModelParams, K: int, seen: list[Fraction], exps: list[Fraction], factor_top: Fraction,
            timeout: float, proof: Proof) -> tuple[Fraction, Fraction] | None:
    """(error, magnitude) of Ootomo-Yokota over magnitudes (the chains of :func:`tcsmt.verify.proof._ootomo_chains`)."""
    add = _rn32_const(timeout, proof, 0)
    fin = _rn32_const(timeout, proof, -OOTOMO_SCALE_LOG2)
    if add is None or fin is None:
        return None
    zero = _add_zero(timeout, proof)
    em, am = Fraction(0), Fraction(0)
    for n_kb, kb in enumerate(kblocks(K, p)):
        tmp = _chain(p, K, [(0, 0)], seen, exps, factor_top, timeout, proof, [kb])
        if tmp is None:
            return None
        # the first RN32(main + tmp) adds tmp to main = +0: exact where the add-zero lemma holds
        em += tmp.err + (0 if n_kb == 0 and zero else _rn32(add, am + em, tmp.mag + tmp.err))
        am += tmp.mag
    corr = _chain(p, K, [(1, 0), (0, 1)], seen, exps, factor_top, timeout, proof)
    if corr is None:
        return None
    scale = Fraction(1, 1 << OOTOMO_SCALE_LOG2)
    err = em + corr.err * scale + _rn32(fin, am + em, (corr.mag + corr.err) * scale)
    return err, am + corr.mag * scale
