"""Exact values written as the papers write them.

Parsing accepts sums and differences of terms, each term a decimal or integer,
a power of two ``2^-24``, or a product ``3*2^-5``; for example ``1-2^-24``,
``1+2^-1+2^-2+2^-3``, ``-0.75``, ``2^10``.  Formatting writes an exact value
as the shortest signed sum of powers of two (non-adjacent form).
"""
from __future__ import annotations

import re
from fractions import Fraction

from .errors import TcsmtError

_TERM = re.compile(r"\s*([+-]?)\s*([^+-]+(?:[eE][+-]?\d+)?)")


def _parse_factor(text: str) -> Fraction:
    text = text.strip()
    if "^" in text:
        base, exp = text.split("^", 1)
        exp = exp.strip().strip("()")
        return Fraction(base.strip()) ** int(exp)
    return Fraction(text)


def parse_value(text: str) -> Fraction:
    """Parse an exact value such as ``1-2^-24`` or ``3*2^-5`` (raises TcsmtError)."""
    s = text.strip().replace(" ", "")
    if not s:
        raise TcsmtError("empty value")
    # split on + and - that are not exponent signs (after ^ or e/E)
    terms: list[str] = []
    cur = ""
    for i, ch in enumerate(s):
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
                prod *= _parse_factor(f)
            total += sign * prod
    except (ValueError, ZeroDivisionError) as exc:
        raise TcsmtError(f"cannot read value {text!r}: write e.g. 1-2^-24, 3*2^-5, 0.75") from exc
    return total


def parse_vector(text: str) -> list[Fraction]:
    """Parse a comma-separated list of exact values."""
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
