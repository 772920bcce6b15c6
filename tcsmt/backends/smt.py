"""SMT back end: the semantics' integer operations as fixed-width bit-vector terms (pysmt, QF_BV).

Every integer is a :class:`Bv`: a pysmt bit-vector term read as a two's-complement
number of width ``w``.  Operations widen their operands first (sign extension)
so that no operation can overflow: the terms denote exactly the integers the
simulator computes.  ``fit`` narrows a term to a width the semantics proves is
enough (one extract), which keeps the circuits small.  Booleans are pysmt
Boolean formulas.
"""
from __future__ import annotations

from dataclasses import dataclass

from pysmt.fnode import FNode
from pysmt.shortcuts import (
    BV,
    BVSLE,
    BVSLT,
    FALSE,
    TRUE,
    And,
    BVAdd,
    BVAnd,
    BVAShr,
    BVExtract,
    BVLShl,
    BVLShr,
    BVMul,
    BVNeg,
    BVSExt,
    BVSub,
    BVZExt,
    Equals,
    Iff,
    Ite,
    Not,
    Or,
    Symbol,
)
from pysmt.typing import BVType

from tcsmt.arith.formats import Format


@dataclass(frozen=True)
class Bv:
    """A pysmt bit-vector term ``t`` of width ``w``, read as a signed integer."""

    t: FNode
    w: int


def _signed_width(v: int) -> int:
    return (v.bit_length() if v >= 0 else (-v - 1).bit_length()) + 1


