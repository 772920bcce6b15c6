"""identify's reports: the feature table (FTTN Table IV style), the models/*.toml entry, the result JSON, summary lines."""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import get_format
from tcsmt.arith.params import PARAM_NAMES, ModelParams
from tcsmt.errors import TcsmtError
from tcsmt.identify.result import SCHEMA, Experiment, Result, hex_of, value_of
from tcsmt.identify.space import FACTOR_NAMES, Hypothesis, PathInfo, factor_values

_ALIGN = {"trunc": "truncate (sign-magnitude)", "rne": "RTN-TE", "floor": "floor (two's complement)"}
_ROUND = {"rz": "RZ (truncate)", "rne": "RTN-TE", "ru": "RU", "rd": "RD"}

FEATURES = (
    ("Subnormal inputs handled?", ("subnormal_in", "subnormal_c")),
    ("Subnormal outputs handled?", ("subnormal_out",)),
    ("Extra bits", ("extra_bits",)),
    ("Rounding inside (alignment)", ("align", "extra_bits")),
    ("Rounding of block result", ("block_round", "block_frac_bits")),
    ("FMA unit width (block)", ("block_k",)),
    ("Carry bits", ("carry_bits",)),
    ("Normalisation", ("product_exponent",)),
    ("C handling", ("c_mode", "c_round")),
    ("Output rounding", ("out_round",)),
)


def feature_value(p: ModelParams, feature: str) -> str:
    """One cell of the feature table for parameters ``p`` ("n/a" where the semantics reads none of the
    feature's parameters: :func:`tcsmt.arith.semantics.unread_parameters`)."""
    unread = sem.unread_parameters(p)
    if p.reduction == "pairwise" and feature in ("Extra bits", "Rounding inside (alignment)", "Carry bits",
                                                 "Rounding of block result", "Normalisation"):
        return "pairwise RTN-TE tree" if feature == "Rounding of block result" else "n/a (pairwise)"
    if feature == "Subnormal inputs handled?":
        if p.subnormal_in == p.subnormal_c:
            return "yes" if p.subnormal_in else "no"
        return f"A,B {'yes' if p.subnormal_in else 'no'}; C {'yes' if p.subnormal_c else 'no'}"
    if feature == "Subnormal outputs handled?":
        return "yes" if p.subnormal_out else "no"
    if feature == "Extra bits":
        if p.extra_bits == "exact":
            return "exact (all bits)"
        return f"{p.extra_bits} (F = {p.window_frac_bits})"
    if feature == "Rounding inside (alignment)":
        return "none (exact)" if "align" in unread else _ALIGN[p.align]
    if feature == "Rounding of block result":
        acc = get_format(p.acc_fmt)
        bits = "" if p.block_frac_bits == acc.frac_bits else f" to {p.block_frac_bits} fraction bits"
        return _ROUND[p.block_round] + bits
    if feature == "FMA unit width (block)":
        return f"{p.block_k or p.instr_k} of {p.instr_k}"
    if feature == "Carry bits":
        return "n/a (exact)" if "carry_bits" in unread else str(p.carry_bits)
    if feature == "Normalisation":
        if "product_exponent" in unread:
            return "n/a (exact)"
        return "products not normalised (raw exponent)" if p.product_exponent == "raw" else "products normalised"
    if feature == "C handling":
        if p.reduction == "pairwise":
            return f"added last ({_ROUND[p.c_round]})"
        return "aligned with the products" if p.c_mode == "aligned" else f"added after the block ({_ROUND[p.c_round]})"
    if feature == "Output rounding":
        return f"none ({p.out_fmt} out)" if "out_round" in unread else _ROUND[p.out_round]
    raise KeyError(feature)


def feature_cells(cls: Sequence[Hypothesis]) -> list[tuple[str, str]]:
    """Each feature's value over an equivalence class ("a or b" where equivalent members differ)."""
    out = []
    for feat, _ in FEATURES:
        vals: list[str] = []
        for h in cls:
            v = feature_value(h.params, feat)
            if v not in vals:
                vals.append(v)
        out.append((feat, " or ".join(vals)))
    return out


def feature_table(res: Result) -> list[str]:
    """The identified features as a table in the style of FTTN's Table IV (seed 001)."""
    if not res.classes:
        return []
    cells = feature_cells(res.classes[0])
    head = ["Inputs", "Device"] + [f for f, _ in cells]
    row = [f"{res.path.in_fmt} -> {res.path.out_fmt} ({res.path.instr}, K = {res.path.instr_k})", res.target] + \
        [v for _, v in cells]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), "| " + " | ".join(row) + " |"]
    return lines


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if v is None:
        return '"none"'
    return json.dumps(str(v))


