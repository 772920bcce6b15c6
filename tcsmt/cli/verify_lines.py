"""The number and witness lines ``tcsmt verify`` prints (both its forms: :mod:`tcsmt.cli.verify_cmd`,
:mod:`tcsmt.cli.verify_compare`)."""
from __future__ import annotations

from fractions import Fraction

from tcsmt import verify as V
from tcsmt.arith.formats import FP32
from tcsmt.arith.values import format_value


def _num(v: Fraction | float | None) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "inf" if v == float("inf") else f"{v:.3g}"
    if v == 0:
        return "0"
    try:
        f = float(v)
    except OverflowError:  # beyond float range (e.g. --bound 2^4000): scientific notation from exact logs
        f = 0.0
    if f != 0.0:
        return f"{f:.3e}"
    import math

    x = abs(v)
    e10 = math.floor(math.log10(x.numerator) - math.log10(x.denominator))
    m = float(x / Fraction(10) ** e10)
    if m >= 10:
        m, e10 = m / 10, e10 + 1
    return f"{'-' if v < 0 else ''}{m:.3f}e{e10:+d}"


def _pow2(v: Fraction | float | None) -> str:
    """log2 of an error, for eyeballing against 2^-24 (fp32 unit roundoff)."""
    if v is None or isinstance(v, float) or v <= 0:
        return ""
    import math

    return f"(2^{math.log2(v):.2f})"


def _vec(bits: list[int]) -> str:
    return "[" + ", ".join(format_value(FP32.to_fraction(x)) for x in bits) + "]"


def _witness_lines(w: V.Witness, algos: list[str], indent: str = "  ") -> list[str]:
    lines = [f"{indent}a = {_vec(w.a)}", f"{indent}b = {_vec(w.b)}",
             f"{indent}exact A.B = {format_value(w.exact)}"]
    for algo in algos:
        d = FP32.to_fraction(w.results[algo])
        lines.append(f"{indent}{algo:13} D = {format_value(d):28} error {_num(w.errors[algo])} {_pow2(w.errors[algo])}")
    return lines