class SmtBackend:
    """Exact integer operations as QF_BV terms (see module docstring)."""

    # ---- constants, symbols, booleans
    def const(self, v: int) -> Bv:
        w = _signed_width(int(v))
        return Bv(BV(int(v) % (1 << w), w), w)

    def true(self):
        return TRUE()

    def false(self):
        return FALSE()

    def symbol(self, name: str, bits: int) -> Bv:
        """A free unsigned input of ``bits`` bits (e.g. a bit pattern)."""
        s = Symbol(name, BVType(bits))
        return Bv(BVZExt(s, 1), bits + 1)

    def _lift(self, x) -> Bv:
        if isinstance(x, Bv):
            return x
        return self.const(int(x))

    @staticmethod
    def _ext(x: Bv, w: int) -> FNode:
        return x.t if x.w == w else BVSExt(x.t, w - x.w)

    def _pair(self, x, y, extra: int = 0):
        x, y = self._lift(x), self._lift(y)
        w = max(x.w, y.w) + extra
        return self._ext(x, w), self._ext(y, w), w

    def fields(self, fmt: Format, bits):
        x = self._lift(bits)
        need = fmt.storage_bits + 1
        if x.w < need:  # a narrower non-negative term: widen it
            x = Bv(self._ext(x, need), need)
        lo = fmt.pad_bits
        total = x.w

        def field(start: int, n: int) -> Bv:
            if n == 0:  # an absent field (ue8m0 has no fraction bits): the constant 0
                return Bv(BV(0, 1), 1)
            if start + n > total:
                raise ValueError("bit field beyond the term")
            return Bv(BVZExt(BVExtract(x.t, start, start + n - 1), 1), n + 1)

        frac = field(lo, fmt.frac_bits)
        expf = field(lo + fmt.frac_bits, fmt.exp_bits)
        sign = field(lo + fmt.frac_bits + fmt.exp_bits, 1)
        return sign, expf, frac

    # ---- arithmetic
    def add(self, x, y) -> Bv:
        a, b, w = self._pair(x, y, 1)
        return Bv(BVAdd(a, b), w)

    def sub(self, x, y) -> Bv:
        a, b, w = self._pair(x, y, 1)
        return Bv(BVSub(a, b), w)

    def neg(self, x) -> Bv:
        x = self._lift(x)
        return Bv(BVNeg(self._ext(x, x.w + 1)), x.w + 1)

    def mul(self, x, y, out_bits: int) -> Bv:
        x, y = self._lift(x), self._lift(y)
        w = x.w + y.w
        return Bv(BVMul(self._ext(x, w), self._ext(y, w)), w)

    def mul_const(self, x, k: int) -> Bv:
        x = self._lift(x)
        if k > 0 and k & (k - 1) == 0:  # a power of two: a shift
            n = k.bit_length() - 1
            w = x.w + n
            return Bv(BVLShl(self._ext(x, w), BV(n, w)), w)
        return self.mul(x, k, 0)

    def shl(self, x, s, smax: int, out_bits: int) -> Bv:
        """x * 2^s for 0 <= s <= smax and x >= 0."""
        x, s = self._lift(x), self._lift(s)
        w = max(x.w + smax, s.w)
        return Bv(BVLShl(self._ext(x, w), self._ext(s, w)), w)

    def shr(self, x, s) -> Bv:
        """floor(x / 2^s) for x >= 0 and s >= 0."""
        x, s = self._lift(x), self._lift(s)
        w = max(x.w, s.w)
        r = BVAShr(self._ext(x, w), self._ext(s, w))
        if w > x.w:
            r = BVExtract(r, 0, x.w - 1)
        return Bv(r, x.w)

    def low_nonzero(self, x, s):
        """(x mod 2^s) != 0 for x >= 0 and s >= 0."""
        x, s = self._lift(x), self._lift(s)
        w = max(x.w, s.w)
        one = BV(1, w)
        mask = BVSub(BVLShl(one, self._ext(s, w)), one)
        return Not(Equals(BVAnd(self._ext(x, w), mask), BV(0, w)))

    def mod_pow2(self, x, n: int) -> Bv:
        x = self._lift(x)
        if n + 1 >= x.w:
            return x
        return Bv(BVZExt(BVExtract(x.t, 0, n - 1), 1), n + 1)

    def msb(self, x, bits: int) -> Bv:
        """floor(log2 x) for x > 0, -1 for x = 0 (x >= 0)."""
        x = self._lift(x)
        n = x.w - 1  # value bits (x is non-negative)
        rw = max(n.bit_length(), 1) + 1
        v = x.t
        r = BV(0, rw)
        step = 1 << max(0, (n - 1).bit_length() - 1) if n > 1 else 0
        zero = BV(0, x.w)
        while step >= 1:
            shifted = BVLShr(v, BV(step, x.w))
            big = Not(Equals(shifted, zero))
            v = Ite(big, shifted, v)
            r = Ite(big, BVAdd(r, BV(step, rw)), r)
            step >>= 1
        res = Ite(Equals(x.t, zero), BV((1 << rw) - 1, rw), r)
        return Bv(res, rw)

    def fit(self, x, bits: int) -> Bv:
        x = self._lift(x)
        if x.w > bits:
            return Bv(BVExtract(x.t, 0, bits - 1), bits)
        return x

    # ---- comparison and selection
    def ite(self, c, x, y):
        if isinstance(x, FNode) or isinstance(y, FNode):
            return Ite(c, self._bool(x), self._bool(y))
        a, b, w = self._pair(x, y)
        return Bv(Ite(c, a, b), w)

    def _bool(self, x):
        if isinstance(x, FNode):
            return x
        return TRUE() if x else FALSE()

    def max(self, x, y) -> Bv:
        a, b, w = self._pair(x, y)
        return Bv(Ite(BVSLT(a, b), b, a), w)

    def min(self, x, y) -> Bv:
        a, b, w = self._pair(x, y)
        return Bv(Ite(BVSLT(a, b), a, b), w)

    def eq(self, x, y):
        a, b, _ = self._pair(x, y)
        return Equals(a, b)

    def ne(self, x, y):
        return Not(self.eq(x, y))

    def lt(self, x, y):
        a, b, _ = self._pair(x, y)
        return BVSLT(a, b)

    def le(self, x, y):
        a, b, _ = self._pair(x, y)
        return BVSLE(a, b)

    def gt(self, x, y):
        return self.lt(y, x)

    def ge(self, x, y):
        return self.le(y, x)

    def and_(self, x, y):
        return And(self._bool(x), self._bool(y))

    def or_(self, x, y):
        return Or(self._bool(x), self._bool(y))

    def xor(self, x, y):
        return Not(Iff(self._bool(x), self._bool(y)))

    def not_(self, x):
        return Not(self._bool(x))

    # ---- results
    def pattern(self, x, bits: int) -> FNode:
        """The low ``bits`` bits of a non-negative result: the output bit pattern."""
        x = self._lift(x)
        if x.w == bits:
            return x.t
        if x.w > bits:
            return BVExtract(x.t, 0, bits - 1)
        return BVZExt(x.t, bits - x.w)
