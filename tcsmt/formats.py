"""Binary floating-point formats used by matrix units, with exact conversions.

A format is described by its exponent width, fraction width and special-value
convention. Every finite value is ``(-1)**s * sig * 2**(e - frac_bits)`` where

* ``e`` is the unbiased exponent of the leading bit position: ``field - bias``
  for normal numbers and ``emin = 1 - bias`` for subnormals and zeros;
* ``sig`` is the integer significand: ``2**frac_bits + fraction`` for normal
  numbers, ``fraction`` for subnormals and zeros.

All conversions here are exact: no float rounding is ever used to compute a
value.  Rounding into a format is done by :mod:`tcsmt.semantics`.

tf32 is stored in the fp32 layout (32-bit patterns whose low 13 bits are zero),
as CUDA stores it.  e4m3 is the OCP "fn" variant: bias 7, no infinities,
NaN = S.1111.111, largest finite 448.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from .errors import TcsmtError

# class codes returned by Format.classify
ZERO, SUBNORMAL, NORMAL, INF, NAN = 0, 1, 2, 3, 4
CLASS_NAMES = {ZERO: "zero", SUBNORMAL: "subnormal", NORMAL: "normal", INF: "inf", NAN: "nan"}


@dataclass(frozen=True)
class Format:
    """An IEEE-754-style binary format.

    ``storage_bits`` is the width of the bit pattern as stored (32 for tf32,
    whose ``pad_bits`` = 13 low bits are always zero).  ``specials`` is
    ``"ieee"`` (all-ones exponent = inf/NaN) or ``"fn"`` (no infinities; only
    the all-ones exponent with all-ones fraction is NaN, as OCP e4m3).
    """

    name: str
    exp_bits: int
    frac_bits: int
    specials: str = "ieee"
    pad_bits: int = 0
    aliases: tuple[str, ...] = field(default=())

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def emax(self) -> int:
        if self.specials == "ieee":
            return ((1 << self.exp_bits) - 2) - self.bias
        return ((1 << self.exp_bits) - 1) - self.bias

    @property
    def precision(self) -> int:
        return self.frac_bits + 1

    @property
    def storage_bits(self) -> int:
        return 1 + self.exp_bits + self.frac_bits + self.pad_bits

    @property
    def dtype(self) -> np.dtype:
        return np.dtype({8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[self.storage_bits])

    @property
    def max_finite(self) -> Fraction:
        top_frac = (1 << self.frac_bits) - 1
        if self.specials == "fn":
            top_frac -= 1  # S.1111.111 is NaN
        return Fraction((1 << self.frac_bits) + top_frac) * Fraction(2) ** (self.emax - self.frac_bits)

    @property
    def min_subnormal_exp(self) -> int:
        """Exponent of the weight of the least significant bit (of subnormals)."""
        return self.emin - self.frac_bits

    # ------------------------------------------------------------------ fields
    def fields(self, bits: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Split bit patterns into (sign, exponent field, fraction) as int64 arrays."""
        x = np.asarray(bits).astype(np.uint64)
        if self.pad_bits:
            x = x >> np.uint64(self.pad_bits)
        frac = (x & np.uint64((1 << self.frac_bits) - 1)).astype(np.int64)
        expf = ((x >> np.uint64(self.frac_bits)) & np.uint64((1 << self.exp_bits) - 1)).astype(np.int64)
        sign = ((x >> np.uint64(self.frac_bits + self.exp_bits)) & np.uint64(1)).astype(np.int64)
        return sign, expf, frac

    def classify(self, bits: np.ndarray) -> np.ndarray:
        """Class code of each pattern (ZERO, SUBNORMAL, NORMAL, INF, NAN)."""
        _, expf, frac = self.fields(bits)
        top = (1 << self.exp_bits) - 1
        out = np.full(expf.shape, NORMAL, dtype=np.int8)
        out[(expf == 0) & (frac == 0)] = ZERO
        out[(expf == 0) & (frac != 0)] = SUBNORMAL
        if self.specials == "ieee":
            out[(expf == top) & (frac == 0)] = INF
            out[(expf == top) & (frac != 0)] = NAN
        else:
            out[(expf == top) & (frac == (1 << self.frac_bits) - 1)] = NAN
        return out

    def valid_pattern(self, bits: np.ndarray) -> np.ndarray:
        """True where the pattern fits the storage (tf32: low pad bits zero)."""
        x = np.asarray(bits).astype(np.uint64)
        ok = x < np.uint64(1 << self.storage_bits) if self.storage_bits < 64 else np.ones(x.shape, bool)
        if self.pad_bits:
            ok &= (x & np.uint64((1 << self.pad_bits) - 1)) == 0
        return ok

    # ------------------------------------------------------- exact rationals
    def to_fraction(self, bits: int) -> Fraction | float:
        """Exact value of one pattern (float('inf'/'nan') for specials)."""
        arr = np.array([bits], dtype=np.uint64)
        cls = int(self.classify(arr)[0])
        s, expf, frac = (int(v[0]) for v in self.fields(arr))
        if cls == NAN:
            return float("nan")
        if cls == INF:
            return float("-inf") if s else float("inf")
        if expf == 0:
            val = Fraction(frac) * Fraction(2) ** (self.emin - self.frac_bits)
        else:
            val = Fraction((1 << self.frac_bits) + frac) * Fraction(2) ** (expf - self.bias - self.frac_bits)
        return -val if s else val

    def from_fraction(self, value: Fraction | int | float) -> int:
        """Pattern of a value that must be exactly representable (else TcsmtError)."""
        if isinstance(value, float):
            if np.isnan(value):
                return self.nan_pattern()
            if np.isinf(value):
                return self.inf_pattern(value < 0)
        v = Fraction(value)
        sign = 1 if v < 0 or (v == 0 and isinstance(value, float) and np.copysign(1, value) < 0) else 0
        m = abs(v)
        if m == 0:
            return self.pack_fields(sign, 0, 0)
        # exponent of leading bit
        e = m.numerator.bit_length() - m.denominator.bit_length()
        if Fraction(2) ** e > m:
            e -= 1
        e = max(e, self.emin)
        scaled = m / Fraction(2) ** (e - self.frac_bits)
        if scaled.denominator != 1 or scaled.numerator >= (2 << self.frac_bits):
            raise TcsmtError(f"{_fmt_value(v)} is not exactly representable in {self.name}")
        if m > self.max_finite:
            raise TcsmtError(f"{_fmt_value(v)} overflows {self.name} (max {_fmt_value(self.max_finite)})")
        sig = scaled.numerator
        if sig < (1 << self.frac_bits):
            return self.pack_fields(sign, 0, sig)
        return self.pack_fields(sign, e + self.bias, sig - (1 << self.frac_bits))

    def pack_fields(self, sign, expf, frac):
        """Bit patterns from (sign, exponent field, fraction field): the inverse of :meth:`fields`.

        Python ints give an int; arrays give an array of the storage type.  Each field must already fit
        its width (no check: callers build the fields from the format's own ranges).
        """
        if all(isinstance(x, int) for x in (sign, expf, frac)):
            return ((sign << (self.exp_bits + self.frac_bits)) | (expf << self.frac_bits) | frac) << self.pad_bits
        u = np.uint64
        word = (np.asarray(sign).astype(u) << u(self.exp_bits + self.frac_bits)) | \
            (np.asarray(expf).astype(u) << u(self.frac_bits)) | np.asarray(frac).astype(u)
        return (word << u(self.pad_bits)).astype(self.dtype)

    def nan_pattern(self) -> int:
        if self.specials == "fn":
            return self.pack_fields(0, (1 << self.exp_bits) - 1, (1 << self.frac_bits) - 1)
        # NVIDIA's canonical NaN: all ones below the sign bit
        return self.pack_fields(0, (1 << self.exp_bits) - 1, (1 << self.frac_bits) - 1)

    def inf_pattern(self, negative: bool = False) -> int:
        if self.specials != "ieee":
            raise TcsmtError(f"{self.name} has no infinities")
        return self.pack_fields(int(negative), (1 << self.exp_bits) - 1, 0)

    # ----------------------------------------------------------- numpy arrays
    def encode_array(self, values: np.ndarray) -> np.ndarray:
        """Bit patterns of a float array whose values are exactly representable.

        float64 holds every value of every format here exactly, so the check is
        a round trip through the exact decoder.
        """
        v = np.asarray(values, dtype=np.float64)
        flat = v.ravel()
        out = np.empty(flat.shape, dtype=self.dtype)
        if self.name == "fp64":
            return v.view(np.uint64).copy()
        for i, x in enumerate(flat):
            out[i] = self.from_fraction(float(x))
        return out.reshape(v.shape)

    def decode_array(self, bits: np.ndarray) -> np.ndarray:
        """float64 values of patterns (exact: every format here fits in float64)."""
        b = np.asarray(bits)
        if self.name == "fp64":
            return b.astype(np.uint64).view(np.float64)
        s, expf, frac = self.fields(b)
        cls = self.classify(b)
        sub = expf == 0
        sig = np.where(sub, frac, frac + (1 << self.frac_bits)).astype(np.float64)
        e = np.where(sub, self.emin, expf - self.bias) - self.frac_bits
        val = np.ldexp(sig, e.astype(np.int32))
        val = np.where(cls == INF, np.inf, val)
        val = np.where(cls == NAN, np.nan, val)
        return np.where(s == 1, -val, val)


