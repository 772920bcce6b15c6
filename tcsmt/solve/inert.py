"""Which parameters cannot change any output of one instruction: a static pass over :mod:`tcsmt.arith.semantics`.

:func:`inert_parameters` returns, for a model ``p``, the parameters whose value provably changes no
output of one instruction (any A, B of ``in_fmt``, any C of ``c_fmt``, specials included), each with
the value that stands for "inert"; :func:`canonical` applies them.  Two hypotheses that differ only
there compute the same function, so ``tcsmt identify`` merges them before any solver query (the
20 s equivalence proofs on the fp8 ``mma.sync`` circuits become no query at all).  It extends
:func:`tcsmt.arith.semantics.unread_parameters` (parameters the code never reads) with parameters the code
reads but that no reachable value lets matter.  Everything here is a plain-integer (Fraction) bound;
nothing is solved.

The pass walks the stages of one instruction as :func:`tcsmt.arith.semantics.dot` runs them (the blocks of
``groups(instr_k, p)``, then the C addition of ``after_instr`` / ``after``, then the conversion to
``out_fmt``) and keeps, for the value each stage hands on, a :class:`Span`: every non-zero value is a
multiple of ``2^grid`` and at most ``peak`` in magnitude.

Proof sketch, fact by fact (``S`` is a stage's exact sum, ``r`` its rounded result):

* **Grids.**  An ``in_fmt`` value is a multiple of ``2^(emin - f)``; an exact conversion to
  ``operand_fmt`` keeps the value, so a product is a multiple of ``2^(2(emin - f))`` of ``in_fmt``.
  Aligning a term to the window's last bit ``2^L`` keeps a multiple of ``2^max(lsb, L)`` (truncation,
  floor, or rounding up by one unit of ``2^L``), a multiple of the term's grid; a wrap modulo
  ``2^cap`` units of ``2^L`` keeps it too (``grid - L <= F < cap`` since ``E >= grid``).  So a
  non-zero ``S`` is a multiple of ``2^g``, ``g`` the least grid of its non-zero addends, and
  ``|S| >= 2^g``.  If rounding ``S`` to ``fb`` fraction bits is inexact, the rounding step exceeds
  ``2^g``, so ``r`` is a multiple of ``2^g`` as well, and always of ``2^(emin - fb)``: the result's
  grid is ``max(g, emin - fb)``.
* **Peaks.**  ``|S| <= sum of the addends' peaks`` (plus one unit of ``2^L`` per addend where the
  alignment can round up: bounded by ``2^(top_max - F)``); a finite rounded result is at most the
  format's largest value with ``fb`` fraction bits, and at most ``S``'s peak rounded up.  An
  infinite or NaN result reaches the next stage as a special (significand 0, a flag), which adds
  nothing to the finite sums.
* ``zero_sign``: :func:`tcsmt.arith.semantics.sum_and_round` reads it for a non-zero ``S`` whose rounded
  result is zero (``positive`` and ``plus`` give +0, ``ieee`` the sign of ``S``), and ``plus`` also for
  a zero ``S`` whose IEEE sign is negative: every addend a -0 (a product is -0 whenever one factor is a
  zero and the signs differ, so a block of products alone, or with a C that may be -0, can be), or an
  exact cancellation rounded toward -inf.  With ``|S| >= 2^g`` and ``g >= emin - fb`` (subnormals kept;
  ``g >= emin`` when they are flushed) no stage rounds a non-zero sum to zero, so ``positive`` is the
  same function as ``ieee``: inert; ``plus`` is so only where, besides, no stage can sum -0 addends
  only and none rounds with ``rd`` (``after_instr``, whose blocks start from a known +0: +0 + -0 is
  +0).  ``exact_plus`` is ``plus`` for a zero ``S`` and ``ieee`` for a non-zero one: inert where both are.
* ``overflow_result``: read only where a rounding overflows with a mode other than RNE (RNE gives inf
  with both values).  A stage whose ``S`` peak is at most the largest finite value with ``fb``
  fraction bits never overflows (rounding is monotone and that value is representable): inert when
  every stage with a directed rounding is so bounded.
* ``subnormal_out``: read where a result is subnormal; ``g >= emin`` at every rounding stage means
  every non-zero result is at least ``2^emin``: inert.
* ``subnormal_in``: read when decoding the (converted) operands; with an ``operand_fmt`` whose
  ``emin`` is at most ``in_fmt``'s least subnormal exponent no converted operand is subnormal: inert.
* ``carry_bits`` (and with it ``overflow``): :func:`tcsmt.arith.semantics.block_sum` wraps only where the
  static bound of the block's sum (:func:`tcsmt.arith.semantics._sum_bits`) exceeds ``F + 1 + carry_bits``;
  where no block of the instruction does, the circuit is the unbounded one: inert.  (A block of ``n``
  addends below ``2^(E+h)`` reaches at most ``2^(E+h+ceil(log2 n))``.)
* ``align_floor``: inert where :func:`tcsmt.arith.semantics._floor_is_inert` holds for every block (the
  same test the semantics applies: it then leaves the floor out of the circuit).
* ``zero_exponent``: a zero addend joins E with exponent ``z + e(other factor)`` (``2z`` for two zeros,
  ``z`` for a zero C).  Where that is at most every non-zero addend's least alignment exponent (a
  product's static ``top_min``; a C's, and at least its span's grid), E is unchanged whenever some
  addend is non-zero, and a block of zeros sums to zero with any E: inert (``c_mode`` aligned, after,
  after_instr).  MMA-Sim's -126 on fp8 -> fp16 paths: zero exponents at most -126 + 15 = -111, products
  at least 2^-28 (fp16 operands), the chained accumulator at least 2^-14 (fp16 emin).
* ``extra_bits``: a window that no addend can reach below (every addend's grid at least
  ``E_max - F``, ``E_max`` the largest alignment exponent any addend or the floor can give) drops no
  bit, so with inert carry bits the window sum is the exact sum: ``extra_bits`` is then ``exact``
  (and every larger window is the same function).

``tests/test_identify_inert.py`` checks with the simulator that applying the pass never changes an
output (random rows and adversarial ones: largest products of one sign, cancellations near zero,
subnormal C, tiny products) on the hypothesis spaces of the fp8, fp16 and bf16 paths.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import Format, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.backends.numpy import NumpyBackend

_NP = NumpyBackend()


@dataclass(frozen=True)
class Span:
    """What a stage's value can be: every non-zero value is a multiple of 2^grid and at most peak; ``neg_zero``:
    it may be -0 (by IEEE sign rules, as ``zero_sign = ieee`` computes it)."""

    grid: int
    peak: Fraction
    neg_zero: bool = True


def _values_of(fmt: Format) -> Span:
    return Span(fmt.emin - fmt.frac_bits, fmt.max_finite)


def _largest(fmt: Format, fb: int) -> Fraction:
    """The largest finite value of ``fmt`` with ``fb`` fraction bits."""
    return (2 - Fraction(1, 1 << fb)) * Fraction(2) ** fmt.emax


@dataclass
class _Facts:
    """What the stages of one instruction can do (True: the parameter may matter)."""

    zero: bool = False        # a non-zero sum may round to zero (zero_sign read)
    neg_zero: bool = False    # a zero sum may carry a -0 by IEEE rules (zero_sign = plus read)
    overflow: bool = False    # a directed rounding may overflow (overflow_result read)
    subnormal: bool = False   # a rounding result may be subnormal (subnormal_out read)
    carry: bool = False       # some block's sum may reach the carry bits
    floor: bool = False       # some block's floor is not inert
    window: bool = False      # some block's window may drop a bit
    zero_top: bool = False    # a zero addend's exponent may exceed a non-zero addend's (zero_exponent read)


def _round(f: _Facts, s: Span, fmt: Format, fb: int, mode: str, keep_sub: bool) -> Span:
    """A rounding stage (:func:`tcsmt.arith.semantics.round_to` of S into ``fmt`` with ``fb`` bits)."""
    underflow = s.grid < (fmt.emin - fb if keep_sub else fmt.emin)
    if underflow:
        f.zero = True
    neg_zero = s.neg_zero or mode == "rd" or underflow  # all -0 addends, an rd cancellation, a negative underflow
    if neg_zero:
        f.neg_zero = True
    if s.grid < fmt.emin:
        f.subnormal = True
    top = _largest(fmt, fb)
    if s.peak > top and mode != "rne":
        f.overflow = True
    up = s.peak * (1 + Fraction(1, 1 << fb)) + Fraction(2) ** (fmt.emin - fb)
    return Span(max(s.grid, fmt.emin - fb), min(up, top), neg_zero)


TERM_FIELDS = ("in_fmt", "b_fmt", "operand_fmt", "subnormal_in", "subnormal_c", "zero_exponent", "product_exponent",
               "align", "align_floor", "carry_bits", "overflow", "scale_fmt", "scale_apply", "scale_group_bits",
               "scale_group_k", "scale_zero_group", "product_inf")
"""The parameters :func:`tcsmt.arith.semantics.block_terms` reads (``tests/test_identify_inert.py`` checks the list
against the semantics' source): its static term facts depend on nothing else."""
_TERMS: dict[tuple, tuple[list[Any], Any]] = {}


def _zero_terms(p: ModelParams, n: int, c_fmt: Format, c_zero: bool) -> tuple[list[Any], Any]:
    """The static facts (widths, top exponents) of a block's ``n`` product terms and its C term, shared by
    every model that agrees on :data:`TERM_FIELDS` (identify canonicalises thousands of hypotheses)."""
    key = (tuple(getattr(p, k) for k in TERM_FIELDS), n, c_fmt.name, c_zero)
    hit = _TERMS.get(key)
    if hit is None:
        z = np.zeros(1, dtype=np.int64)
        pterms, c_term, _ = sem.block_terms(_NP, p, [z] * n, [z] * n, 0 if c_zero else z, c_fmt)
        hit = _TERMS[key] = (list(pterms), c_term)
    return hit


def _block_window(f: _Facts, p: ModelParams, n: int, c_span: Span | None, c_fmt: Format, c_zero: bool,
                  with_c: bool) -> Span:
    """The window sum of ``n`` products (and C unless ``with_c`` is False): carry, floor, window facts."""
    fin, fb = get_format(p.in_fmt), get_format(p.b_fmt or p.in_fmt)  # B's own format on mixed paths
    prod = Span(fin.emin - fin.frac_bits + fb.emin - fb.frac_bits, fin.max_finite * fb.max_finite)
    pterms, c_term = _zero_terms(p, n, c_fmt, c_zero)
    terms = [*pterms, c_term] if with_c else list(pterms)
    spans = [prod] * n + ([c_span] if with_c and c_span is not None and not c_zero else [])
    F = p.window_frac_bits
    peak = sum((s.peak for s in spans), Fraction(0))
    if F is not None:
        if p.carry_bits != "unbounded" and F + 1 + int(p.carry_bits) < sem._sum_bits(terms, F, p, 0):
            f.carry = True
        if p.align_floor is not None and not sem._floor_is_inert(terms, F, p):
            f.floor = True
        live = [t for t in terms if not t.known_zero] or terms[:1]
        e_max = max(t.top_max for t in live)
        if p.align_floor is not None:
            e_max = max(e_max, p.align_floor)
        if any(s.grid < e_max - F for s in spans):
            f.window = True
        if p.align != "trunc":
            peak += len(spans) * Fraction(2) ** (e_max - F)
        if p.zero_exponent is not None and _zero_top_reaches(p, n, c_span, c_fmt, c_zero, with_c):
            f.zero_top = True
    grid = min((s.grid for s in spans), default=0)
    # every product may be -0 (a zero factor, signs differing); C: a known +0 never, else as its span says
    neg_zero = not (with_c and (c_zero or (c_span is not None and not c_span.neg_zero)))
    return Span(grid, peak, neg_zero)


def _zero_top_reaches(p: ModelParams, n: int, c_span: Span | None, c_fmt: Format, c_zero: bool,
                      with_c: bool) -> bool:
    """May a zero addend's alignment exponent (``zero_exponent``) exceed a non-zero addend's in this block?

    A zero product's exponent is at most ``max(2z, z + emax)`` (``emax`` of the factors' format after the
    exact operand conversion), a zero C's ``z``; a non-zero product's is at least its static ``top_min``
    without zero exponents, a non-zero C's at least that and at least its span's grid (its value is at
    least ``2^grid``).  Where no zero exponent exceeds them, E is the same whenever an addend is non-zero,
    and a block of zeros sums to zero with either E.
    """
    z = p.zero_exponent
    assert z is not None
    fa = get_format(p.operand_fmt or p.in_fmt)
    fb = get_format(p.operand_fmt or p.b_fmt or p.in_fmt)
    zero_hi = max(2 * z, z + max(fa.emax, fb.emax), z)
    pterms, c_term = _zero_terms(dataclasses.replace(p, zero_exponent=None), n, c_fmt, c_zero)
    lows = [t.top_min for t in pterms]
    if with_c and not c_zero:
        lows.append(max(c_term.top_min, c_span.grid) if c_span is not None else c_term.top_min)
    return bool(lows) and zero_hi > min(lows)


def _facts(p: ModelParams) -> _Facts | None:
    """Walk one instruction's stages (None: a reduction this pass does not analyse)."""
    if p.reduction != "chain" or not p.instr_k:  # library chains (instr_k 0) have no instruction bound
        return None
    if p.scale_fmt:  # block-scaled: the scales move every addend; this pass does not analyse them
        return None
    f = _Facts()
    acc, out, fc = get_format(p.acc_fmt), get_format(p.out_fmt), get_format(p.c_fmt)
    c_span = _values_of(fc)
    cur: Span | None = c_span
    cur_fmt, cur_zero = fc, False
    if p.c_mode == "after_instr":
        cur, cur_fmt, cur_zero = None, acc, True
    for ks in sem.groups(p.instr_k, p)[0]:
        n = len(ks)
        if p.c_mode == "after":
            part = _round(f, _block_window(f, p, n, None, cur_fmt, False, False), acc, p.block_frac_bits,
                          p.block_round, p.subnormal_out)
            spans = [part] + ([cur] if cur is not None else [])
            s = Span(min(x.grid for x in spans), sum((x.peak for x in spans), Fraction(0)),
                     all(x.neg_zero for x in spans))
            cur = _round(f, s, acc, acc.frac_bits, p.c_round, p.subnormal_out)
        else:
            s = _block_window(f, p, n, cur, cur_fmt, cur_zero, True)
            cur = _round(f, s, acc, p.block_frac_bits, p.block_round, p.subnormal_out)
        cur_fmt, cur_zero = acc, False
    assert cur is not None
    if p.c_mode == "after_instr":  # + the instruction's C, exact and rounded once
        s = Span(min(cur.grid, c_span.grid), cur.peak + c_span.peak, cur.neg_zero and c_span.neg_zero)
        cur = _round(f, s, acc, acc.frac_bits, p.c_round, p.subnormal_out)
    if out != acc:
        _round(f, cur, out, out.frac_bits, p.out_round, p.subnormal_out)
    return f


def inert_parameters(p: ModelParams) -> dict[str, Any]:
    """The parameters no output of one instruction depends on, each with its "inert" value.

    :func:`tcsmt.arith.semantics.unread_parameters` plus the range facts of the module docstring,
    applied until nothing changes (setting one parameter can make another inert).
    """
    changes: dict[str, Any] = {}
    q = p
    for _ in range(4):
        ch = dict(sem.unread_parameters(q))
        f = _facts(q)
        if f is not None:
            if not f.zero and (q.zero_sign not in ("plus", "exact_plus") or not f.neg_zero):
                ch["zero_sign"] = "ieee"
            if not f.overflow:
                ch["overflow_result"] = "ieee"
            if not f.subnormal:
                ch["subnormal_out"] = True
            if q.operand_fmt and get_format(q.in_fmt).min_subnormal_exp >= get_format(q.operand_fmt).emin:
                ch["subnormal_in"] = True
            if q.window_frac_bits is not None:
                if not f.carry and q.carry_bits != "unbounded":
                    ch.update(carry_bits="unbounded", overflow="wrap")
                if not f.floor and q.align_floor is not None:
                    ch["align_floor"] = None
                if not f.window and not f.carry and not f.floor:
                    ch["extra_bits"] = "exact"
                if (q.zero_exponent is not None and not f.zero_top
                        and q.c_mode in ("aligned", "after", "after_instr")):
                    ch["zero_exponent"] = None
        ch = {k: v for k, v in ch.items() if getattr(q, k) != v}
        if not ch:
            break
        changes.update(ch)
        q = dataclasses.replace(q, **ch)
    return {k: v for k, v in changes.items() if getattr(p, k) != v}


def canonical(p: ModelParams) -> ModelParams:
    """``p`` with every inert parameter set to its fixed value (same outputs on every instruction input)."""
    ch = inert_parameters(p)
    return dataclasses.replace(p, **ch) if ch else p
