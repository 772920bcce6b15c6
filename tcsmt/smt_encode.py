"""SMT encodings of dot products: free input bit patterns, a model's output term, domain constraints."""
from __future__ import annotations

from dataclasses import dataclass

from pysmt.fnode import FNode
from pysmt.shortcuts import BV, TRUE, And, BVExtract, Equals, Not, Or

from . import semantics as sem
from .backend_smt import Bv, SmtBackend
from .errors import TcsmtError
from .formats import Format, get_format
from .params import ModelParams

B = SmtBackend()


@dataclass
class Inputs:
    """The free inputs of a query: a_0..a_{K-1}, b_0..b_{K-1} (in_fmt) and c (c_fmt)."""

    in_fmt: Format
    c_fmt: Format
    K: int
    a: list[Bv]
    b: list[Bv]
    c: Bv
    b_fmt: Format | None = None
    """B's format where it differs from A's (mixed paths)."""

    @property
    def names(self) -> list[str]:
        return [f"a{i}" for i in range(self.K)] + [f"b{i}" for i in range(self.K)] + ["c"]

    def symbol_of(self, name: str) -> FNode:
        """The raw (unextended) pysmt symbol of an input."""
        bv = self.by_name(name)
        return bv.t.arg(0)

    def by_name(self, name: str) -> Bv:
        if name == "c":
            return self.c
        idx = int(name[1:])
        return (self.a if name[0] == "a" else self.b)[idx]

    def fmt_of(self, name: str) -> Format:
        if name == "c":
            return self.c_fmt
        return (self.b_fmt or self.in_fmt) if name[0] == "b" else self.in_fmt


def make_inputs(in_fmt: str, c_fmt: str, K: int, prefix: str = "", b_fmt: str = "") -> Inputs:
    fin, fc = get_format(in_fmt), get_format(c_fmt)
    fb = get_format(b_fmt) if b_fmt else fin
    # pysmt symbols are global by name: the format is part of the name
    return Inputs(fin, fc, K,
                  a=[B.symbol(f"{prefix}a{i}_{fin.name}", fin.storage_bits) for i in range(K)],
                  b=[B.symbol(f"{prefix}b{i}_{fb.name}", fb.storage_bits) for i in range(K)],
                  c=B.symbol(f"{prefix}c_{fc.name}", fc.storage_bits), b_fmt=fb if b_fmt else None)


def output_term(p: ModelParams, inp: Inputs) -> FNode:
    """The output bit pattern of model ``p`` on ``inp`` (a bit-vector of out_fmt's width)."""
    if (get_format(p.in_fmt) != inp.in_fmt or get_format(p.c_fmt) != inp.c_fmt
            or (get_format(p.b_fmt) if p.b_fmt else None) != inp.b_fmt):
        raise TcsmtError(f"model {p.name} reads {p.in_fmt} inputs and {p.c_fmt} C, not {inp.in_fmt.name}/{inp.c_fmt.name}")
    out = sem.dot(B, p, inp.a, inp.b, inp.c)
    return B.pattern(out, get_format(p.out_fmt).storage_bits)


def finite_constraint(fmt: Format, x: Bv, allow_subnormal: bool = True) -> FNode:
    """x is a finite pattern of ``fmt`` (and normal or zero unless allow_subnormal)."""
    sign, expf, frac = B.fields(fmt, x)
    top = (1 << fmt.exp_bits) - 1
    parts = []
    if fmt.specials == "ieee":
        parts.append(B.ne(expf, top))
    elif fmt.specials == "fn":
        parts.append(Not(And(B.eq(expf, top), B.eq(frac, (1 << fmt.frac_bits) - 1))))
    elif fmt.specials == "fnuz":  # 0x80, the pattern of -0, is the only NaN
        parts.append(Not(And(B.ne(sign, 0), And(B.eq(expf, 0), B.eq(frac, 0)))))
    elif fmt.specials == "e8m0":
        parts.append(B.ne(expf, top))
    # "none" (OCP fp4/fp6): every pattern is finite
    if fmt.pad_bits:
        parts.append(Equals(BVExtract(x.t, 0, fmt.pad_bits - 1), BV(0, fmt.pad_bits)))
    if not allow_subnormal:
        parts.append(Or(B.ne(expf, 0), B.eq(frac, 0)))
    return And(parts)


def domain(inp: Inputs, allow_subnormal: bool = True) -> FNode:
    """Every input is a finite pattern (NaN and Inf are outside the solver's domain)."""
    cons = [finite_constraint(inp.in_fmt, x, allow_subnormal) for x in inp.a]
    cons += [finite_constraint(inp.b_fmt or inp.in_fmt, x, allow_subnormal) for x in inp.b]
    cons.append(finite_constraint(inp.c_fmt, inp.c, allow_subnormal))
    return And(cons) if cons else TRUE()
