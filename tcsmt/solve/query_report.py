"""What ``tcsmt query`` prints and writes: the text lines and the JSON document of one query's answer.

Both come from one place so that the file and the screen never disagree.  The JSON of a feature query
holds every answered pair (as ``discriminate`` writes it), the unanswered pairs, and a conclusion only
when every pair was answered (``complete``); that of a monotonicity query holds the two inputs x <= y
with d(x) > d(y), as bit patterns and values, when the solver found them.
"""
from __future__ import annotations

from typing import Any

from tcsmt.arith.formats import get_format
from tcsmt.arith.registry import resolve
from tcsmt.solve.query import MonoResult, QueryResult, QuerySpec
from tcsmt.solve.report import format_outcome, hexpat, outcome_json, val


def monotonicity_report(q: QuerySpec, base: str, r: MonoResult) -> tuple[list[str], dict[str, Any]]:
    """The lines to print and the JSON document of a monotonicity query on model ``base``."""
    p = resolve(base, q.in_fmt, q.out_fmt, q.instr)
    fi, fc, fo = get_format(p.in_fmt), get_format(p.c_fmt), get_format(p.out_fmt)
    data: dict[str, Any] = {"query": q.name, "model": base, "status": r.status, "solver": r.solver,
                            "solve_seconds": round(r.seconds, 3), "in_fmt": fi.name, "c_fmt": fc.name,
                            "out_fmt": fo.name, "K": r.K}
    if r.status != "found":
        what = "monotonic: no such pair exists (unsat)" if r.status == "unsat" else r.status
        return [f"{base}: {what} (K = {r.K}, {r.seconds:.2f} s)"], data
    assert r.x is not None and r.y is not None  # run_monotonicity sets both inputs with status "found"
    lines = [f"{base} is not monotonic (K = {r.K}, {r.solver}, {r.seconds:.2f} s): x <= y entrywise, d(x) > d(y)"]
    for tag, v, d in (("x", r.x, r.dx), ("y", r.y, r.dy)):
        lines.append(f"  {tag}: a = [" + ", ".join(val(fi, v[f'a{i}']) for i in range(r.K)) + "]")
        lines.append("     b = [" + ", ".join(val(fi, v[f'b{i}']) for i in range(r.K)) + f"], c = {val(fc, v['c'])}")
        lines.append(f"     d({tag}) = {val(fo, d)}  ({hexpat(fo, d)})")
        data[tag] = {"a": [hexpat(fi, v[f"a{i}"]) for i in range(r.K)],
                     "b": [hexpat(fi, v[f"b{i}"]) for i in range(r.K)],
                     "c": hexpat(fc, v["c"]), "d": hexpat(fo, d), "d_value": val(fo, d)}
    return lines, data


def feature_report(q: QuerySpec, base: str, res: QueryResult, command: str) -> tuple[list[str], dict[str, Any]]:
    """The lines to print and the JSON document of a feature query on model ``base``."""
    complete = not res.unanswered
    pairs = len(q.hypotheses) - 1
    data: dict[str, Any] = {"query": q.name, "question": q.question, "source": q.source, "model": base,
                            "hypotheses": q.hypotheses, "model_matches": res.agrees_with if complete else None,
                            "complete": complete, "unanswered": [list(p) for p in res.unanswered],
                            "seconds": round(res.seconds, 3), "command": command, "pairs": []}
    lines: list[str] = []
    for pr in res.pairs:
        lines += [format_outcome(pr.outcome, explain=True), ""]
        data["pairs"].append(outcome_json(pr.outcome, command))
    if not complete:
        lines.append(f"no conclusion: {pairs - len(res.unanswered)} of {pairs} pairs answered; no answer for "
                     + "; ".join(f"{a} vs {b}" for a, b in res.unanswered))
    elif res.agrees_with:
        lines.append(f"{base} is the hypothesis: {', '.join(res.agrees_with)}")
    else:
        lines.append(f"{base} matches none of the listed hypotheses exactly")
    return lines, data
