"""Named, reusable solver queries (``queries/*.toml``) and the monotonicity query.

A feature query names a base model, a path and competing hypotheses written as
parameter overrides; running it asks the solver, for each pair of neighbouring
hypotheses, for an input on which they differ, and says which hypothesis the
base model itself agrees with.  The monotonicity query asks for two inputs
x <= y (entry by entry, all non-negative) with result(x) > result(y).
"""
from __future__ import annotations

import dataclasses
import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pysmt.shortcuts import BV, BVUGT, BVULE, And, BVExtract, Equals

from tcsmt.arith.formats import get_format
from tcsmt.arith.registry import check_instr, instructions, models_dir
from tcsmt.errors import InternalError, TcsmtError
from tcsmt.io import load
from tcsmt.io.limits import SMT_K, shown
from tcsmt.solve.discriminate import Outcome, choose_path, discriminate, resolve_for, simulate_case
from tcsmt.solve.encode import domain, inputs_for, output_term
from tcsmt.solve.solvers import solve
from tcsmt.solve.where import parse_where


def queries_dir() -> Path:
    return models_dir().parent / "queries" if (models_dir().parent / "queries").is_dir() else Path(__file__).parent / "queries"


@dataclass
class QuerySpec:
    name: str
    title: str
    question: str
    source: str
    kind: str = "feature"  # "feature" or "monotonicity"
    model: str = "volta"
    in_fmt: str = "fp16"
    out_fmt: str = "fp32"
    instr: str | None = None
    """the instruction where the model has several for these formats (mma, wgmma); None: its first"""
    k: int | None = None
    where: str = ""
    minimize: bool = True
    hypotheses: list[str] = field(default_factory=list)


def list_queries() -> list[QuerySpec]:
    return [load_query(p) for p in sorted(queries_dir().glob("*.toml"))]


HYPOTHESES = 64
"""Hypotheses of one query file (each neighbouring pair is one solver query)."""


def load_query(name_or_file: str | Path) -> QuerySpec:
    """A named query (``queries/NAME.toml``) or a query file, every field checked (types, ranges: ``k`` is
    1..:data:`tcsmt.io.limits.SMT_K`, ``minimize`` true or false); a one-line TcsmtError names the file and
    the field."""
    if not isinstance(name_or_file, (str, Path)) or not str(name_or_file) or "\0" in str(name_or_file):
        raise TcsmtError(f"a query is a name or a .toml file, not {shown(str(name_or_file))}")
    path = Path(name_or_file)
    if not path.suffix:
        path = queries_dir() / f"{name_or_file}.toml"
    if not os.path.lexists(path):
        known = ", ".join(q.stem for q in sorted(queries_dir().glob("*.toml")))
        raise TcsmtError(f"no query {shown(str(name_or_file), 240)} (known: {known}; or give a .toml file)")
    doc = load.toml_document(path, "query file")
    doc.only({f.name for f in dataclasses.fields(QuerySpec)})

    def text(key: str, default: str | None = None, max_len: int = 2000) -> str:
        node = doc.get(key)
        if node is None:
            if default is None:
                raise doc.error(f"lacks the field {key!r}")
            return default
        return node.as_str(max_len)

    k, instr, minimize, hyps = doc.get("k"), doc.get("instr"), doc.get("minimize"), doc.get("hypotheses")
    q = QuerySpec(name=text("name", max_len=1000), title=text("title"), question=text("question"),
                  source=text("source"), kind=text("kind", "feature", 40), model=text("model", "volta", 1000),
                  in_fmt=text("in_fmt", "fp16", 40), out_fmt=text("out_fmt", "fp32", 40),
                  instr=instr.as_str(200) if instr is not None else None,
                  k=k.as_int(1, SMT_K) if k is not None else None, where=text("where", "", 20_000),
                  minimize=minimize.as_bool() if minimize is not None else True,
                  hypotheses=hyps.as_str_list(HYPOTHESES, 0, 1000) if hyps is not None else [])
    if q.kind not in ("feature", "monotonicity"):
        raise doc.error(f"kind: {shown(q.kind, 40)} is not one of feature, monotonicity")
    if q.kind == "feature" and len(q.hypotheses) < 2:
        raise doc.error("hypotheses: a feature query needs at least two hypotheses")
    for key in ("in_fmt", "out_fmt"):  # names the file's field (a model given with --model is checked at run time)
        try:
            get_format(getattr(q, key))
        except TcsmtError as exc:
            raise doc[key].error(str(exc)) from None
    for i, h in enumerate(q.hypotheses):
        if "=" not in h and ":" in h:
            raise doc["hypotheses"].error(f"[{i}]: {shown(h, 60)} is not a parameter override such as carry_bits=2")
    return q


