"""Reading what users give us: .npz and JSON input files, and the arrays of a batch of dot products.

Every problem is a :class:`TcsmtError` whose message names the file (``FILE: what
is wrong``) or the array (``a[3, 0]: ...``), so the CLI prints one line and exits
with status 2; nothing here lets a zipfile, pickle, JSON or numpy exception escape.

Arrays of a dot-product batch (``a``, ``b``: shape (n, K); ``c``: shape (n,)) are
read as follows (:func:`as_patterns`):

* float arrays are *values*: float16, float32, float64, and (when the package
  ``ml_dtypes`` is installed) bfloat16, float8_e4m3fn, float8_e5m2,
  float4_e2m1fn, float6_e3m2fn, float6_e2m3fn, float8_e8m0fnu,
  float8_e4m3fnuz and float8_e5m2fnuz.  When the
  value format is the model's format the array is reinterpreted in place (no
  copy); otherwise it is converted in chunks of :data:`CONVERT_CHUNK` elements,
  each conversion checked to be exact (:func:`_convert_values`), never through
  a full float64 copy.  A value the model's format cannot hold exactly is an
  error naming the first such element;
* unsigned integer arrays whose width is the format's storage width (uint16
  for fp16/bf16, uint32 for fp32/tf32, uint8 for fp8, fp6, fp4 and the scale
  formats, uint64 for fp64) are the format's *bit patterns* (a 4-bit e2m1
  pattern in the low bits of its byte: 0x10 and above are not e2m1 patterns);
* any other integer array is ambiguous (is ``1`` the value 1 or the pattern
  0x0001?) and refused, unless the caller says ``bits=True``: then integer
  arrays of any width are bit patterns (float arrays are still values).

Input files hold the same arrays: ``a``, ``b``, ``c`` in an .npz archive
(:func:`read_dot_npz`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import BF16, E4M3, E5M2, FP16, FP32, FP64, TF32, Format
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.errors import TcsmtError
from tcsmt.io import load
from tcsmt.io.limits import shown

_B = NumpyBackend()
CONVERT_CHUNK = 1 << 16
"""Elements converted per pass when a value format differs from the model's (bounded temporaries)."""


# ------------------------------------------------------------------ files
# read through the one loader (tcsmt.io.load): regular files only, .npy headers checked before reading
read_npz = load.read_npz
read_json = load.read_json


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


# ----------------------------------------------------------------- arrays
def _as_array(x: Any, what: str) -> np.ndarray:
    """``x`` as a numpy array: a masked array only when nothing is masked (its mask would be lost)."""
    if isinstance(x, np.ma.MaskedArray):
        if np.ma.is_masked(x):
            raise TcsmtError(f"{what}: a masked array with {int(np.ma.count_masked(x))} masked element(s); "
                             "tcsmt computes every element: fill them (numpy.ma.filled) or drop the mask")
        x = np.ma.getdata(x)
    if isinstance(x, (str, bytes, bytearray, memoryview)):
        raise TcsmtError(f"{what}: expected an array of numbers, not {shown(x)}")
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError, OverflowError) as exc:
        raise TcsmtError(f"{what}: not a numeric array ({_short(exc)})") from None
    return arr


