"""Binary floating-point formats used by matrix units, with exact conversions.

A format is described by its exponent width, fraction width and special-value
convention. Every finite value is ``(-1)**s * sig * 2**(e - frac_bits)`` where

* ``e`` is the unbiased exponent of the leading bit position: ``field - bias``
  for normal numbers and ``emin = 1 - bias`` for subnormals and zeros;
* ``sig`` is the integer significand: ``2**frac_bits + fraction`` for normal
  numbers, ``fraction`` for subnormals and zeros.

All conversions here are exact: no float rounding is ever used to compute a
value.  Rounding into a format is done by :mod:`tcsmt.arith.semantics`.

tf32 is stored in the fp32 layout (32-bit patterns whose low 13 bits are zero),
as CUDA stores it.  e4m3 is the OCP "fn" variant: bias 7, no infinities,
NaN = S.1111.111, largest finite 448.

The narrow formats of block-scaled matrix units (each pattern stored in the low
bits of one uint8):

* e2m1 (fp4), e3m2 and e2m3 (fp6): OCP Microscaling Formats (MX) Specification
  v1.0, section 5.3.3 (FP6/FP4 element types): biases 1, 3, 1; no infinities and
  no NaN (every pattern is finite); subnormals and signed zeros as IEEE; largest
  finite 6, 28 and 7.5.  The PTX ISA (".e2m1", ".e3m2", ".e2m3" of
  ``kind::f8f6f4``) uses the same encodings.
* ue8m0: OCP MX v1.0 section 5.4.1 (E8M0 scale): unsigned, 8 exponent bits and no
  fraction, bias 127, value 2^(field - 127) for fields 0..254 (no zero, no
  subnormals), 0xFF = NaN.
* ue4m3: the unsigned e4m3 scale of NVFP4 (PTX ISA, block scaling of
  ``kind::mxf4nvf4``): the e4m3 encoding without its sign bit, 7 bits (codes
  0x00..0x7F; 0x7F = NaN, largest finite 448).  A byte with its top bit set is
  refused as "not a ue4m3 pattern": which value hardware gives it is not
  published (MMA-Sim takes the magnitude, ``abs()``).
* e4m3fnuz and e5m2fnuz (AMD CDNA3 "fp8"/"bf8"; Noune et al., arXiv 2206.02915;
  LLVM APFloat Float8E4M3FNUZ / Float8E5M2FNUZ): bias 8 and 16, no infinities,
  no negative zero, one NaN 0x80 (the pattern of -0); every other all-ones
  exponent is finite (largest 240 and 57344).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from tcsmt.errors import TcsmtError

# class codes returned by Format.classify
ZERO, SUBNORMAL, NORMAL, INF, NAN = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class Format:
    """An IEEE-754-style binary format.

    ``storage_bits`` is the width of the bit pattern as stored (32 for tf32,
    whose ``pad_bits`` = 13 low bits are always zero).  ``specials`` is
    ``"ieee"`` (all-ones exponent = inf/NaN), ``"fn"`` (no infinities; only
    the all-ones exponent with all-ones fraction is NaN, as OCP e4m3),
    ``"fnuz"`` (no infinities, no -0: the pattern of -0 is the only NaN),
    ``"none"`` (every pattern finite: OCP fp4/fp6) or ``"e8m0"`` (exponent
    only: every field is a normal power of two, no zero, all-ones is NaN).
    ``signed`` False: no sign bit (the scale formats ue8m0, ue4m3).
    ``exp_bias``: the exponent bias where it is not 2^(exp_bits-1) - 1 (fnuz).
    """

    name: str
    exp_bits: int
    frac_bits: int
    specials: str = "ieee"
    pad_bits: int = 0
    aliases: tuple[str, ...] = field(default=())
    signed: bool = True
    exp_bias: int | None = None

    @property
    def bias(self) -> int:
        if self.exp_bias is not None:
            return self.exp_bias
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def has_subnormals(self) -> bool:
        """False for e8m0, whose field 0 is the normal value 2^-bias."""
        return self.specials != "e8m0"

    @property
    def has_inf(self) -> bool:
        return self.specials == "ieee"

    @property
    def has_nan(self) -> bool:
        return self.specials != "none"

    @property
    def has_negative_zero(self) -> bool:
        return self.signed and self.specials != "fnuz"

    @property
    def sign_bits(self) -> int:
        return 1 if self.signed else 0

    @property
    def emin(self) -> int:
        """Exponent of the least normal binade (that of subnormals and zeros too)."""
        if not self.has_subnormals:
            return -self.bias
        return 1 - self.bias

    @property
    def emax(self) -> int:
        if self.specials in ("ieee", "e8m0"):
            return ((1 << self.exp_bits) - 2) - self.bias
        return ((1 << self.exp_bits) - 1) - self.bias

    @property
    def precision(self) -> int:
        return self.frac_bits + 1

    @property
    def storage_bits(self) -> int:
        """Bits of one pattern (sign, exponent, fraction, pad); fp4/fp6/ue4m3 patterns sit in a uint8."""
        return self.sign_bits + self.exp_bits + self.frac_bits + self.pad_bits

    @property
    def dtype(self) -> np.dtype:
        width = max(8, 1 << (self.storage_bits - 1).bit_length())
        return np.dtype({8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[width])

    @property
    def hex_digits(self) -> int:
        """Hex digits of a pattern (1 for fp4, 2 for fp6 and the 8-bit formats)."""
        return (self.storage_bits + 3) // 4

    @property
    def max_finite(self) -> Fraction:
        top_frac = (1 << self.frac_bits) - 1
        if self.specials == "fn":
            top_frac -= 1  # S.1111.111 is NaN
        if self.specials == "e8m0":
            return Fraction(2) ** self.emax
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
        sign, expf, frac = self.fields(bits)
        top = (1 << self.exp_bits) - 1
        out = np.full(expf.shape, NORMAL, dtype=np.int8)
        if self.has_subnormals:
            out[(expf == 0) & (frac == 0)] = ZERO
            out[(expf == 0) & (frac != 0)] = SUBNORMAL
        if self.specials == "ieee":
            out[(expf == top) & (frac == 0)] = INF
            out[(expf == top) & (frac != 0)] = NAN
        elif self.specials == "fn":
            out[(expf == top) & (frac == (1 << self.frac_bits) - 1)] = NAN
        elif self.specials == "fnuz":
            out[(sign == 1) & (expf == 0) & (frac == 0)] = NAN
        elif self.specials == "e8m0":
            out[expf == top] = NAN
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
        if expf == 0 and self.has_subnormals:
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
        if v < 0 and not self.signed:
            raise TcsmtError(f"{_fmt_value(v)} is not representable in {self.name} (unsigned)")
        if m == 0:
            if not self.has_subnormals:
                raise TcsmtError(f"0 is not representable in {self.name} (no zero: the least value is "
                                 f"2^{self.emin})")
            if sign and not self.has_negative_zero:  # fnuz: the pattern of -0 is NaN
                raise TcsmtError(f"-0 is not representable in {self.name} (no negative zero)")
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
        if not self.has_subnormals and m < Fraction(2) ** self.emin:
            raise TcsmtError(f"{_fmt_value(v)} underflows {self.name} (least {_fmt_value(Fraction(2) ** self.emin)})")
        sig = scaled.numerator
        if sig < (1 << self.frac_bits) and self.has_subnormals:
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
        if self.specials == "none":
            raise TcsmtError(f"{self.name} has no NaN")
        if self.specials == "fnuz":
            return self.pack_fields(1, 0, 0)  # the only NaN: the pattern of -0
        # NVIDIA's canonical NaN: all ones below the sign bit (e4m3: S.1111.111; e8m0: 0xFF)
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
        sub = (expf == 0) & self.has_subnormals
        sig = np.where(sub, frac, frac + (1 << self.frac_bits)).astype(np.float64)
        e = np.where(sub, self.emin, expf - self.bias) - self.frac_bits
        val = np.ldexp(sig, e.astype(np.int32))
        val = np.where(cls == INF, np.inf, val)
        val = np.where(cls == NAN, np.nan, val)
        return np.where(s == 1, -val, val)


def _fmt_value(v: Fraction) -> str:
    from tcsmt.arith.values import format_value

    return format_value(v)


FP64 = Format("fp64", 11, 52, aliases=("f64", "float64", "double", "binary64"))
FP32 = Format("fp32", 8, 23, aliases=("f32", "float32", "single", "binary32"))
TF32 = Format("tf32", 8, 10, pad_bits=13, aliases=("tensorfloat32",))
FP16 = Format("fp16", 5, 10, aliases=("f16", "float16", "half", "binary16"))
BF16 = Format("bf16", 8, 7, aliases=("bfloat16",))
E4M3 = Format("e4m3", 4, 3, specials="fn", aliases=("fp8e4m3", "fp8_e4m3", "e4m3fn", "fp8"))
E5M2 = Format("e5m2", 5, 2, aliases=("fp8e5m2", "fp8_e5m2"))
E2M1 = Format("e2m1", 2, 1, specials="none", aliases=("fp4", "fp4e2m1", "float4_e2m1fn", "e2m1fn"))
E3M2 = Format("e3m2", 3, 2, specials="none", aliases=("fp6e3m2", "float6_e3m2fn", "e3m2fn"))
E2M3 = Format("e2m3", 2, 3, specials="none", aliases=("fp6e2m3", "float6_e2m3fn", "e2m3fn"))
UE8M0 = Format("ue8m0", 8, 0, specials="e8m0", signed=False, aliases=("e8m0", "float8_e8m0fnu", "e8m0fnu"))
UE4M3 = Format("ue4m3", 4, 3, specials="fn", signed=False)
E4M3FNUZ = Format("e4m3fnuz", 4, 3, specials="fnuz", exp_bias=8, aliases=("float8_e4m3fnuz", "fp8fnuz"))
E5M2FNUZ = Format("e5m2fnuz", 5, 2, specials="fnuz", exp_bias=16, aliases=("float8_e5m2fnuz", "bf8fnuz"))

FORMATS: dict[str, Format] = {f.name: f for f in (FP64, FP32, TF32, FP16, BF16, E4M3, E5M2, E2M1, E3M2, E2M3,
                                                  UE8M0, UE4M3, E4M3FNUZ, E5M2FNUZ)}
SCALE_FORMATS = ("ue8m0", "ue4m3")
"""Formats that only scale factors take (unsigned: never an element, C or result format)."""
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
