"""GPU simulator back end: the semantics' integer operations on CuPy int64 arrays.

The same exact-integer operations as :mod:`tcsmt.backends.numpy`, run on the
GPU so that checking hardware results is not limited by the CPU model.  Every
value must fit in 62 bits (``fit`` raises otherwise): true for all fp16, bf16,
tf32 and fp8 block models with a finite window; exact-alignment models and
fp64 paths need Python integers and stay on the CPU simulator.
"""
from __future__ import annotations

from tcsmt.arith.formats import Format
from tcsmt.backends.numpy import msb_int64
from tcsmt.errors import TcsmtError

_INT_LIMIT = 62


class CupyBackend:
    """Exact integer operations over CuPy arrays (int64 only)."""

    def __init__(self, xp=None):
        """``xp``: the array module (CuPy by default; NumPy runs the same code on the CPU, for tests)."""
        if xp is None:
            try:
                import cupy
            except ImportError as exc:  # pragma: no cover - depends on the machine
                raise TcsmtError("the GPU simulator needs CuPy (pip install 'tcsmt[cuda13]')") from exc
            xp = cupy
        self.xp = xp

    def const(self, v: int):
        return v

    def true(self):
        return self.xp.bool_(True)

    def false(self):
        return self.xp.bool_(False)

    def fields(self, fmt: Format, bits):
        if fmt.storage_bits > 32:
            raise TcsmtError(f"the GPU simulator does not handle {fmt.name} (use the CPU simulator)")
        x = self.xp.asarray(bits).astype(self.xp.int64)
        x = x >> fmt.pad_bits if fmt.pad_bits else x
        frac = x & ((1 << fmt.frac_bits) - 1)
        expf = (x >> fmt.frac_bits) & ((1 << fmt.exp_bits) - 1)
        sign = (x >> (fmt.frac_bits + fmt.exp_bits)) & 1
        return sign, expf, frac

    def add(self, x, y):
        return self.xp.add(x, y)

    def sub(self, x, y):
        return self.xp.subtract(x, y)

    def neg(self, x):
        return self.xp.negative(x)

    def mul(self, x, y, out_bits: int):
        self._check(out_bits)
        return self.xp.multiply(x, y)

    def mul_const(self, x, k: int):
        return self.xp.multiply(x, k)

    def shl(self, x, s, smax: int, out_bits: int):
        self._check(out_bits)
        return self.xp.left_shift(x, s)

    def shr(self, x, s):
        return self.xp.right_shift(x, self.xp.minimum(s, 63))

    def low_nonzero(self, x, s):
        s62 = self.xp.minimum(s, 62)
        return self.xp.not_equal(self.xp.bitwise_and(x, self.xp.left_shift(self.xp.int64(1), s62) - 1), 0)

    def mod_pow2(self, x, n: int):
        return self.xp.bitwise_and(x, (1 << n) - 1)

    def msb(self, x, bits: int):
        xp = self.xp
        return msb_int64(xp, xp.asarray(x, dtype=xp.int64))

    def fit(self, x, bits: int):
        self._check(bits)
        return x

    @staticmethod
    def _check(bits: int) -> None:
        if bits > _INT_LIMIT:
            raise TcsmtError("this model needs integers wider than 62 bits: use the CPU simulator")

    def ite(self, c, x, y):
        return self.xp.where(c, x, y)

    def max(self, x, y):
        return self.xp.maximum(x, y)

    def min(self, x, y):
        return self.xp.minimum(x, y)

    def eq(self, x, y):
        return self.xp.equal(x, y)

    def ne(self, x, y):
        return self.xp.not_equal(x, y)

    def lt(self, x, y):
        return self.xp.less(x, y)

    def le(self, x, y):
        return self.xp.less_equal(x, y)

    def gt(self, x, y):
        return self.xp.greater(x, y)

    def ge(self, x, y):
        return self.xp.greater_equal(x, y)

    def and_(self, x, y):
        return self.xp.logical_and(x, y)

    def or_(self, x, y):
        return self.xp.logical_or(x, y)

    def xor(self, x, y):
        return self.xp.logical_xor(x, y)

    def not_(self, x):
        return self.xp.logical_not(x)


def simulate_on_gpu(p, a, b, c, chunk: int = 1 << 20, xp=None):
    """Output patterns of model ``p`` for bit-pattern arrays a, b (n, K), c (n,) (NumPy or CuPy).

    Returns a CuPy array of the output format's dtype.  Raises TcsmtError for
    models the GPU back end cannot hold (see the module docstring).
    """
    from tcsmt.arith import semantics as sem
    from tcsmt.arith.formats import get_format

    if p.scale_fmt:
        raise TcsmtError(f"{p.name}: the GPU simulator does not run block-scaled paths "
                         "(use the CPU simulator)")
    B = CupyBackend(xp)
    xp = B.xp
    fout = get_format(p.out_fmt)
    a, b, c = xp.asarray(a), xp.asarray(b), xp.asarray(c)
    n, K = a.shape
    out = xp.empty(n, dtype=fout.dtype)
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        d = sem.dot(B, p, [a[s:e, k] for k in range(K)], [b[s:e, k] for k in range(K)], c[s:e])
        out[s:e] = xp.asarray(d).astype(fout.dtype)
    return out
