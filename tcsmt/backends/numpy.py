"""Simulator back end: the semantics' integer operations on numpy arrays.

Values are int64 arrays while their static bound is at most 62 bits, and
object arrays of Python integers beyond that (``fit``), so the arithmetic is
exact everywhere.  Booleans are numpy bool arrays.
"""
from __future__ import annotations

import numpy as np

from tcsmt.arith.formats import Format
from tcsmt.errors import InternalError

_INT_LIMIT = 62


def _is_obj(*xs) -> bool:
    return any(isinstance(x, np.ndarray) and x.dtype == object for x in xs)


def _is_big(x) -> bool:
    """A Python int that int64 arithmetic cannot hold safely (e.g. the fp64 sign bit 2^63)."""
    return isinstance(x, int) and not (-(1 << _INT_LIMIT) <= x < (1 << _INT_LIMIT))


_SELECT_MIN = 256  # below this many elements np.where is as fast


def _is_int64_or_int(x) -> bool:
    if isinstance(x, np.ndarray):
        return x.dtype == np.int64
    return isinstance(x, (int, np.int64)) and not isinstance(x, bool)


def _as_obj(x):
    if isinstance(x, np.ndarray):
        return x if x.dtype == object else x.astype(object)
    if isinstance(x, np.generic):
        return np.asarray(x).astype(object)
    return x


def _bit_length(x: int) -> int:
    return int(x).bit_length()


_bit_length_u = np.frompyfunc(_bit_length, 1, 1)


def msb_int64(xp, x):
    """Index of the leading one bit of each non-negative int64 of ``x`` (-1 for 0), by halving the
    window (32, 16, ..., 1 bits): exact for every int64, on NumPy or CuPy arrays (``xp`` the module)."""
    r = xp.zeros(x.shape, dtype=xp.int64)
    step = 32
    while step:
        big = (x >> step) != 0
        x = xp.where(big, x >> step, x)
        r += xp.where(big, step, 0)
        step >>= 1
    return xp.where(x == 0, -1, r)


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
        """(sign, exponent field, fraction) as int64 arrays.

        Patterns of up to 32 bits are split with int64 shifts and masks (cheaper
        than table look-ups, whose random accesses miss the cache); fp64
        patterns go through the format's uint64 code.
        """
        if fmt.storage_bits <= 32:
            x = np.asarray(bits).astype(np.int64)
            if fmt.pad_bits:
                np.right_shift(x, fmt.pad_bits, out=x)
            frac = np.bitwise_and(x, (1 << fmt.frac_bits) - 1)
            np.right_shift(x, fmt.frac_bits, out=x)
            expf = np.bitwise_and(x, (1 << fmt.exp_bits) - 1)
            np.right_shift(x, fmt.exp_bits, out=x)
            np.bitwise_and(x, 1, out=x)
            return x, expf, frac
        return fmt.fields(bits)

    # ---- arithmetic
    def add(self, x, y):
        if _is_obj(x, y) or _is_big(x) or _is_big(y):
            return np.add(_as_obj(x), _as_obj(y))
        return np.add(x, y)

    def sub(self, x, y):
        if _is_obj(x, y) or _is_big(x) or _is_big(y):
            return np.subtract(_as_obj(x), _as_obj(y))
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
            return np.asarray(_bit_length_u(x) - 1, dtype=object).astype(np.int64)
        x = np.asarray(x, dtype=np.int64)
        if bits <= 53:
            # exact: every integer below 2^53 converts to float64 without rounding;
            # frexp(0) gives exponent 0, so x = 0 maps to -1 as required
            return np.frexp(x.astype(np.float64))[1].astype(np.int64) - 1
        return msb_int64(np, x)

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
        if _is_obj(x, y) or _is_big(x) or _is_big(y):
            x, y = _as_obj(x), _as_obj(y)
            if not isinstance(x, np.ndarray) and not isinstance(y, np.ndarray):
                # np.where would turn two Python ints into int64/uint64
                return np.where(c, np.asarray(x, dtype=object), np.asarray(y, dtype=object))
            return np.where(c, x, y)
        if isinstance(c, (bool, np.bool_)):
            return np.asarray(x if c else y) if isinstance(x, np.ndarray) or isinstance(y, np.ndarray) \
                else np.where(c, x, y)
        if _is_int64_or_int(x) and _is_int64_or_int(y) and isinstance(c, np.ndarray) and c.dtype == np.bool_ \
                and c.ndim and c.size >= _SELECT_MIN:
            # Branch-free select: y + c*(x - y).  np.where branches per element and is
            # about twice as slow on unpredictable masks.  Exact: |x|, |y| < 2^62 on
            # the int64 path (``fit``), so x - y fits in int64.
            if isinstance(y, int) and y == 0:
                return np.multiply(c, x, dtype=np.int64)
            if isinstance(x, int) and x == 0:
                return np.multiply(np.logical_not(c), y, dtype=np.int64)
            xa, ya = isinstance(x, np.ndarray), isinstance(y, np.ndarray)
            if (xa and x.shape == c.shape) or (ya and y.shape == c.shape):
                d = np.subtract(x, y, dtype=np.int64)
                if d.shape == c.shape:
                    np.multiply(d, c, out=d)
                    np.add(d, y, out=d)
                    return d
            elif not xa and not ya:
                d = np.multiply(c, int(x) - int(y), dtype=np.int64)
                np.add(d, y, out=d)
                return d
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


