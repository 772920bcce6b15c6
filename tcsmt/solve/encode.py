"""SMT encodings of dot products: free input bit patterns, a model's output term, domain constraints."""
from __future__ import annotations

from dataclasses import dataclass, field

from pysmt.fnode import FNode
from pysmt.shortcuts import BV, TRUE, And, BVExtract, Equals, Not, Or

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import Format, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.backends.smt import Bv, SmtBackend
from tcsmt.errors import TcsmtError

B = SmtBackend()


@dataclass
class Inputs:
    """The free inputs of a query: a_0..a_{K-1} (in_fmt), b_0..b_{K-1} (b_fmt, default in_fmt), c
    (c_fmt), and on a block-scaled path the scale factors sa_0.., sb_0.. (scale_fmt, one per block)."""

    in_fmt: Format
    c_fmt: Format
    K: int
    a: list[Bv]
    b: list[Bv]
    c: Bv
    b_fmt: Format | None = None
    """B's format where it differs from A's (mixed paths)."""
    scale_fmt: Format | None = None
    sa: list[Bv] = field(default_factory=list)
    sb: list[Bv] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return ([f"a{i}" for i in range(self.K)] + [f"b{i}" for i in range(self.K)] + ["c"]
                + [f"sa{j}" for j in range(len(self.sa))] + [f"sb{j}" for j in range(len(self.sb))])

    def symbol_of(self, name: str) -> FNode:
        """The raw (unextended) pysmt symbol of an input."""
        bv = self.by_name(name)
        return bv.t.arg(0)

    def by_name(self, name: str) -> Bv:
        if name == "c":
            return self.c
        if name.startswith("s"):
            return (self.sa if name[1] == "a" else self.sb)[int(name[2:])]
        idx = int(name[1:])
        return (self.a if name[0] == "a" else self.b)[idx]

    def fmt_of(self, name: str) -> Format:
        if name.startswith("s") and self.scale_fmt is not None:
            return self.scale_fmt
        if name.startswith("b") and self.b_fmt is not None:
            return self.b_fmt
        return self.c_fmt if name == "c" else self.in_fmt


def make_inputs(in_fmt: str, c_fmt: str, K: int, prefix: str = "", b_fmt: str = "", *, scale_fmt: str = "",
                scale_block: int = 0) -> Inputs:
    """Free inputs for K products (``b_fmt``: B's own format; ``scale_fmt``/``scale_block``: the scale
    factors of a block-scaled path, ceil(K / scale_block) each for A and B)."""
    fin, fc = get_format(in_fmt), get_format(c_fmt)
    fb = get_format(b_fmt) if b_fmt else fin
    # pysmt symbols are global by name: the format is part of the name
    inp = Inputs(fin, fc, K,
                 a=[B.symbol(f"{prefix}a{i}_{fin.name}", fin.storage_bits) for i in range(K)],
                 b=[B.symbol(f"{prefix}b{i}_{fb.name}", fb.storage_bits) for i in range(K)],
                 c=B.symbol(f"{prefix}c_{fc.name}", fc.storage_bits), b_fmt=fb if b_fmt else None)
    if scale_fmt:
        fs = get_format(scale_fmt)
        m = -(-K // scale_block)
        inp.scale_fmt = fs
        inp.sa = [B.symbol(f"{prefix}sa{j}_{fs.name}_{scale_block}", fs.storage_bits) for j in range(m)]
        inp.sb = [B.symbol(f"{prefix}sb{j}_{fs.name}_{scale_block}", fs.storage_bits) for j in range(m)]
    return inp


def inputs_for(p: ModelParams, K: int, prefix: str = "") -> Inputs:
    """The free inputs of ``p``'s path for K products (its formats, and its scale factors if any)."""
    return make_inputs(p.in_fmt, p.c_fmt, K, prefix, b_fmt=p.b_fmt, scale_fmt=p.scale_fmt, scale_block=p.scale_block)


def output_term(p: ModelParams, inp: Inputs) -> FNode:
    """The output bit pattern of model ``p`` on ``inp`` (a bit-vector of out_fmt's width)."""
    fb = inp.b_fmt or inp.in_fmt
    fs = inp.scale_fmt.name if inp.scale_fmt else ""
    if get_format(p.in_fmt) != inp.in_fmt or get_format(p.c_fmt) != inp.c_fmt or get_format(p.b_format) != fb:
        raise TcsmtError(f"model {p.name} reads {p.in_fmt} x {p.b_format} inputs and {p.c_fmt} C, not "
                         f"{inp.in_fmt.name} x {fb.name}/{inp.c_fmt.name}")
    if (p.scale_fmt and get_format(p.scale_fmt).name) != (fs or "") or (fs and len(inp.sa) != -(-inp.K // p.scale_block)):
        raise TcsmtError(f"model {p.name} reads {p.scale_fmt or 'no'} scale factors"
                         + (f" per {p.scale_block} products" if p.scale_fmt else "")
                         + f", not {fs or 'none'}" + (f" ({len(inp.sa)} for K = {inp.K})" if fs else ""))
    out = sem.dot(B, p, inp.a, inp.b, inp.c, inp.sa, inp.sb)
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
    if inp.scale_fmt is not None:  # scale factors: not NaN (subnormal ue4m3 scales stay in the domain)
        cons += [finite_constraint(inp.scale_fmt, x) for x in inp.sa + inp.sb]
    return And(cons) if cons else TRUE()
