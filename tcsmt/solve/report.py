"""Printing discriminating inputs as the papers write them, explaining them, and their JSON record
(written to generated/ through :mod:`tcsmt.io.files`)."""
from __future__ import annotations

import datetime as _dt
from fractions import Fraction

import numpy as np

from tcsmt.arith.formats import Format
from tcsmt.arith.values import format_value
from tcsmt.errors import InternalError
from tcsmt.solve.discriminate import Case, Outcome

SCHEMA = "tcsmt.discriminate/1"


def hexpat(fmt: Format, bits: int) -> str:
    return f"0x{bits:0{fmt.hex_digits}x}"


def val(fmt: Format, bits: int) -> str:
    return format_value(fmt.to_fraction(bits))


def _finite(fmt: Format, bits: int) -> Fraction:
    """Exact value of a finite pattern (discriminating inputs are: the solver's domain is finite patterns)."""
    v = fmt.to_fraction(bits)
    if not isinstance(v, Fraction):
        raise InternalError(f"input {hexpat(fmt, bits)} is not finite")
    return v


def exact_value(o: Outcome, case: Case) -> Fraction:
    """sum_k a_k b_k (times the scales of k's block on a block-scaled path) + c, exactly."""
    fin, fb, fc = o.in_fmt, o.b_format, o.c_fmt
    s = Fraction(0)
    for k, (x, y) in enumerate(zip(case.a, case.b)):
        term = _finite(fin, x) * _finite(fb, y)
        if o.scale_fmt is not None:
            j = k // o.scale_block
            term *= _finite(o.scale_fmt, case.sa[j]) * _finite(o.scale_fmt, case.sb[j])
        s += term
    return s + _finite(fc, case.c)


def _top_exponent(v: Fraction) -> int:
    n, d = abs(v.numerator), v.denominator
    e = n.bit_length() - d.bit_length()
    if Fraction(2) ** e > abs(v):
        e -= 1
    return e


def _lowest_bit(v: Fraction) -> int:
    n, d = abs(v.numerator), v.denominator
    e = -(d.bit_length() - 1)
    while n % 2 == 0:
        n //= 2
        e += 1
    return e


def first_block_cut(p, a: list[int], b: list[int], c: int) -> int | None:
    """The semantics' cut of the first block (E - F) on one input, or None (no window)."""
    from tcsmt.arith import semantics as sem
    from tcsmt.arith.formats import get_format
    from tcsmt.backends.numpy import NumpyBackend

    fin, fc = get_format(p.in_fmt), get_format(p.c_fmt)
    fb = get_format(p.b_fmt) if p.b_fmt else fin
    cut = sem.first_block_cut(NumpyBackend(), p, [np.array([x], dtype=fin.dtype) for x in a],
                              [np.array([y], dtype=fb.dtype) for y in b], np.array([c], dtype=fc.dtype))
    return None if cut is None else int(np.asarray(cut).reshape(-1)[0])


def bit_diagram(o: Outcome, case: Case, width: int = 56) -> list[str]:
    """The addends of the first block as binary digits, with each model's alignment cut.

    Columns are powers of two from the largest addend's leading bit down; a
    model keeps the digits left of its bar ``|`` (2^(E-F), F its window's
    fraction bits and E its largest alignment exponent, as :func:`tcsmt.arith.semantics.first_block_cut`
    computes them for this input) and drops the rest.
    """
    fin, fc = o.in_fmt, o.c_fmt
    if o.scale_fmt is not None:
        return []  # (the diagram reads unscaled products)
    terms = [("c", _finite(fc, case.c))]
    for i, (x, y) in enumerate(zip(case.a, case.b)):
        terms.append((f"a{i}*b{i}", _finite(fin, x) * _finite(o.b_fmt or fin, y)))
    terms = [(name, v) for name, v in terms if v != 0]
    if not terms:
        return []
    hi = max(_top_exponent(v) for _, v in terms) + 1
    lo = min(_lowest_bit(v) for _, v in terms)
    cuts = {}
    for spec, p in zip(o.specs, o.params):
        cut = first_block_cut(p, case.a, case.b, case.c)
        if cut is not None:
            cuts[spec] = cut
    lo = min([lo] + [c - 1 for c in cuts.values()])
    lo = max(lo, hi - width)
    cols = list(range(hi, lo - 1, -1))
    nw = min(28, max([9] + [len(n) for n, _ in terms] + [len(s) for s in cuts]))
    lines = [f"  {'':{nw + 1}} {'2^' + str(hi):<{len(cols)}}  (columns 2^{hi} .. 2^{lo})"]
    for name, v in terms:
        scaled = abs(v) / Fraction(2) ** lo
        digits = "".join("1" if (int(scaled) >> (e - lo)) & 1 else "0" for e in cols)
        rest = "" if scaled.denominator == 1 else " ..."
        lines.append(f"  {name:>{nw}} {'-' if v < 0 else '+'}{digits}{rest}   {format_value(v)}")
    for spec, cut in cuts.items():
        if cut < lo or cut > hi:
            continue
        pos = cols.index(cut)
        lines.append(f"  {spec[-nw:]:>{nw}}  {' ' * pos}^ keeps down to 2^{cut} (digits right of ^ are dropped)")
    return lines


