"""Ask a solver for inputs on which two models (architectures, hypotheses, references) differ.

The query is  domain(inputs) and where(inputs) and out_1(inputs) != out_2(inputs)
(on a library GEMM path, such as hopper's ``cublas``, the domain also fixes C = +0: those calls take no C)
over free bit patterns a_0..a_{K-1}, b_0..b_{K-1}, c, with both outputs
given by the one semantics (:mod:`tcsmt.arith.semantics`) through the SMT back end.
Every answer is replayed through the simulator before it is reported.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pysmt.shortcuts import BV, And, BVExtract, Equals, Not, Or

from tcsmt.arith.formats import Format, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.arith.registry import REFERENCES, check_instr, find_arch, resolve, split_spec
from tcsmt.errors import InternalError, TcsmtError
from tcsmt.sim.simulator import simulate_params
from tcsmt.solve import inert
from tcsmt.solve.encode import Inputs, domain, inputs_for, output_term
from tcsmt.solve.probe import probe_row
from tcsmt.solve.solvers import solve
from tcsmt.solve.where import parse_where


@dataclass
class Case:
    """One discriminating input with each model's output pattern."""

    a: list[int]
    b: list[int]
    c: int
    outputs: dict[str, int]
    sa: list[int] = field(default_factory=list)
    """Scale factors of A (one per scale block) on a block-scaled path; empty elsewhere."""
    sb: list[int] = field(default_factory=list)


OutcomeStatus = Literal["found", "equivalent", "timeout"]
"""discriminate's answer: inputs that tell the models apart were found; the models are equal up to the
instruction (a solver proof); or no answer within the time limit."""
StopReason = Literal["", "time limit", "no more exist"]


@dataclass
class Outcome:
    """The result of a discrimination query."""

    status: OutcomeStatus
    specs: list[str]
    params: list[ModelParams]
    in_fmt: Format
    c_fmt: Format
    out_fmt: Format
    K: int
    cases: list[Case] = field(default_factory=list)
    solver: str = ""
    seconds: float = 0.0
    tried_k: list[int] = field(default_factory=list)
    where: str = ""
    b_fmt: Format | None = None
    """B's format on a mixed path (None: in_fmt)."""
    count: int = 1
    """How many inputs were asked for."""
    stopped: StopReason = ""
    """Why fewer than ``count`` inputs were found: "" (all found), "time limit", or "no more exist" (unsat)."""
    scale_fmt: Format | None = None
    """The scale factors' format on a block-scaled path."""
    scale_block: int = 0

    @property
    def b_format(self) -> Format:
        return self.b_fmt or self.in_fmt


def _paths_of(spec: str) -> list[tuple[str, str, str]]:
    base = split_spec(spec)[0]
    if base.lower() in REFERENCES:
        return []
    return [(p.params.in_fmt, p.params.out_fmt, p.params.instr) for p in find_arch(base).every_path()]


def choose_path(specs: list[str], in_fmt: str | None, out_fmt: str | None) -> tuple[str, str]:
    """The (in, out) formats to compare: as asked, else the first path every model has."""
    fin = get_format(in_fmt).name if in_fmt else None
    fout = get_format(out_fmt).name if out_fmt else None
    sets = [{(i, o) for i, o, _ in _paths_of(s)} for s in specs]
    sets = [s for s in sets if s]
    common = set.intersection(*sets) if sets else {("fp16", "fp32")}
    cands = [(i, o) for i, o in sorted(common, key=lambda io: (io != ("fp16", "fp32"), io))
             if (fin is None or i == fin) and (fout is None or o == fout)]
    if not cands:
        want = f"{fin or '*'} -> {fout or '*'}"
        have = ", ".join(f"{i}->{o}" for i, o in sorted(common)) or "none"
        raise TcsmtError(f"the models {' and '.join(specs)} share no path {want} (common paths: {have})")
    return cands[0]


