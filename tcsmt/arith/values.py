"""Exact values written as the papers write them.

Parsing accepts sums and differences of terms, each term a decimal or integer,
a power of two ``2^-24``, or a product ``3*2^-5``; for example ``1-2^-24``,
``1+2^-1+2^-2+2^-3``, ``-0.75``, ``2^10``.  Formatting writes an exact value
as the shortest signed sum of powers of two (non-adjacent form).

Parsing is bounded, so that no input can make it run for long: a value has at
most :data:`MAX_TEXT` characters, and every factor and the value itself lie
within 2^-MAX_BITS .. 2^MAX_BITS (checked before any power is computed), far
beyond every format here (fp64 spans 2^-1074 .. 2^1024).
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

from tcsmt.errors import TcsmtError
from tcsmt.io.limits import SIM_K, shown

MAX_TEXT = 1000
"""Longest value text accepted (characters)."""
MAX_BITS = 4096
"""Every factor and every value lies within 2^-MAX_BITS .. 2^MAX_BITS."""
_MAX_DECIMAL_EXP = 1233  # 10^1233 < 2^4096 < 10^1234
_DECIMAL = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE]([+-]?\d+))?$")
_RATIO = re.compile(r"^[+-]?\d+/\d+$")
_INTEGER = re.compile(r"^[+-]?\d+$")


def _quoted(text: str, limit: int = 60) -> str:
    """``text`` quoted for a message, shortened to ``limit`` characters."""
    return repr(text if len(text) <= limit else text[:limit - 3] + "...")


def _range_error(text: str) -> TcsmtError:
    return TcsmtError(f"value {_quoted(text)} is out of range: values and their factors must lie within "
                      f"2^-{MAX_BITS}..2^{MAX_BITS} (every format lies within 2^-1074..2^1024)")


def _log2_size(v: Fraction) -> float:
    """log2 of max(|numerator|, denominator): the bits a power of v costs per unit of exponent."""
    return math.log2(max(abs(v.numerator), v.denominator))


_HI = Fraction(2) ** MAX_BITS
_LO = Fraction(1, 2 ** MAX_BITS)


def _check_size(v: Fraction, text: str) -> Fraction:
    """v itself, if 0 or 2^-MAX_BITS <= |v| <= 2^MAX_BITS (cheap bit-length test first)."""
    if v:
        if abs(v.numerator.bit_length() - v.denominator.bit_length()) > MAX_BITS + 2 or not _LO <= abs(v) <= _HI:
            raise _range_error(text)
    return v


def _parse_number(text: str, whole: str) -> Fraction:
    """A decimal, integer or ratio literal (``12``, ``0.75``, ``1e-3``, ``1/3``), decimal exponent bounded."""
    if _RATIO.match(text):
        return _check_size(Fraction(text), whole)
    m = _DECIMAL.match(text)
    if not m:
        raise ValueError(f"not a number: {text!r}")
    if m.group(1) is not None and abs(int(m.group(1))) > _MAX_DECIMAL_EXP:
        raise _range_error(whole)
    return _check_size(Fraction(text), whole)


def _parse_factor(text: str, whole: str) -> Fraction:
    """``NUMBER`` or ``NUMBER^EXP`` (EXP an integer, optionally in parentheses); bounded."""
    text = text.strip()
    if "^" not in text:
        return _parse_number(text, whole)
    base_t, exp_t = text.split("^", 1)
    exp_t = exp_t.strip()
    if exp_t.startswith("(") and exp_t.endswith(")"):
        exp_t = exp_t[1:-1].strip()
    if not _INTEGER.match(exp_t):
        raise ValueError(f"not an integer exponent: {exp_t!r}")
    base = _parse_number(base_t.strip(), whole)
    exp = int(exp_t)
    if base == 0:
        if exp < 0:
            raise ZeroDivisionError("0 to a negative power")
        return Fraction(1 if exp == 0 else 0)
    if abs(base) == 1:
        return base if exp % 2 else Fraction(1)
    # |base| != 0, 1: max(|num|, den) >= 2, so each unit of exponent costs at least one bit
    if abs(exp) > MAX_BITS + 2 or abs(exp) * _log2_size(base) > MAX_BITS + 2:
        raise _range_error(whole)
    return base ** exp


def parse_value(text: str) -> Fraction:
    """Parse an exact value such as ``1-2^-24`` or ``3*2^-5`` (raises TcsmtError)."""
    if not isinstance(text, str):
        raise TcsmtError(f"a value is text such as '1-2^-24' or '0.75', not {shown(text)}")
    if len(text) > MAX_TEXT:
        raise TcsmtError(f"value too long ({len(text)} characters; at most {MAX_TEXT})")
    s = text.strip().replace(" ", "")
    if not s:
        raise TcsmtError("empty value")
    # split on + and - that are not exponent signs (after ^ or e/E)
    terms: list[str] = []
    cur = ""
    for ch in s:
        if ch in "+-" and cur and cur[-1] not in "^eE(" and not cur.endswith("*"):
            terms.append(cur)
            cur = ch
        else:
            cur += ch
    terms.append(cur)
    total = Fraction(0)
    try:
        for t in terms:
            sign = -1 if t.startswith("-") else 1
            t = t.lstrip("+-")
            prod = Fraction(1)
            for f in t.split("*"):
                prod = _check_size(prod * _parse_factor(f, text), text)
            total += sign * prod
    except (ValueError, ZeroDivisionError) as exc:
        raise TcsmtError(f"cannot read value {_quoted(text)}: write e.g. 1-2^-24, 3*2^-5, 0.75") from exc
    return _check_size(total, text)


def parse_vector(text: str) -> list[Fraction]:
    """Parse a comma-separated list of exact values (at most :data:`tcsmt.io.limits.SIM_K` of them)."""
    if not isinstance(text, str):
        raise TcsmtError(f"a vector is text of comma-separated values such as '1,2^-24', not {shown(text)}")
    if text.count(",") >= SIM_K:
        raise TcsmtError(f"a vector of {text.count(',') + 1:,} values is over its limit of {SIM_K:,} "
                         "(products per dot product in the simulator)")
    return [parse_value(part) for part in text.split(",") if part.strip()]


def naf_terms(v: Fraction) -> list[tuple[int, int]]:
    """Signed powers of two (sign, exponent) summing exactly to a dyadic v, fewest terms first-high."""
    if v == 0:
        return []
    if v.denominator & (v.denominator - 1):
        raise TcsmtError(f"{v} is not a dyadic rational")
    shift = v.denominator.bit_length() - 1
    n = v.numerator  # v = n * 2^-shift
    out: list[tuple[int, int]] = []
    pos = 0
    while n != 0:
        if n & 1:
            digit = 2 - (n & 3)  # +1 or -1
            n -= digit
            out.append((digit, pos - shift))
        n >>= 1
        pos += 1
    out.reverse()
    return out


def format_value(v: Fraction | float) -> str:
    """Exact value as a short power-of-two sum, e.g. ``1-2^-24``, ``-(2^7+2^6)``."""
    if isinstance(v, float):
        if v != v:
            return "NaN"
        if v in (float("inf"), float("-inf")):
            return "-Inf" if v < 0 else "+Inf"
        v = Fraction(v)
    if v == 0:
        return "0"
    terms = naf_terms(v)
    if len(terms) > 4:
        # long significands: m*2^e with m odd
        n, d = v.numerator, v.denominator
        e = -(d.bit_length() - 1)
        while n % 2 == 0:
            n //= 2
            e += 1
        return f"{n}*2^{e}" if e else str(n)
    parts = []
    for i, (sgn, e) in enumerate(terms):
        t = "1" if e == 0 else ("2" if e == 1 else f"2^{e}")
        if i == 0:
            parts.append(("-" if sgn < 0 else "") + t)
        else:
            parts.append(("-" if sgn < 0 else "+") + t)
    return "".join(parts)