def format_outcome(o: Outcome, explain: bool = True) -> str:
    lines = []
    names = " vs ".join(o.specs)
    mixed = f" x {o.b_fmt.name}" if o.b_fmt else ""
    head = f"{names}  ({o.in_fmt.name}{mixed} -> {o.out_fmt.name}, C in {o.c_fmt.name})"
    if o.status == "equivalent":
        ks = ", ".join(map(str, o.tried_k))
        lines.append(f"{head}: no input tells them apart (unsat for K = {ks}; {o.solver}, {o.seconds:.2f} s)")
        if o.where:
            lines.append(f"  under the constraints: {o.where}")
        return "\n".join(lines)
    if o.status == "timeout":
        lines.append(f"{head}: no answer within the time limit ({o.seconds:.1f} s; K tried: {o.tried_k})")
        return "\n".join(lines)
    lines.append(f"{head}: {len(o.cases)} discriminating input(s), K = {o.K}, found by {o.solver} in {o.seconds:.2f} s")
    for n, case in enumerate(o.cases, 1):
        lines.append(f"\ninput {n}:")
        lines.append("  a = [" + ", ".join(val(o.in_fmt, x) for x in case.a) + "]")
        lines.append("  b = [" + ", ".join(val(o.b_format, x) for x in case.b) + "]")
        lines.append(f"  c = {val(o.c_fmt, case.c)}")
        if o.scale_fmt is not None:
            fs = o.scale_fmt
            lines.append(f"  scales ({fs.name}, one per {o.scale_block} products): sa = ["
                         + ", ".join(val(fs, x) for x in case.sa) + "], sb = [" + ", ".join(val(fs, x) for x in case.sb) + "]")
        lines.append("  hex a = [" + ", ".join(hexpat(o.in_fmt, x) for x in case.a) + "]")
        lines.append("  hex b = [" + ", ".join(hexpat(o.b_format, x) for x in case.b) + f"], c = {hexpat(o.c_fmt, case.c)}")
        if o.scale_fmt is not None:
            lines.append("  hex sa = [" + ", ".join(hexpat(o.scale_fmt, x) for x in case.sa) + "], sb = ["
                         + ", ".join(hexpat(o.scale_fmt, x) for x in case.sb) + "]")
        exact = exact_value(o, case)
        lines.append(f"  exact a.b + c = {format_value(exact)}" if o.scale_fmt is None else
                     f"  exact sum_k a_k b_k sa_(k/{o.scale_block}) sb_(k/{o.scale_block}) + c = {format_value(exact)}")
        for spec, bits in case.outputs.items():
            v = o.out_fmt.to_fraction(bits)
            err = f"   error {format_value(v - exact)}" if isinstance(v, Fraction) else ""
            lines.append(f"  {spec:>14} -> {hexpat(o.out_fmt, bits)}  {format_value(v)}{err}")
        if explain:
            diag = bit_diagram(o, case)
            if diag:
                lines.append("  where they part (addends of the first block, binary, largest first):")
                lines.extend(diag)
    return "\n".join(lines)


def default_name(specs: list[str], in_fmt: str, out_fmt: str) -> str:
    """``M1-vs-M2-IN-OUT.json``: the file name of a discrimination (known before the solver runs)."""
    from tcsmt.io.files import safe_name

    return (f"{safe_name(specs[0], 'model')}-vs-{safe_name(specs[1], 'model')}-{safe_name(in_fmt)}-"
            f"{safe_name(out_fmt)}.json")


def _scale_record(o: Outcome, c: Case) -> dict:
    """The scale factors of one input (block-scaled paths) for its JSON record."""
    if o.scale_fmt is None:
        return {}
    fs = o.scale_fmt
    return {"sa": [hexpat(fs, x) for x in c.sa], "sb": [hexpat(fs, x) for x in c.sb],
            "sa_values": [val(fs, x) for x in c.sa], "sb_values": [val(fs, x) for x in c.sb]}


def outcome_json(o: Outcome, command: str) -> dict:
    from tcsmt.version import __version__

    extra: dict[str, str | int] = {}
    if o.scale_fmt is not None:
        extra.update(scale_fmt=o.scale_fmt.name, scale_block=o.scale_block)
    return {
        "schema": SCHEMA,
        "tcsmt_version": __version__,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": command,
        "solver": o.solver,
        "solve_seconds": round(o.seconds, 3),
        "status": o.status,
        "in_fmt": o.in_fmt.name,
        **({"b_fmt": o.b_fmt.name} if o.b_fmt else {}),
        "c_fmt": o.c_fmt.name,
        "out_fmt": o.out_fmt.name,
        **extra,
        "instr": sorted({p.instr for p in o.params}),
        "K": o.K,
        "where": o.where,
        "models": o.specs,
        "model_params": {s: p.describe() for s, p in zip(o.specs, o.params)},
        "inputs": [
            {
                "a": [hexpat(o.in_fmt, x) for x in c.a],
                "b": [hexpat(o.b_format, x) for x in c.b],
                "c": hexpat(o.c_fmt, c.c),
                "a_values": [val(o.in_fmt, x) for x in c.a],
                "b_values": [val(o.b_format, x) for x in c.b],
                **_scale_record(o, c),
                "c_value": val(o.c_fmt, c.c),
                "exact": format_value(exact_value(o, c)),
                "outputs": {s: hexpat(o.out_fmt, v) for s, v in c.outputs.items()},
                "output_values": {s: val(o.out_fmt, v) for s, v in c.outputs.items()},
            }
            for c in o.cases
        ],
    }