def resolve_for(spec: str, in_fmt: str, out_fmt: str, instr: str | None) -> ModelParams:
    """Resolve a spec on a path; --instr applies to the models that have that instruction."""
    if instr:
        have = [i for fi, fo, i in _paths_of(spec) if fi == in_fmt and fo == out_fmt]
        if instr in have:
            return resolve(spec, in_fmt, out_fmt, instr)
    return resolve(spec, in_fmt, out_fmt, None)


def default_k_list(params: list[ModelParams]) -> list[int]:
    """K = 1, 2, 4, ... up to one whole instruction of the widest model."""
    full = max([p.instr_k or p.block_k or 4 for p in params] + [1])
    ks, k = [], 1
    while k < full:
        ks.append(k)
        k *= 2
    ks.append(full)
    return ks


def takes_no_c(spec: str, p: ModelParams) -> bool:
    """Whether ``p`` is a library GEMM path of ``spec``'s architecture (those calls take no C: C = +0)."""
    base = split_spec(spec)[0]
    if base.lower() in REFERENCES:
        return False
    return any(q.library for q in find_arch(base).find_paths(p.in_fmt, p.out_fmt, p.instr))


def build(params: list[ModelParams], K: int, where: str | None, allow_subnormal: bool = True,
          c_zero: bool = False):
    """Inputs, the constraint on the domain, and each model's output term (``c_zero``: C is +0)."""
    inp = inputs_for(params[0], K)
    dom = And(domain(inp, allow_subnormal), parse_where(where, inp))
    if c_zero:
        dom = And(dom, Equals(inp.symbol_of("c"), BV(0, get_format(params[0].c_fmt).storage_bits)))
    outs = [output_term(circuit_params(p, K), inp) for p in params]
    return inp, dom, outs


def circuit_params(p: ModelParams, K: int) -> ModelParams:
    """The parameters whose circuit stands for ``p`` at K products: within one instruction, ``p`` with its
    inert parameters fixed (:func:`tcsmt.solve.inert.canonical`: the same output on every input), so models
    that differ only there get one shared circuit and the solver's proof is immediate; else ``p``."""
    if p.instr_k and K <= p.instr_k:
        return inert.canonical(p)
    return p


def _symbols(inp: Inputs) -> dict:
    return {n: inp.symbol_of(n) for n in inp.names}


def _block(inp: Inputs, model: dict[str, int]):
    return Not(And([Equals(inp.symbol_of(n), BV(v, inp.symbol_of(n).bv_width())) for n, v in model.items()]))


def simulate_case(params: list[ModelParams], specs: list[str], a: list[int], b: list[int], c: int,
           sa: list[int] | None = None, sb: list[int] | None = None) -> dict[str, int]:
    """Each model's output on one input, from the simulator (``sa``, ``sb``: scale factors, if any)."""
    fin, fb, fc = get_format(params[0].in_fmt), get_format(params[0].b_format), get_format(params[0].c_fmt)
    av = np.array([a], dtype=fin.dtype)
    bv = np.array([b], dtype=fb.dtype)
    cv = np.array([c], dtype=fc.dtype)
    scales: dict = {}
    if params[0].scale_fmt:
        fs = get_format(params[0].scale_fmt)
        scales = {"sa": np.array([sa or []], dtype=fs.dtype), "sb": np.array([sb or []], dtype=fs.dtype)}
    return {s: int(simulate_params(p, av, bv, cv, **scales)[0]) for s, p in zip(specs, params)}


def _case(inp: Inputs, model: dict[str, int], params, specs) -> Case:
    a = [model[f"a{i}"] for i in range(inp.K)]
    b = [model[f"b{i}"] for i in range(inp.K)]
    sa = [model[f"sa{j}"] for j in range(len(inp.sa))]
    sb = [model[f"sb{j}"] for j in range(len(inp.sb))]
    outputs = simulate_case(params, specs, a, b, model["c"], sa, sb)
    if len(set(outputs.values())) == 1:
        raise InternalError("the solver's input does not discriminate in the simulator "
                            f"(a={a}, b={b}, c={model['c']}, sa={sa}, sb={sb})")
    return Case(a, b, model["c"], outputs, sa, sb)


