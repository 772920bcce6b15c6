"""The --where constraint language of solver queries.

Constraints are separated by commas; each is one of

* ``VAR=VALUE``: an exact value (``c=1``, ``a0=1-2^-11``, ``b=2^-24`` for every b);
* ``VAR>=0``, ``VAR>0``, ``VAR<=0``, ``VAR<0``, ``VAR!=0``: sign and zero;
* ``|VAR|<=VALUE``, ``|VAR|>=VALUE``, ``|VAR|<VALUE``, ``|VAR|>VALUE``: magnitude bounds
  (VALUE exactly representable in the variable's format);
* ``normal``: every input normal or zero; ``positive``: every input >= +0;
  ``nonzero``: every input non-zero.

VAR is ``a``, ``b`` (all entries), ``aI``/``bI`` (entry I) or ``c``.
"""
from __future__ import annotations

import re

from pysmt.fnode import FNode
from pysmt.shortcuts import BV, BVUGE, BVUGT, BVULE, BVULT, TRUE, And, BVExtract, Equals, Not, Or

from tcsmt.arith.formats import Format
from tcsmt.arith.values import parse_value
from tcsmt.errors import TcsmtError
from tcsmt.solve.encode import Inputs, finite_constraint

_CMP = re.compile(r"^\s*(\|?)([abc]\d*)(\|?)\s*(<=|>=|!=|=|<|>)\s*(.+?)\s*$")


def _vars(inp: Inputs, var: str) -> list[tuple[FNode, Format]]:
    if var in ("a", "b"):
        return [(inp.symbol_of(f"{var}{i}"), inp.fmt_of(f"{var}{i}")) for i in range(inp.K)]
    if var == "c":
        return [(inp.symbol_of("c"), inp.c_fmt)]
    idx = int(var[1:])
    if idx >= inp.K:
        raise TcsmtError(f"--where names {var} but K = {inp.K} (indices 0..{inp.K - 1})")
    return [(inp.symbol_of(var), inp.fmt_of(var))]


def _sign(sym: FNode, fmt: Format) -> FNode:
    top = fmt.storage_bits - 1
    return Equals(BVExtract(sym, top, top), BV(1, 1))


def _mag(sym: FNode, fmt: Format) -> FNode:
    return BVExtract(sym, 0, fmt.storage_bits - 2)


def _is_zero(sym: FNode, fmt: Format) -> FNode:
    return Equals(_mag(sym, fmt), BV(0, fmt.storage_bits - 1))


def parse_where(text: str | None, inp: Inputs) -> FNode:
    """The conjunction of the constraints in ``text`` over the inputs (TcsmtError if malformed)."""
    if not text:
        return TRUE()
    out = []
    for raw in (t.strip() for t in text.split(",")):
        if not raw:
            continue
        word = raw.lower()
        if word in ("normal", "nosubnormal", "positive", "nonzero"):
            for name in inp.names:
                sym, fmt = inp.symbol_of(name), inp.fmt_of(name)
                if word in ("normal", "nosubnormal"):
                    out.append(finite_constraint(fmt, inp.by_name(name), allow_subnormal=False))
                elif word == "positive":
                    out.append(Not(_sign(sym, fmt)))
                else:
                    out.append(Not(_is_zero(sym, fmt)))
            continue
        m = _CMP.match(raw)
        if not m:
            raise TcsmtError(f"cannot read --where constraint {raw!r} (e.g. c=1, a>=0, |b|<=2^-10, normal)")
        bar1, var, bar2, cmp, value_text = m.groups()
        if bool(bar1) != bool(bar2):
            raise TcsmtError(f"unbalanced |...| in --where constraint {raw!r}")
        value = parse_value(value_text)
        for sym, fmt in _vars(inp, var):
            if bar1:
                if value < 0:
                    raise TcsmtError(f"--where {raw!r}: a magnitude bound must be >= 0")
                pat = fmt.from_fraction(value)
                ref = BV(pat & ((1 << (fmt.storage_bits - 1)) - 1), fmt.storage_bits - 1)
                mag = _mag(sym, fmt)
                rel = {"<=": BVULE, ">=": BVUGE, "<": BVULT, ">": BVUGT}.get(cmp)
                if rel is None:
                    out.append(Equals(mag, ref) if cmp == "=" else Not(Equals(mag, ref)))
                else:
                    out.append(rel(mag, ref))
                continue
            if cmp == "=":
                out.append(Equals(sym, BV(fmt.from_fraction(value), fmt.storage_bits)))
                continue
            if value != 0:
                raise TcsmtError(f"--where {raw!r}: compare a variable with 0, or use =VALUE or |{var}|<=VALUE")
            neg, zero = _sign(sym, fmt), _is_zero(sym, fmt)
            out.append({
                ">=": Or(Not(neg), zero), ">": And(Not(neg), Not(zero)),
                "<=": Or(neg, zero), "<": And(neg, Not(zero)), "!=": Not(zero),
            }[cmp])
    return And(out) if out else TRUE()
