"""Bit-exact vectorised simulator: the semantics of :mod:`tcsmt.semantics` on numpy arrays."""
from __future__ import annotations

import numpy as np

from .backend_numpy import NumpyBackend
from .errors import TcsmtError
from .formats import FP32, FP64, Format, get_format
from .params import ModelParams
from .registry import resolve
from . import semantics as sem

_B = NumpyBackend()
CHUNK = 1 << 13  # rows per pass: 64 KiB int64 temporaries stay in cache and in reused heap memory (measured best of 2^11..2^16)


def convert_bits(bits: np.ndarray, src: Format, dst: Format, mode: str = "rne") -> np.ndarray:
    """Convert bit patterns between formats with rounding ``mode`` (exact integer arithmetic)."""
    out = sem.convert(_B, np.asarray(bits), src, dst, mode)
    return np.asarray(out).astype(dst.dtype)


def to_bits(x: np.ndarray, fmt: Format, what: str) -> np.ndarray:
    """Bit patterns of ``x`` in ``fmt``.

    Integer arrays are the format's own patterns (uint32 fp32 patterns are also
    accepted for narrower formats); float arrays are values.  Every value must
    be exactly representable in ``fmt``; otherwise a TcsmtError names the first
    offending element.
    """
    arr = np.asarray(x)
    if arr.dtype.kind == "f":
        src_bits = arr.astype(np.float64).view(np.uint64)
        src = FP64
    elif arr.dtype.kind in "ui":
        if arr.size and (arr.min() < 0):
            raise TcsmtError(f"{what}: negative integers are not bit patterns")
        if arr.dtype.itemsize * 8 == fmt.storage_bits or (arr.dtype.kind == "i" and arr.size and int(arr.max()) < (1 << fmt.storage_bits)):
            bits = arr.astype(fmt.dtype)
            bad = ~fmt.valid_pattern(bits)
            if bad.any():
                i = np.argwhere(bad)[0]
                raise TcsmtError(f"{what}{list(i)}: 0x{int(arr[tuple(i)]):x} is not a {fmt.name} pattern (low bits must be zero)")
            return bits
        if arr.dtype == np.uint32:
            src_bits, src = arr, FP32
        else:
            raise TcsmtError(f"{what}: {arr.dtype} patterns do not fit {fmt.name} ({fmt.storage_bits}-bit patterns expected)")
    else:
        raise TcsmtError(f"{what}: expected numeric arrays, got {arr.dtype}")
    if src == fmt:
        return src_bits.astype(fmt.dtype)
    out = convert_bits(src_bits, src, fmt, "rne")
    back = convert_bits(out, fmt, src, "rne")
    same = (back == src_bits) | (np.isnan(src.decode_array(src_bits)) & np.isnan(fmt.decode_array(out)))
    if not same.all():
        i = tuple(np.argwhere(~same)[0])
        v = src.decode_array(np.asarray(src_bits)[i])
        raise TcsmtError(f"{what}{list(i)}: {float(v)!r} is not exactly representable in {fmt.name}")
    return out


def simulate_params(p: ModelParams, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """D = A.B + C row by row under model ``p``.

    ``a`` and ``b`` have shape (n, K), ``c`` shape (n,); each is bit patterns or
    exactly representable values (see :func:`to_bits`).  Returns the output
    format's bit patterns, shape (n,).
    """
    fin, fc, fout = get_format(p.in_fmt), get_format(p.c_fmt), get_format(p.out_fmt)
    a = np.asarray(a)
    b = np.asarray(b)
    c = np.asarray(c)
    if a.ndim == 1:
        a = a[None, :]
    if b.ndim == 1:
        b = b[None, :]
    if c.ndim == 0:
        c = c[None]
    if a.ndim != 2 or a.shape != b.shape:
        raise TcsmtError(f"a and b must both have shape (n, K); got {a.shape} and {b.shape}")
    if c.shape != (a.shape[0],):
        raise TcsmtError(f"c must have shape ({a.shape[0]},) to match a and b; got {c.shape}")
    if a.shape[1] == 0:
        raise TcsmtError("K must be at least 1")
    ab = to_bits(a, fin, "a")
    bb = to_bits(b, fin, "b")
    cb = to_bits(c, fc, "c")
    n, K = ab.shape
    out = np.empty(n, dtype=fout.dtype)
    for s in range(0, n, CHUNK):
        e = min(n, s + CHUNK)
        a_cols = [ab[s:e, k] for k in range(K)]
        b_cols = [bb[s:e, k] for k in range(K)]
        d = sem.dot(_B, p, a_cols, b_cols, cb[s:e])
        out[s:e] = np.asarray(d).astype(fout.dtype)
    return out


def simulate(arch: str, a, b, c, in_fmt: str, out_fmt: str, instr: str | None = None) -> np.ndarray:
    """Simulate ``arch`` (a model spec: ``volta``, ``volta:carry_bits=2``, ``exact`` ...) on one path."""
    p = resolve(arch, in_fmt, out_fmt, instr)
    return simulate_params(p, a, b, c)
