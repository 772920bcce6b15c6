"""One dot product d = a.b + c on one model, with its exact value and error (``tcsmt dot``).

Values are exact rationals (:class:`fractions.Fraction`), written as in the papers (``1-2^-24``,
``3*2^-5``); each must be representable in its format (TcsmtError otherwise).  The result ``d`` is the
model's output bit pattern; ``exact`` is a.b + c with no rounding at all; ``error`` is value(d) - exact
(None when d is not finite).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from tcsmt.arith.formats import get_format
from tcsmt.arith.params import ModelParams
from tcsmt.arith.registry import REFERENCES, find_arch, resolve
from tcsmt.arith.values import format_value, parse_value, parse_vector
from tcsmt.errors import TcsmtError
from tcsmt.io.limits import shown
from tcsmt.sim.block_scale import scale_patterns
from tcsmt.sim.simulator import simulate_params


@dataclass(frozen=True)
class DotResult:
    """A dot product on one model: the inputs (exact values), the output pattern and the exact sum."""

    params: ModelParams
    a: tuple[Fraction, ...]
    b: tuple[Fraction, ...]
    c: Fraction
    d: int
    exact: Fraction

    @property
    def d_value(self) -> Fraction | float:
        """value(d): a Fraction, or a float inf / nan."""
        return get_format(self.params.out_fmt).to_fraction(self.d)

    @property
    def error(self) -> Fraction | None:
        """value(d) - exact, or None when d is not finite."""
        v = self.d_value
        return v - self.exact if isinstance(v, Fraction) else None

    def lines(self) -> list[str]:
        """The report ``tcsmt dot`` prints."""
        p = self.params
        out = [f"model   {p.name}  ({p.in_fmt} -> {p.out_fmt}, K = {len(self.a)})",
               f"d       {describe_bits(p.out_fmt, self.d)}",
               f"exact   {format_value(self.exact)}"]
        if self.error is not None:
            out.append(f"error   {format_value(self.error)}")
        return out


def default_path(arch: str, in_fmt: str | None, out_fmt: str | None) -> tuple[str, str]:
    """The formats to use when --in / --out are left out: the architecture's first path matching what is
    given (fp16 -> fp32 for references)."""
    base = arch.split(":")[0]
    if base.lower() in REFERENCES:
        return in_fmt or "fp16", out_fmt or "fp32"
    cands = find_arch(base).find_paths(in_fmt, out_fmt, None)
    if not cands:
        return in_fmt or "fp16", out_fmt or "fp32"
    return cands[0].params.in_fmt, cands[0].params.out_fmt


def describe_bits(fmt_name: str, bits: int) -> str:
    """``0x3c00  = 1`` : a pattern in hex at the format's width and its exact value."""
    fmt = get_format(fmt_name)
    return f"0x{bits:0{fmt.hex_digits}x}  = {format_value(fmt.to_fraction(bits))}"


def _scale_patterns_of(p: ModelParams, values: list[Fraction] | None, option: str) -> list[list[int]] | None:
    """The scale-format patterns of ``--sa``/``--sb`` values (one row); None if not given."""
    if values is None or not p.scale_fmt:
        return None if values is None else [[0] * len(values)]  # (refused by scale_patterns: no scales here)
    fs = get_format(p.scale_fmt)
    try:
        return [[fs.from_fraction(x) for x in values]]
    except TcsmtError as exc:
        raise TcsmtError(f"{option}: {exc}") from None


def dot(arch: str, a_text: str, b_text: str, c_text: str = "0", *, in_fmt: str | None = None,
        out_fmt: str | None = None, instr: str | None = None, sa_text: str | None = None,
        sb_text: str | None = None) -> DotResult:
    """a.b + c on the model ``arch`` (a spec: ``volta``, ``hopper:carry_bits=5``, ``exact``, ...);
    ``a_text`` and ``b_text`` are comma-separated values of equal, non-zero length; on a block-scaled
    path ``sa_text``/``sb_text`` the scale factors, one per scale block (the exact value then scales
    each product by its block's two factors)."""
    if not isinstance(arch, str):
        raise TcsmtError(f"a model spec is a string such as 'volta' or 'volta:carry_bits=2', not {shown(arch)}")
    for what, v in (("in_fmt", in_fmt), ("out_fmt", out_fmt), ("instr", instr)):
        if v is not None and not isinstance(v, str):
            raise TcsmtError(f"{what} must be a string such as 'fp16' or 'mma', not {shown(v)}")
    for what, v in (("a", a_text), ("b", b_text), ("c", c_text), ("sa", sa_text), ("sb", sb_text)):
        if (v is not None or what in "abc") and not isinstance(v, str):
            raise TcsmtError(f"{what} must be text as tcsmt dot takes it (values such as '1,2^-24'), not {shown(v)}")
    in_fmt, out_fmt = default_path(arch, in_fmt, out_fmt)
    p = resolve(arch, in_fmt, out_fmt, instr)
    a, b = parse_vector(a_text), parse_vector(b_text)
    if len(a) != len(b) or not a:
        raise TcsmtError(f"a and b need the same, non-zero length (got {len(a)} and {len(b)})")
    c = parse_value(c_text)
    fin, fb, fc = get_format(p.in_fmt), get_format(p.b_fmt or p.in_fmt), get_format(p.c_fmt)
    ab = np.array([[fin.from_fraction(x) for x in a]], dtype=fin.dtype)
    bb = np.array([[fb.from_fraction(x) for x in b]], dtype=fb.dtype)
    cb = np.array([fc.from_fraction(c)], dtype=fc.dtype)
    sa_v = None if sa_text is None else parse_vector(sa_text)
    sb_v = None if sb_text is None else parse_vector(sb_text)
    sa, sb = scale_patterns(p, _scale_patterns_of(p, sa_v, "--sa"), _scale_patterns_of(p, sb_v, "--sb"), 1, len(a),
                            bits=True)
    d = int(simulate_params(p, ab, bb, cb, sa=sa, sb=sb)[0])
    exact = c
    for k, (x, y) in enumerate(zip(a, b)):
        scale = Fraction(1)
        if sa_v is not None and sb_v is not None:  # (scale_patterns checked their number)
            scale = sa_v[k // p.scale_block] * sb_v[k // p.scale_block]
        exact += x * y * scale
    return DotResult(p, tuple(a), tuple(b), c, d, exact)