def probe(params: list[ModelParams], specs: list[str], K: int, c_zero: bool, seed: int = 0) -> Case | None:
    """A discriminating input found by :func:`tcsmt.solve.probe.probe_row` (the simulator on fixed rows), replayed
    as a solver's answer is; None where no row of the probe separates the models."""
    row = probe_row(params, K, c_zero, seed)
    if row is None:
        return None
    a, b, c = row
    outputs = simulate_case(params, specs, a, b, c)
    if len(set(outputs.values())) == 1:
        raise InternalError(f"the probe's row does not discriminate when replayed (a={a}, b={b}, c={c})")
    return Case(a, b, c, outputs)


def _model_of(case: Case) -> dict[str, int]:
    m = {f"a{i}": x for i, x in enumerate(case.a)}
    m.update({f"b{i}": x for i, x in enumerate(case.b)})
    m["c"] = case.c
    return m


def check_satisfiable(dom, inp: Inputs, solver: str, timeout: float) -> None:
    ans = solve(dom, _symbols(inp), solver, timeout)
    if ans.status == "unsat":
        raise TcsmtError("the --where constraints admit no input (they contradict each other or the format)")


def discriminate(specs: list[str], in_fmt: str | None = None, out_fmt: str | None = None,
                 instr: str | None = None, K: int | None = None, count: int = 1, minimize: bool = False,
                 where: str | None = None, solver: str = "auto", timeout: float = 120.0,
                 use_probe: bool = True) -> Outcome:
    """Find up to ``count`` inputs on which the models ``specs`` (two or more) do not all agree.

    At each K, :func:`probe` (the simulator on a fixed set of rows) runs before the solver, unless
    ``use_probe`` is false, a ``where`` constraint is given (the probe's rows ignore it) or the path is
    block-scaled; an input it finds is an answer as a solver's is (the solver then finds further ones)."""
    if len(specs) < 2:
        raise TcsmtError("discriminate needs two models")
    if count < 1:
        raise TcsmtError("--count must be at least 1")
    fin, fout = choose_path(specs, in_fmt, out_fmt)
    check_instr(instr, specs, fin, fout)
    params = [resolve_for(s, fin, fout, instr) for s in specs]
    c_fmts = {p.c_fmt for p in params}
    if len(c_fmts) > 1:
        raise TcsmtError(f"the models read C in different formats ({', '.join(sorted(c_fmts))})")
    c_zero = any(takes_no_c(s, p) for s, p in zip(specs, params))
    ks = [K] if K is not None else default_k_list(params)
    if any(k < 1 or k > 256 for k in ks):
        raise TcsmtError("--k must be between 1 and 256")
    t0 = time.perf_counter()
    layouts = {(p.b_format, p.scale_fmt, p.scale_block) for p in params}
    if len(layouts) > 1:
        raise TcsmtError("the models read different B formats or scale factors: "
                         + "; ".join(f"{p.name}: B {p.b_format}, scales {p.scale_fmt or 'none'}" for p in params))
    out = Outcome("equivalent", specs, params, get_format(fin), get_format(params[0].c_fmt), get_format(fout), ks[-1],
                  where=where or "", count=count,
                  b_fmt=get_format(params[0].b_fmt) if params[0].b_fmt else None,
                  scale_fmt=get_format(params[0].scale_fmt) if params[0].scale_fmt else None,
                  scale_block=params[0].scale_block)
    checked_where = False
    for k in ks:
        left = timeout - (time.perf_counter() - t0)
        if left <= 0:
            out.status = "timeout"
            break
        inp, dom, outs = build(params, k, where, c_zero=c_zero)
        if where and not checked_where:
            check_satisfiable(dom, inp, solver, left)
            checked_where = True
        differ = Or([Not(Equals(outs[0], o)) for o in outs[1:]])
        query = And(dom, differ)
        out.tried_k.append(k)
        found = probe(params, specs, k, c_zero) if use_probe and not where and not params[0].scale_fmt else None
        if found is not None:
            out.solver, model = "simulator probe", _model_of(found)
        else:
            ans = solve(query, _symbols(inp), solver, left)
            out.solver = ans.solver
            if ans.status in ("timeout", "unknown"):
                out.status = "timeout"
                break
            if ans.status == "unsat":
                continue
            model = ans.model
        out.K = k
        if minimize:
            model = minimize_model(query, inp, model, timeout - (time.perf_counter() - t0), solver)
        out.cases.append(_case(inp, model, params, specs))
        out.status = "found"
        blocked = And(query, _block(inp, model))
        while len(out.cases) < count:
            left = timeout - (time.perf_counter() - t0)
            if left <= 0:
                out.stopped = "time limit"
                break
            ans = solve(blocked, _symbols(inp), solver, left)
            if ans.status != "sat":
                out.stopped = "no more exist" if ans.status == "unsat" else "time limit"
                break
            m = minimize_model(blocked, inp, ans.model, left, solver) if minimize else ans.model
            out.cases.append(_case(inp, m, params, specs))
            blocked = And(blocked, _block(inp, m))
        break
    out.seconds = time.perf_counter() - t0
    return out