def dot_arrays(a: Any, b: Any, c: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``a``, ``b`` as (n, K) and ``c`` as (n,) arrays (a single row may be given as (K,) and a scalar c).

    Checks shapes and that each array holds numbers (no objects, strings, booleans).
    """
    a, b, c = _as_array(a, "a"), _as_array(b, "b"), _as_array(c, "c")
    for name, arr in (("a", a), ("b", b), ("c", c)):
        if not _is_numeric(arr.dtype):
            raise TcsmtError(f"{name}: expected numbers (float values or integer bit patterns), got {arr.dtype} data")
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
    return a, b, c


def _is_numeric(dt: np.dtype) -> bool:
    return dt.kind in "uif" or value_format(dt) is not None


def value_format(dt: np.dtype) -> Format | None:
    """The format whose values an array of float dtype ``dt`` holds (None if not a supported float type)."""
    if dt.kind == "f" and dt.name in ("float16", "float32", "float64"):
        return {2: FP16, 4: FP32, 8: FP64}.get(dt.itemsize)
    return _ml_dtypes_formats().get(dt.name)  # ml_dtypes 0.6 gives float8_e5m2 the kind "f" (itemsize 1)


def _ml_dtypes_formats() -> dict[str, Format]:
    try:
        import ml_dtypes  # noqa: F401  (registers bfloat16 and float8 dtypes with numpy)
    except ImportError:
        return {}
    from tcsmt.arith.formats import get_format

    # ml_dtypes' sub-byte types hold one pattern in the low bits of each byte
    return {"bfloat16": BF16, "float8_e4m3fn": E4M3, "float8_e5m2": E5M2,
            **{name: get_format(name) for name in ("float4_e2m1fn", "float6_e3m2fn", "float6_e2m3fn",
                                                   "float8_e8m0fnu", "float8_e4m3fnuz", "float8_e5m2fnuz")}}


def _index(shape: tuple[int, ...], flat: int) -> str:
    """``[i, j]`` of a flat index, as plain ints."""
    return "[" + ", ".join(str(int(i)) for i in np.unravel_index(int(flat), shape)) + "]"


def as_patterns(x: Any, fmt: Format, what: str, bits: bool = False, *, api: bool = True) -> np.ndarray:
    """Bit patterns (dtype ``fmt.dtype``) of the array ``x`` for format ``fmt`` (see the module docstring).

    ``bits=True``: integer arrays hold bit patterns of ``fmt`` whatever their
    width.  Values must be exactly representable in ``fmt`` (NaN and
    infinities map to the format's NaN and infinities where it has them).
    ``api=False`` words the ambiguity error for files (no ``bits=True`` there).
    """
    arr = _as_array(x, what)
    if not arr.dtype.isnative:  # big-endian data from a file: reinterpreting needs native byte order
        arr = arr.astype(arr.dtype.newbyteorder("="))
    kind = arr.dtype.kind
    if kind in "ui" and (bits or (kind == "u" and arr.dtype.itemsize == fmt.dtype.itemsize)):
        return _integer_patterns(arr, fmt, what)
    if kind in "ui":
        how = f"bit patterns as {fmt.dtype.name}" + (" or with bits=True" if api else "")
        raise TcsmtError(f"{what}: {arr.dtype} integers are ambiguous for {fmt.name} (values or bit patterns?): "
                         f"give float values (float16, float32 or float64) or {how}")
    src = value_format(arr.dtype)
    if src is None:
        raise TcsmtError(f"{what}: expected float values or unsigned bit patterns, got {arr.dtype} data")
    src_bits = arr.view(src.dtype)
    if src == fmt:
        return src_bits
    if fmt == TF32 and src == FP32:  # tf32 is stored in the fp32 layout: only the pad bits need checking
        return _integer_patterns(src_bits, fmt, what, values_of=src)
    return _convert_values(src_bits, src, fmt, what)


def dot_patterns(a: Any, b: Any, c: Any, in_fmt: Format, c_fmt: Format, bits: bool = False,
                 source: str | None = None, b_fmt: Format | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shapes checked (:func:`dot_arrays`) and patterns of a, b (``in_fmt``; b in ``b_fmt`` where given: mixed
    paths) and c (``c_fmt``).

    ``source``: the file the arrays came from; every error then starts with it.
    """
    try:
        a, b, c = dot_arrays(a, b, c)
        api = source is None
        return (as_patterns(a, in_fmt, "a", bits, api=api), as_patterns(b, b_fmt or in_fmt, "b", bits, api=api),
                as_patterns(c, c_fmt, "c", bits, api=api))
    except TcsmtError as exc:
        if source is None:
            raise
        raise TcsmtError(f"{source}: {exc}") from None


def read_dot_npz(path: str | Path, in_fmt: Format, c_fmt: Format,
                 b_fmt: Format | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Patterns of the arrays a (n, K), b (n, K), c (n,) of the .npz file at ``path``."""
    data = read_npz(path, ("a", "b", "c"))
    return dot_patterns(data["a"], data["b"], data["c"], in_fmt, c_fmt, source=str(path), b_fmt=b_fmt)


def _shown(fmt: Format, pattern: int) -> str:
    """A value for a message: the float repr (exact: every format here fits in float64)."""
    return repr(float(fmt.to_fraction(pattern)))


def _integer_patterns(arr: np.ndarray, fmt: Format, what: str, values_of: Format | None = None) -> np.ndarray:
    """``arr`` as ``fmt`` patterns after checking each is one (non-negative, fits, tf32 pad bits zero).

    Checks run in the array's own dtype (no widened copy); an array already
    of ``fmt.dtype`` with no pad bits needs none and is returned as it is.
    """
    if arr.size and arr.dtype.kind == "i" and int(arr.min()) < 0:
        flat = int(np.argmax(arr.reshape(-1) < 0))
        raise TcsmtError(f"{what}{_index(arr.shape, flat)}: {int(arr.reshape(-1)[flat])} is negative, not a bit pattern")
    too_wide = arr.dtype.itemsize * 8 > fmt.storage_bits and arr.size and int(arr.max()) >> fmt.storage_bits
    pad = np.asarray((1 << fmt.pad_bits) - 1, dtype=arr.dtype) if fmt.pad_bits else None
    if too_wide or (pad is not None and arr.size and bool((arr & pad).any())):
        bad = ~fmt.valid_pattern(arr)
        flat = int(np.argmax(bad.reshape(-1)))
        v = int(arr.reshape(-1)[flat])
        if values_of is not None:
            raise TcsmtError(f"{what}{_index(arr.shape, flat)}: {_shown(values_of, v)} is not exactly "
                             f"representable in {fmt.name}")
        raise TcsmtError(f"{what}{_index(arr.shape, flat)}: 0x{v:x} is not a {fmt.name} bit pattern "
                         f"({fmt.storage_bits} bits" + (f", low {fmt.pad_bits} bits zero)" if fmt.pad_bits else ")"))
    return arr if arr.dtype == fmt.dtype else arr.astype(fmt.dtype)


_NUMPY_TYPES = {FP16.name: np.float16, FP32.name: np.float32, FP64.name: np.float64}
_IN_FP32 = {BF16.name: 16, TF32.name: 0}  # formats whose patterns are fp32 patterns' top bits: bits shifted out


def _convert_values(src_bits: np.ndarray, src: Format, fmt: Format, what: str) -> np.ndarray:
    """``fmt`` patterns of the values whose ``src`` patterns are ``src_bits``, chunk by chunk; each exact or an error.

    fp16/fp32/fp64 targets: a numpy cast, accepted only where casting back
    gives the same value (so the pattern is the value's own; NaN stays NaN).
    bf16/tf32 targets: the value cast to float32 as above, then the fp32
    pattern's low bits must be zero (bf16 is the top half of an fp32 pattern,
    tf32 an fp32 pattern with 13 zero low bits).  Others (fp8):
    :func:`tcsmt.arith.semantics.convert` and back.  NaN becomes the format's NaN.
    """
    values = src_bits.view(_value_dtype(src)).reshape(-1)
    out = np.empty(values.shape, dtype=fmt.dtype)
    for s in range(0, values.size, CONVERT_CHUNK):
        part = values[s:s + CONVERT_CHUNK]
        conv, ok = _convert_chunk(part, src, fmt)
        if not ok.all():
            i = int(np.argmax(~ok))
            v = int(src_bits.reshape(-1)[s + i])
            raise TcsmtError(f"{what}{_index(src_bits.shape, s + i)}: {_shown(src, v)} is not exactly "
                             f"representable in {fmt.name}")
        out[s:s + CONVERT_CHUNK] = conv
    return out.reshape(src_bits.shape)


def _value_dtype(fmt: Format) -> np.dtype:
    if fmt.name in _NUMPY_TYPES:
        return np.dtype(_NUMPY_TYPES[fmt.name])
    return next(np.dtype(name) for name, f in _ml_dtypes_formats().items() if f == fmt)


def _convert_chunk(values: np.ndarray, src: Format, fmt: Format) -> tuple[np.ndarray, np.ndarray]:
    """(patterns, exact) of one chunk of value array ``values`` (a float dtype holding ``src`` values)."""
    nan = np.isnan(values.astype(np.float32) if src.name not in _NUMPY_TYPES else values)
    if fmt.name in _NUMPY_TYPES or fmt.name in _IN_FP32:
        target = _NUMPY_TYPES.get(fmt.name, np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            y = values.astype(target)
            ok = (y.astype(values.dtype) == values) | nan
        pat = y.view(np.dtype(f"u{y.dtype.itemsize}"))
        if fmt.name in _IN_FP32:
            low = np.uint32((1 << (16 if fmt == BF16 else fmt.pad_bits)) - 1)
            ok &= ((pat & low) == 0) | nan
            pat = pat >> np.uint32(_IN_FP32[fmt.name]) if _IN_FP32[fmt.name] else pat
        pat = pat.astype(fmt.dtype)
    else:
        from tcsmt.arith.formats import NAN

        bits = values.view(src.dtype)
        pat = np.asarray(sem.convert(_B, bits, src, fmt, "rne")).astype(fmt.dtype)
        back = np.asarray(sem.convert(_B, pat, fmt, src, "rne")).astype(src.dtype)
        ok = (back == bits) | (nan & (fmt.classify(pat) == NAN))
    if nan.any():
        pat = np.where(nan, np.asarray(fmt.nan_pattern(), dtype=fmt.dtype), pat)
    return pat, ok