class BoundViolation(InternalError):
    """A static bound claimed by the semantics does not hold (an internal error, never a user error)."""


def _all(cond) -> bool:
    return bool(np.all(np.asarray(cond)))


class CheckedNumpyBackend(NumpyBackend):
    """The simulator's back end with every static claim of the contract checked (:mod:`tcsmt.arith.contract`).

    For tests: ``semantics`` run through it raises :class:`BoundViolation` where a width bound that
    the SMT back end relies on (``fit``, ``mul``, ``shl``, ``msb``) or an operand sign that ``shr``,
    ``low_nonzero`` and ``mod_pow2`` require does not hold.  Slower than :class:`NumpyBackend`.
    """

    @staticmethod
    def _check(ok, what: str) -> None:
        if not _all(ok):
            raise BoundViolation(what)

    @staticmethod
    def _ints(x):
        a = np.asarray(x)
        return a.astype(object) if a.dtype != object else a

    def _within(self, x, bits: int, what: str) -> None:
        a = self._ints(x)
        self._check((a >= -(1 << (bits - 1))) & (a < (1 << (bits - 1))), f"{what}: a value outside {bits}-bit two's complement")

    def mul(self, x, y, out_bits: int):
        r = super().mul(x, y, out_bits)
        a = self._ints(r)
        self._check((a > -(1 << out_bits)) & (a < (1 << out_bits)), f"mul: |x*y| >= 2^{out_bits}")
        return r

    def shl(self, x, s, smax: int, out_bits: int):
        self._check(self._ints(x) >= 0, "shl: negative x")
        self._check((self._ints(s) >= 0) & (self._ints(s) <= smax), f"shl: shift outside 0..{smax}")
        r = super().shl(x, s, smax, out_bits)
        self._check(self._ints(r) < (1 << out_bits), f"shl: result >= 2^{out_bits}")
        return r

    def shr(self, x, s):
        self._check((self._ints(x) >= 0) & (self._ints(s) >= 0), "shr: negative operand")
        return super().shr(x, s)

    def low_nonzero(self, x, s):
        self._check((self._ints(x) >= 0) & (self._ints(s) >= 0), "low_nonzero: negative operand")
        return super().low_nonzero(x, s)

    def mod_pow2(self, x, n: int):
        self._check(self._ints(x) >= 0, "mod_pow2: negative x")
        return super().mod_pow2(x, n)

    def msb(self, x, bits: int):
        a = self._ints(x)
        self._check((a >= 0) & (a < (1 << bits)), f"msb: x outside 0..2^{bits}-1")
        return super().msb(x, bits)

    def fit(self, x, bits: int):
        self._within(x, bits, "fit")
        return super().fit(x, bits)