def with_instr(q: QuerySpec, model: str, instr: str | None) -> QuerySpec:
    """The query with the instruction to ask ``model`` about: ``instr`` if given (checked: TcsmtError if the
    model lacks it on the query's path), else the query's own where the model has it on that path, else
    None (the model's first path for the formats)."""
    if instr is not None:
        check_instr(instr, [model], q.in_fmt, q.out_fmt)
        return dataclasses.replace(q, instr=instr)
    if q.instr is not None and q.instr not in instructions(model, q.in_fmt, q.out_fmt):
        return dataclasses.replace(q, instr=None)
    return q


@dataclass
class PairResult:
    left: str
    right: str
    outcome: Outcome


@dataclass
class QueryResult:
    spec: QuerySpec
    model: str
    pairs: list[PairResult] = field(default_factory=list)
    agrees_with: list[str] = field(default_factory=list)
    seconds: float = 0.0
    unanswered: list[tuple[str, str]] = field(default_factory=list)
    """Neighbouring pairs with no solver answer (timeout or unknown, or no time left to ask)."""


def hypothesis_spec(model: str, override: str) -> str:
    sep = "," if ":" in model else ":"
    return f"{model}{sep}{override}"


def run_feature(q: QuerySpec, model: str | None, solver: str, timeout: float,
                progress: Callable[[str], None] | None = None) -> QueryResult:
    """Discriminate neighbouring hypotheses; report which the base model matches.

    ``progress`` (if given) gets one line per pair as it finishes; pairs left without a solver
    answer are listed in ``unanswered``.
    """
    base = model or q.model
    t0 = time.perf_counter()
    specs = [hypothesis_spec(base, h) for h in q.hypotheses]
    res = QueryResult(q, base)
    fin, fout = choose_path([base], q.in_fmt, q.out_fmt)
    base_params = resolve_for(base, fin, fout, q.instr)
    neighbours = list(itertools.pairwise(specs))
    for n, (left, right) in enumerate(neighbours, 1):
        left_t = timeout - (time.perf_counter() - t0)
        if left_t <= 0:
            res.unanswered.extend(neighbours[n - 1:])
            break
        o = discriminate([left, right], fin, fout, q.instr, q.k, 1, q.minimize, q.where or None, solver, left_t)
        res.pairs.append(PairResult(left, right, o))
        if o.status == "timeout":
            res.unanswered.append((left, right))
        if progress is not None:
            progress(f"pair {n}/{len(neighbours)}: {left} vs {right}: {o.status} ({o.seconds:.1f} s)")
    for s in specs:
        p = resolve_for(s, fin, fout, q.instr)
        if p.semantic_key() == base_params.semantic_key():
            res.agrees_with.append(s)
    res.seconds = time.perf_counter() - t0
    return res


# ------------------------------------------------------------ monotonicity
@dataclass
class MonoResult:
    status: Literal["found", "unsat", "unknown", "timeout"]
    model: str
    x: dict | None = None
    y: dict | None = None
    dx: int = 0
    dy: int = 0
    seconds: float = 0.0
    solver: str = ""
    K: int = 0


def run_monotonicity(q: QuerySpec, model: str | None, solver: str, timeout: float) -> MonoResult:
    """Find non-negative inputs x <= y (entrywise) whose results satisfy d(x) > d(y)."""
    base = model or q.model
    fin, fout = choose_path([base], q.in_fmt, q.out_fmt)
    p = resolve_for(base, fin, fout, q.instr)
    K = q.k or p.block_k or p.instr_k or 4
    fo = get_format(p.out_fmt)
    x = inputs_for(p, K, prefix="x_")
    y = inputs_for(p, K, prefix="y_")
    cons = [domain(x), domain(y), parse_where(q.where or "positive", x), parse_where("positive", y)]
    for name in x.names:
        sx, sy = x.symbol_of(name), y.symbol_of(name)
        # non-negative patterns order like their values
        cons.append(BVULE(sx, sy))
    dx, dy = output_term(p, x), output_term(p, y)
    top = fo.storage_bits - 1
    cons.append(Equals(BVExtract(dx, top, top), BV(0, 1)))
    cons.append(BVUGT(dx, dy))
    syms = {f"x.{n}": x.symbol_of(n) for n in x.names}
    syms.update({f"y.{n}": y.symbol_of(n) for n in y.names})
    ans = solve(And(cons), syms, solver, timeout)
    res = MonoResult(ans.status if ans.status != "sat" else "found", base, seconds=ans.seconds, solver=ans.solver, K=K)
    if ans.status == "sat":
        m = ans.model
        res.x = {n: m[f"x.{n}"] for n in x.names}
        res.y = {n: m[f"y.{n}"] for n in y.names}
        for tag in ("x", "y"):
            v = getattr(res, tag)
            out = simulate_case([p], [base], [v[f"a{i}"] for i in range(K)], [v[f"b{i}"] for i in range(K)], v["c"],
                                [v[f"sa{j}"] for j in range(len(x.sa))], [v[f"sb{j}"] for j in range(len(x.sb))])[base]
            setattr(res, "d" + tag, out)
        if not res.dx > res.dy:
            raise InternalError("the monotonicity answer does not replay in the simulator")
    return res
