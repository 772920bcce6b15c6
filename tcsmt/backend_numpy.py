"""Simulator back end: the semantics' integer operations on numpy arrays.

Values are int64 arrays while their static bound is at most 62 bits, and
object arrays of Python integers beyond that (``fit``), so the arithmetic is
exact everywhere.  Booleans are numpy bool arrays.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .formats import Format

_INT_LIMIT = 62


def _is_obj(*xs) -> bool:
    return any(isinstance(x, np.ndarray) and x.dtype == object for x in xs)


def _bit_length(x: int) -> int:
    return int(x).bit_length()


_bit_length_u = np.frompyfunc(_bit_length, 1, 1)


@lru_cache(maxsize=None)
def _field_tables(fmt: Format) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lookup tables sign/exponent field/fraction for 8- and 16-bit formats."""
    allbits = np.arange(1 << fmt.storage_bits, dtype=np.uint64)
    s, e, f = fmt.fields(allbits)
    return s.astype(np.int64), e.astype(np.int64), f.astype(np.int64)


class NumpyBackend:
    """Exact integer operations over numpy arrays (broadcasting like numpy)."""

    # ---- constants and booleans
    def const(self, v: int):
        return v

    def true(self):
        return np.bool_(True)

    def false(self):
        return np.bool_(False)

    def fields(self, fmt: Format, bits):
        if fmt.storage_bits <= 16:
            s, e, f = _field_tables(fmt)
            idx = np.asarray(bits).astype(np.int64)
            return s[idx], e[idx], f[idx]
        return fmt.fields(bits)

    # ---- arithmetic
    def add(self, x, y):
        return np.add(x, y)

    def sub(self, x, y):
        return np.subtract(x, y)

    def neg(self, x):
        return np.negative(x)

    def mul(self, x, y, out_bits: int):
        if out_bits > _INT_LIMIT:
            x = self._obj(x)
        return np.multiply(x, y)

    def mul_const(self, x, k: int):
        return np.multiply(x, k)

    def shl(self, x, s, smax: int, out_bits: int):
        """x * 2^s for 0 <= s <= smax (x >= 0)."""
        if out_bits > _INT_LIMIT:
            x = self._obj(x)
            return np.left_shift(x, np.asarray(s).astype(object))
        return np.left_shift(x, s)

    def shr(self, x, s):
        """floor(x / 2^s) for x >= 0, s >= 0 (any size)."""
        if _is_obj(x):
            return np.right_shift(x, np.asarray(s).astype(object))
        return np.right_shift(x, np.minimum(s, 63))

    def low_nonzero(self, x, s):
        """(x mod 2^s) != 0 for x >= 0, s >= 0."""
        if _is_obj(x):
            s_o = np.asarray(s).astype(object)
            return np.not_equal(np.bitwise_and(x, np.left_shift(1, s_o) - 1), 0)
        s62 = np.minimum(s, 62)
        return np.not_equal(np.bitwise_and(x, np.left_shift(np.int64(1), s62) - 1), 0)

    def mod_pow2(self, x, n: int):
        return np.bitwise_and(x, (1 << n) - 1)

    def msb(self, x, bits: int):
        """floor(log2 x) for x > 0; -1 for x = 0."""
        if _is_obj(x):
            return (_bit_length_u(x) - 1).astype(np.int64)
        x = np.asarray(x, dtype=np.int64)
        r = np.zeros(x.shape, dtype=np.int64)
        step = 32
        while step:
            big = (x >> step) != 0
            x = np.where(big, x >> step, x)
            r += np.where(big, step, 0)
            step >>= 1
        return np.where(x == 0, -1, r)

    def fit(self, x, bits: int):
        if bits > _INT_LIMIT:
            return self._obj(x)
        return x

    @staticmethod
    def _obj(x):
        if isinstance(x, np.ndarray):
            return x if x.dtype == object else x.astype(object)
        return np.asarray(x, dtype=object) if not isinstance(x, int) else x

    # ---- comparison and selection
    def ite(self, c, x, y):
        return np.where(c, x, y)

    def max(self, x, y):
        return np.maximum(x, y)

    def min(self, x, y):
        return np.minimum(x, y)

    def eq(self, x, y):
        return np.equal(x, y)

    def ne(self, x, y):
        return np.not_equal(x, y)

    def lt(self, x, y):
        return np.less(x, y)

    def le(self, x, y):
        return np.less_equal(x, y)

    def gt(self, x, y):
        return np.greater(x, y)

    def ge(self, x, y):
        return np.greater_equal(x, y)

    def and_(self, x, y):
        return np.logical_and(x, y)

    def or_(self, x, y):
        return np.logical_or(x, y)

    def xor(self, x, y):
        return np.logical_xor(x, y)

    def not_(self, x):
        return np.logical_not(x)