def toml_entry(res: Result) -> str:
    """The best surviving hypothesis as a ``[[paths]]`` entry of a models/*.toml file."""
    h = res.best
    if h is None:
        raise TcsmtError("no hypothesis survived: there is no model to write")
    p = h.params
    keys = ["in_fmt", "out_fmt", "c_fmt", "acc_fmt", "instr", "instr_shape", "instr_k", "block_k", "reduction",
            "product_exponent", "c_mode", "extra_bits", "align", "carry_bits", "overflow", "block_round",
            "block_frac_bits", "c_round", "out_round", "subnormal_in", "subnormal_c", "subnormal_out"]
    defaults = {f.name: f.default for f in dataclasses.fields(ModelParams)}
    for k in PARAM_NAMES:  # parameters added to the family later: written where they differ from the default
        if k not in keys and k not in ("name", "sources", "notes") and getattr(p, k) != defaults.get(k):
            keys.append(k)
    lines = ["[[paths]]"]
    for k in keys:
        v = getattr(p, k)
        if k == "instr_shape" and not v:
            continue
        lines.append(f"{k} = {_toml_value(v)}")
    n = len(res.experiments)
    by = {k: sum(1 for e in res.experiments if e.source == k) for k in ("solver", "random", "validation")}
    how = ", ".join(f"{v} {k}" for k, v in by.items() if v)
    src = (f"tcsmt identify on {res.target}: {n} experiment{'s' if n != 1 else ''} ({how or 'none'}), "
           f"{res.hypotheses_checked} hypotheses (rings 0..{res.space.max_ring()}), status {res.status}, "
           f"best-ranked survivor {h.name}")
    lines.append("sources = [" + json.dumps(src) + (", " + json.dumps(f"log: {res.log_dir}") if res.log_dir else "")
                 + "]")
    return "\n".join(lines) + "\n"


def result_json(res: Result) -> dict[str, Any]:
    """The result as JSON (table, classes, TOML entry)."""
    doc: dict[str, Any] = {
        "schema": SCHEMA + "-result",
        "target": res.target,
        "path": res.path.label,
        "instr": res.path.instr,
        "instr_k": res.path.instr_k,
        "status": res.status,
        "experiments": len(res.experiments),
        "hypotheses_checked": res.hypotheses_checked,
        "survivors": len(res.survivors),
        "validation": res.validation,
        "seconds": round(res.seconds, 2),
        "device": res.info,
        "classes": [[h.name for h in cls] for cls in res.classes],
        "undecided": [list(p) for p in res.undecided],
        "features": dict(feature_cells(res.classes[0])) if res.classes else {},
        "parameters": {k: v for k, v in res.best.params.describe().items() if k in FACTOR_NAMES or k in
                       ("reduction", "acc_fmt", "instr_k", "overflow")} if res.best else {},
        "pinned": pinned(res) if res.classes else {},
        "toml": toml_entry(res) if res.best else "",
    }
    if res.status == "none" and res.experiments:
        fin, fc, fout = get_format(res.path.in_fmt), get_format(res.path.c_fmt), get_format(res.path.out_fmt)
        doc["counterexample"] = res.experiments[-1].as_json(fin, fc, fout)
    return doc


def pinned(res: Result) -> dict[str, list[Any]]:
    """Each free parameter's values among all survivors (one value: the experiments pinned it)."""
    return {n: factor_values(res.survivors, n) for n in FACTOR_NAMES}


def summary_lines(res: Result) -> list[str]:
    """Human-readable outcome lines (status, classes, counterexample)."""
    n = len(res.experiments)
    out = []
    if res.status == "none":
        out.append(f"no hypothesis survives after {n} experiments: the space is too small (rings 0..{res.space.max_ring()}, "
                   f"{res.hypotheses_checked} hypotheses); the last counterexample:")
        if res.experiments:
            e = res.experiments[-1]
            fout = get_format(res.path.out_fmt)
            out.append(f"  input {short_input(res.path, e)}")
            out.append(f"  device {value_of(fout, e.d)} ({hex_of(fout, e.d)}); the last survivors predicted "
                       + ", ".join(f"{k}: {value_of(fout, v)}" for k, v in e.predicted.items()))
        return out
    cls = res.classes[0]
    if res.status == "identified":
        out.append(f"identified after {n} experiments: one equivalence class of {len(cls)} hypothes"
                   f"{'is' if len(cls) == 1 else 'es'} out of {res.hypotheses_checked} (rings 0..{res.space.max_ring()})")
    elif res.status == "undecided":
        out.append(f"after {n} experiments {len(res.survivors)} hypotheses survive; the solver proved {len(cls) - 1} "
                   f"of them equivalent to the best and could not decide {len(res.undecided)} in time")
    else:
        out.append(f"budget reached after {n} experiments: {len(res.survivors)} hypotheses survive, "
                   f"not yet separated")
    out.append(f"  best: {cls[0].name}")
    if res.validation.get("clean"):
        out.append(f"  checked on {res.validation['rows']} random inputs: all agree")
    if len(cls) > 1:
        names = ", ".join(h.name for h in cls[1:6]) + (" ..." if len(cls) > 6 else "")
        out.append(f"  provably equivalent on this path (solver): {names}")
    for _, b in res.undecided[:5]:
        out.append(f"  not separated within the solver time limit: {b}")
    if res.status == "budget":
        others = [h.name for c in res.classes[1:] for h in c][:5]
        if others:
            out.append("  still possible: " + ", ".join(others) + (" ..." if len(res.classes) > 6 else ""))
    return out


def short_input(path: PathInfo, e: Experiment) -> str:
    fin, fc = get_format(path.in_fmt), get_format(path.c_fmt)
    terms = [f"({value_of(fin, a)})*({value_of(fin, b)})" for a, b in zip(e.a, e.b) if (a | b) and value_of(fin, a) != "0"
             and value_of(fin, b) != "0"]
    zeros = sum(1 for a, b in zip(e.a, e.b) if value_of(fin, a) == "0" or value_of(fin, b) == "0")
    body = " + ".join(terms) if terms else "0"
    return f"c={value_of(fc, e.c)}; {body}" + (f" (+{zeros} zero products)" if zeros and len(terms) < 4 else "")