def _fmt_value(v: Fraction) -> str:
    from .values import format_value

    return format_value(v)


FP64 = Format("fp64", 11, 52, aliases=("f64", "float64", "double", "binary64"))
FP32 = Format("fp32", 8, 23, aliases=("f32", "float32", "single", "binary32"))
TF32 = Format("tf32", 8, 10, pad_bits=13, aliases=("tensorfloat32",))
FP16 = Format("fp16", 5, 10, aliases=("f16", "float16", "half", "binary16"))
BF16 = Format("bf16", 8, 7, aliases=("bfloat16",))
E4M3 = Format("e4m3", 4, 3, specials="fn", aliases=("fp8e4m3", "fp8_e4m3", "e4m3fn", "fp8"))
E5M2 = Format("e5m2", 5, 2, aliases=("fp8e5m2", "fp8_e5m2"))

FORMATS: dict[str, Format] = {f.name: f for f in (FP64, FP32, TF32, FP16, BF16, E4M3, E5M2)}
_ALIASES = {a: f.name for f in FORMATS.values() for a in f.aliases}


def get_format(name: str) -> Format:
    """Look a format up by name or alias (case-insensitive)."""
    if not isinstance(name, str):
        raise TcsmtError(f"a number format is named by a string such as 'fp16', not {name!r}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in FORMATS:
        known = ", ".join(sorted(FORMATS))
        raise TcsmtError(f"unknown number format {name!r} (known: {known})")
    return FORMATS[key]


def format_names() -> Iterable[str]:
    return FORMATS.keys()