# ------------------------------------------------------------- minimisation
def _frac_field(sym, fmt: Format):
    lo = fmt.pad_bits
    return BVExtract(sym, lo, lo + fmt.frac_bits - 1)


def _zero_product(inp: Inputs, i: int):
    sa, sb = inp.symbol_of(f"a{i}"), inp.symbol_of(f"b{i}")
    return And(Equals(sa, BV(0, sa.bv_width())), Equals(sb, BV(0, sb.bv_width())))


def _pow2(inp: Inputs, name: str):
    fmt, sym = inp.fmt_of(name), inp.symbol_of(name)
    return Equals(_frac_field(sym, fmt), BV(0, fmt.frac_bits))


def _unit(inp: Inputs, name: str):
    fmt, sym = inp.fmt_of(name), inp.symbol_of(name)
    return Or(Equals(sym, BV(fmt.from_fraction(1), fmt.storage_bits)), Equals(sym, BV(0, fmt.storage_bits)))


def _positive(inp: Inputs, name: str):
    fmt, sym = inp.fmt_of(name), inp.symbol_of(name)
    top = fmt.storage_bits - 1
    return Equals(BVExtract(sym, top, top), BV(0, 1))


def minimize_model(query, inp: Inputs, model: dict[str, int], budget: float, solver: str = "auto") -> dict[str, int]:
    """Make a discriminating input easier to read, keeping the query satisfiable.

    Greedy, in this order, each step kept only if still satisfiable: (1) as
    few non-zero products as possible (only the first j products non-zero,
    j = 1, 2, ...), (2) every input a power of two (all at once, else one by
    one), (3) b entries equal to 1, (4) every input positive.  Each step is a
    fresh solve within the remaining ``budget`` seconds.
    """
    t0 = time.perf_counter()
    syms = _symbols(inp)
    kept = [query]
    best = dict(model)

    def attempt(extra) -> bool:
        nonlocal best
        left = budget - (time.perf_counter() - t0)
        if left <= 0.5:
            return False
        ans = solve(And([*kept, extra]), syms, solver, min(left, max(5.0, budget / 4)))
        if ans.status == "sat":
            kept.append(extra)
            best = ans.model
            return True
        return False

    nz = [i for i in range(inp.K) if best[f"a{i}"] & _mag_mask(inp.in_fmt) and best[f"b{i}"] & _mag_mask(inp.fmt_of("b0"))]
    for j in range(len(nz)):
        if attempt(And([_zero_product(inp, i) for i in range(inp.K) if i >= j])):
            break
    live = [n for n in inp.names if not n.startswith("s") and best[n] & _mag_mask(inp.fmt_of(n))]
    for make in (_pow2, _unit, _positive):
        names = [n for n in live if make is not _unit or n.startswith("b")]
        if not names or attempt(And([make(inp, n) for n in names])):
            continue
        for n in names:
            attempt(make(inp, n))
    return best


def _mag_mask(fmt: Format) -> int:
    return (1 << (fmt.storage_bits - 1)) - 1
