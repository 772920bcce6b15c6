"""The input domain of ``tcsmt verify``: fp32 values with LO <= |x| <= HI, parsed from ``LO..HI``."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from tcsmt.arith.formats import FP32, Format, get_format
from tcsmt.arith.values import format_value, parse_value
from tcsmt.errors import TcsmtError

FP16: Format = get_format("fp16")
DEFAULT_RANGE = "2^-14..2^14"


@dataclass(frozen=True)
class Domain:
    """Inputs with LO <= |x| <= HI (fp32 values; LO = 0 admits zeros and subnormals)."""

    lo: Fraction
    hi: Fraction
    text: str

    @property
    def lo_pattern(self) -> int:
        """Smallest fp32 magnitude pattern in the domain."""
        return _fp32_pattern_at_least(self.lo)

    @property
    def hi_pattern(self) -> int:
        """Largest fp32 magnitude pattern in the domain."""
        return _fp32_pattern_at_most(self.hi)

    @property
    def exp_range(self) -> tuple[int, int]:
        """Range of the fp32 decoded exponent e (emin = -126 for subnormals) on the domain."""
        lo_e = -126 if self.lo_pattern < (1 << 23) else (self.lo_pattern >> 23) - 127
        hi_e = max(-126, (self.hi_pattern >> 23) - 127)
        return lo_e, hi_e

    def describe(self) -> str:
        """The domain in words, exactly (the extreme fp32 values it contains)."""
        lo, hi = FP32.to_fraction(self.lo_pattern), FP32.to_fraction(self.hi_pattern)
        zero = " (zeros and subnormals included)" if self.lo == 0 else ""
        return f"{format_value(lo)} <= |x| <= {format_value(hi)}{zero}"


@lru_cache(maxsize=256)
def _fp32_pattern_at_most(v: Fraction) -> int:
    """Largest non-negative fp32 pattern whose value is <= v (v >= 0, finite; a binary search of 31 exact steps,
    remembered: the domain's bounds are asked for on every row family)."""
    lo, hi = 0, 0x7F7FFFFF
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if FP32.to_fraction(mid) <= v:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _fp32_pattern_at_least(v: Fraction) -> int:
    """Smallest non-negative fp32 pattern whose value is >= v."""
    p = _fp32_pattern_at_most(v)
    return p if FP32.to_fraction(p) == v else p + 1


def parse_range(text: str, piece_fmt: str = "fp16") -> Domain:
    """Parse ``LO..HI`` (exact values such as ``2^-14..2^14``); raises TcsmtError when unusable.

    HI may not exceed the largest finite value of ``piece_fmt``, the format the schemes split into
    (65504 for fp16; bf16 and tf32 reach fp32's largest finite value)."""
    if ".." not in text:
        raise TcsmtError(f"bad --range {text!r}: write LO..HI, e.g. 2^-14..2^14")
    lo_t, hi_t = text.split("..", 1)
    try:
        lo, hi = parse_value(lo_t), parse_value(hi_t)
    except TcsmtError as exc:
        raise TcsmtError(f"bad --range {text!r}: {exc}") from exc
    if lo < 0 or hi <= 0:
        raise TcsmtError(f"bad --range {text!r}: LO and HI bound magnitudes (0 <= LO < HI)")
    if lo >= hi:
        raise TcsmtError(f"bad --range {text!r}: LO must be below HI")
    top = get_format(piece_fmt).max_finite
    if hi > top:
        shown = str(top) if top.denominator == 1 and top < 1 << 20 else format_value(top)
        raise TcsmtError(f"bad --range {text!r}: HI must be at most {shown} (the schemes split into {piece_fmt})")
    d = Domain(lo, hi, text)
    if d.lo_pattern > d.hi_pattern:
        raise TcsmtError(f"bad --range {text!r}: no fp32 value lies in it")
    return d
