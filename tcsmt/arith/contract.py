"""The back-end contract: the exact-integer primitives that :mod:`tcsmt.arith.semantics` is written in.

Three back ends implement it: :class:`tcsmt.backends.numpy.NumpyBackend` (the simulator: int64
arrays, Python integers beyond 62 bits), :class:`tcsmt.backends.smt.SmtBackend` (the solver:
QF_BV terms, two's complement, widened so that nothing overflows) and
:class:`tcsmt.backends.cupy.CupyBackend` (the GPU simulator: int64 CuPy arrays).  Each one
denotes the same mathematical integers; they differ only in representation.

Values (``V``) are signed integers, scalar or elementwise over arrays of one shape (numpy
broadcasting); booleans (``Bool``) are the back end's truth values.  Plain Python ints are
accepted wherever a value is.

**Static bounds.** Some primitives take Python ints that bound their operands or result
(``bits``, ``out_bits``, ``smax``).  They are *claims by the caller* (the semantics proves them
from the formats' ranges); a back end may use them to size its representation and need not
check them:

* ``fit(x, w)`` claims ``-2^(w-1) <= x < 2^(w-1)``: x fits in w-bit two's complement.  The SMT
  back end then keeps only the low w bits (one extract); numpy switches to Python integers
  when ``w > 62``.  A false claim makes the back ends diverge (SMT wraps, numpy does not).
* ``mul(x, y, out_bits)`` claims ``|x * y| < 2^out_bits``; ``shl(x, s, smax, out_bits)`` claims
  ``x >= 0``, ``0 <= s <= smax`` and ``x * 2^s < 2^out_bits``.  The SMT back end sizes the result
  from the operands' widths and ``smax``; numpy uses ``out_bits`` to choose Python integers.
* ``msb(x, bits)`` claims ``0 <= x < 2^bits``.

:class:`tcsmt.backends.numpy.CheckedNumpyBackend` runs the simulator with every claim checked
(``tests/test_backend_contract.py`` runs every built-in path through it), so a wrong bound in
``semantics.py`` fails a test instead of silently splitting the simulator from the solver.
"""
from __future__ import annotations

from typing import Any, Protocol

from tcsmt.arith.formats import Format

V = Any  # a back-end integer: numpy int64/object array, Python int, SMT term wrapper, CuPy array
Bool = Any  # a back-end truth value: numpy bool array, Python/numpy bool, pysmt formula


class Backend(Protocol):
    """Exact integer operations; every result is the exact mathematical value (see module docstring)."""

    # ---- constants and booleans
    def const(self, v: int) -> V:
        """The integer ``v``."""
        ...

    def true(self) -> Bool:
        """Truth."""
        ...

    def false(self) -> Bool:
        """Falsity."""
        ...

    def fields(self, fmt: Format, bits: V) -> tuple[V, V, V]:
        """(sign, biased exponent field, fraction field) of ``fmt`` bit patterns, each >= 0."""
        ...

    # ---- arithmetic (exact: no overflow, no rounding)
    def add(self, x: V, y: V) -> V:
        """x + y."""
        ...

    def sub(self, x: V, y: V) -> V:
        """x - y."""
        ...

    def neg(self, x: V) -> V:
        """-x."""
        ...

    def mul(self, x: V, y: V, out_bits: int) -> V:
        """x * y; claims ``|x * y| < 2^out_bits``."""
        ...

    def mul_const(self, x: V, k: int) -> V:
        """x * k for a Python int k."""
        ...

    def shl(self, x: V, s: V, smax: int, out_bits: int) -> V:
        """x * 2^s; claims x >= 0, 0 <= s <= smax and x * 2^s < 2^out_bits."""
        ...

    def shr(self, x: V, s: V) -> V:
        """floor(x / 2^s) for x >= 0 and s >= 0 (any s, also beyond x's width: then 0)."""
        ...

    def low_nonzero(self, x: V, s: V) -> Bool:
        """(x mod 2^s) != 0 for x >= 0 and s >= 0: whether a right shift by s drops a one bit."""
        ...

    def mod_pow2(self, x: V, n: int) -> V:
        """x mod 2^n for x >= 0 (the low n bits)."""
        ...

    def msb(self, x: V, bits: int) -> V:
        """floor(log2 x) for x > 0 and -1 for x = 0; claims 0 <= x < 2^bits."""
        ...

    def fit(self, x: V, bits: int) -> V:
        """x itself; claims x fits in ``bits``-bit two's complement (the back end may narrow to it)."""
        ...

    # ---- comparison and selection
    def ite(self, c: Bool, x: V, y: V) -> V:
        """x where c holds, else y (values or booleans)."""
        ...

    def max(self, x: V, y: V) -> V:
        """max(x, y)."""
        ...

    def min(self, x: V, y: V) -> V:
        """min(x, y)."""
        ...

    def eq(self, x: V, y: V) -> Bool:
        """x == y."""
        ...

    def ne(self, x: V, y: V) -> Bool:
        """x != y."""
        ...

    def lt(self, x: V, y: V) -> Bool:
        """x < y (signed)."""
        ...

    def le(self, x: V, y: V) -> Bool:
        """x <= y (signed)."""
        ...

    def gt(self, x: V, y: V) -> Bool:
        """x > y (signed)."""
        ...

    def ge(self, x: V, y: V) -> Bool:
        """x >= y (signed)."""
        ...

    def and_(self, x: Bool, y: Bool) -> Bool:
        """x and y."""
        ...

    def or_(self, x: Bool, y: Bool) -> Bool:
        """x or y."""
        ...

    def xor(self, x: Bool, y: Bool) -> Bool:
        """x xor y."""
        ...

    def not_(self, x: Bool) -> Bool:
        """not x."""
        ...
