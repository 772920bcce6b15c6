"""The README's table of built-in models, made from the model files (``tcsmt models --table``).

One row per instruction or library path of every architecture, in the registry's order; the paths of the
narrow-format instruction kinds (``tcgen05.mma.kind::...``, ``mma.sync.kind::...``: fp4/fp6/fp8 pairs and
block scaling) are summarised in their own README section instead.  Every cell is read off the path's
parameters (a parameter the semantics never reads for the path is shown as ``-``), so the README's table and
the model files cannot disagree (``tests/test_readme_models.py``).
"""
from __future__ import annotations

from tcsmt.arith.formats import get_format
from tcsmt.arith.params import ModelParams
from tcsmt.arith.registry import ModelPath, architectures
from tcsmt.arith.semantics import unread_parameters

HEADER = ("| arch | path | instruction | block | extra bits | align | carry | block rounding | other | hypotheses |\n"
          "|---|---|---|---|---|---|---|---|---|---|")


def in_table(path: ModelPath) -> bool:
    """The table holds every path but the narrow-format kinds (their instruction names a ``kind::``)."""
    return "kind::" not in path.params.instr


def _other(p: ModelParams, library: bool, unread: set[str]) -> list[str]:
    """The path's remaining features, each a short phrase, in a fixed order."""
    acc = get_format(p.acc_fmt)
    out: list[str] = []
    if p.block_k == 1 and p.extra_bits == "exact" and p.block_round == "rne":
        out.append("IEEE FMA chain in k order")
    if p.b_fmt:
        out.append(f"B {p.b_fmt}")
    if p.block_frac_bits != acc.frac_bits:
        out.append(f"{p.block_frac_bits} frac bits")
    if p.align_floor is not None and "align_floor" not in unread:
        out.append(f"E >= {p.align_floor}")
    if p.operand_fmt:
        out.append(f"operands -> {p.operand_fmt}")
    if p.block_interleave and "block_interleave" not in unread:
        out.append(f"interleave {p.block_interleave}")
    if p.c_mode == "after_instr":
        out.append(f"promotion by {p.acc_fmt} add ({p.c_round})" if library else f"C after_instr ({p.c_round})")
    elif p.c_mode == "after":
        out.append(f"C after the block ({p.c_round})")
    elif p.c_mode == "after_sum":
        out.append(f"C after the product sum (S {p.sum_frac_bits} / C F bits, {p.late_align})")
    if p.product_groups > 1:
        out.append(f"{p.product_groups} interleaved windows")
    if p.c_drop is not None:
        out.append(f"C dropped below M-{p.c_drop}")
    if p.acc_fmt != p.out_fmt:
        out.append(f"{p.acc_fmt} sum, one {p.out_round.upper()} to {p.out_fmt} at the end")
    elif p.acc_fmt != "fp32":
        out.append(f"acc {p.acc_fmt}")
    if not p.subnormal_in and not p.subnormal_out:
        out.append("no subnormals")
    elif not p.subnormal_in or not p.subnormal_out:
        out.append("subnormal inputs flushed" if not p.subnormal_in else "subnormal results flushed")
    if not p.subnormal_c:
        out.append("subnormal C flushed")
    if p.overflow_result == "inf":
        out.append("overflow->inf")
    out += {"plus": ["zeros->+0"], "positive": ["underflow->+0"], "exact_plus": ["exact zero sums +0"]}.get(p.zero_sign, [])
    if p.zero_exponent is not None and "zero_exponent" not in unread:
        out.append(f"zeros at 2^{p.zero_exponent}")
    if p.product_inf is not None:
        out.append(f"a product >= 2^{p.product_inf} gives inf")
    if library:
        out.append("C = +0 (library call)")
    return out


def row(arch: str, path: ModelPath) -> str:
    """One markdown row of the table."""
    p = path.params
    unread = set(unread_parameters(p))
    lib = path.library

    def cell(name: str, text: str) -> str:
        return "-" if name in unread else text

    instr = f"{p.instr} ({p.instr_shape})" if lib else f"{p.instr} {p.instr_shape}"
    block = str(p.block_k)
    if lib:
        block += f", promoted every {p.instr_k}" if p.c_mode == "after_instr" else ", chained over K"
    F = p.window_frac_bits
    extra = "exact" if F is None else f"{int(p.extra_bits):+d} (F={F})"
    carry = str(p.carry_bits) + (", saturating" if p.overflow == "saturate" and "overflow" not in unread else "")
    cells = [arch, f"{p.in_fmt}->{p.out_fmt}", instr, block, extra, cell("align", p.align), cell("carry_bits", carry),
             cell("block_round", p.block_round), ", ".join(_other(p, lib, unread)),
             ", ".join(path.hypotheses) or "-"]
    return "| " + " | ".join(cells) + " |"


def rows(arch: str | None = None) -> list[str]:
    """Every row of the table (or ``arch``'s), in the registry's order (architectures, then each one's paths)."""
    return [row(a.name, path) for a in architectures().values() if arch in (None, a.name)
            for path in a.every_path() if in_table(path)]


NARROW_HEADER = ("| arch | instruction | A x B -> D | scales | arithmetic | hypotheses |\n"
                 "|---|---|---|---|---|---|")


FORMAT_NAMES = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
"""The element types of the narrow-format kinds (PTX ISA order)."""


def _family(instr: str) -> str:
    """A narrow-format instruction without its A and B types (``...kind::f8f6f4.e4m3.e5m2`` -> ``...kind::f8f6f4``)."""
    parts = instr.split(".")
    while len(parts) > 1 and parts[-1] in FORMAT_NAMES:
        parts.pop()
    return ".".join(parts)


def _operands(paths: list[ModelPath]) -> str:
    """``A x B -> D`` for every output format: the types each operand takes, or the pairs where not every pair."""
    parts = []
    for out in dict.fromkeys(m.params.out_fmt for m in paths):
        pairs = [(m.params.in_fmt, m.params.b_format) for m in paths if m.params.out_fmt == out]
        a_types = sorted({a for a, _ in pairs}, key=FORMAT_NAMES.index)
        b_types = sorted({b for _, b in pairs}, key=FORMAT_NAMES.index)
        if len(set(pairs)) == len(a_types) * len(b_types):
            parts.append(f"{'/'.join(a_types)} x {'/'.join(b_types)} -> {out}")
        else:
            parts.append(", ".join(f"{a} x {b}" for a, b in pairs) + f" -> {out}")
    return "; ".join(parts)


def _arithmetic(p: ModelParams) -> str:
    """One narrow-format path's block: what is summed, the window, the rounding, zero groups and scales."""
    fs = get_format(p.scale_fmt) if p.scale_fmt else None
    what = f"one block of {p.block_k}" + (" with C" if p.c_mode == "aligned" else "")
    if fs is not None and p.scale_apply == "groups":
        what += f": exact groups of {p.scale_group_k}, each times its two scales"
        if p.scale_group_bits != "exact":
            what += f" ({p.scale_group_bits} leading bits)"
    elif fs is not None:
        what += ": each product times its two scales"
    F = p.window_frac_bits
    out = [what, "exact" if F is None else f"F = {F}", p.block_round.upper() + (f" to {p.acc_fmt}" if p.acc_fmt != "fp32" else "")]
    if fs is not None and p.scale_apply == "groups":
        out.append({"aligns": "a zero group joins E", "aligns_emin": "a zero group joins E",
                    "skipped": "a zero group is left out of E"}[p.scale_zero_group])
        if fs.has_subnormals:  # a scale format with a zero
            out.append("a zero scale joins E at its emin" if p.scale_zero_group == "aligns_emin" and p.zero_exponent is None
                       else "a zero scale's group is left out of E" if p.zero_exponent is None
                       else f"a zero scale at 2^{p.zero_exponent}")
    return ", ".join(out)


def narrow_rows(arch: str | None = None) -> list[str]:
    """The narrow-format kinds, one row per architecture and instruction kind (types left out of its name)."""
    out = []
    for a in architectures().values():
        if arch not in (None, a.name):
            continue
        families: dict[str, list[ModelPath]] = {}
        for path in a.every_path():
            if not in_table(path):
                families.setdefault(_family(path.params.instr), []).append(path)
        for fam, paths in families.items():
            p0 = paths[0].params
            scales = f"{p0.scale_fmt} per {p0.scale_block}" if p0.scale_fmt else "-"
            arith: dict[str, str] = {}
            for m in paths:
                arith.setdefault(m.params.out_fmt, _arithmetic(m.params))
            if len(set(arith.values())) == 1:
                arithmetic = next(iter(arith.values()))
            else:
                arithmetic = "; ".join(f"{o}: {t}" for o, t in arith.items())
            hyps = list(dict.fromkeys(h for m in paths for h in m.hypotheses))
            suffix = ".A.B" if any(m.params.instr != fam for m in paths) else ""
            cells = [a.name, f"`{fam}{suffix}` {p0.instr_shape}", _operands(paths), scales, arithmetic,
                     ", ".join(hyps) or "-"]
            out.append("| " + " | ".join(cells) + " |")
    return out


def table(arch: str | None = None) -> str:
    """Both tables: the built-in models (README, "Built-in models"), then the narrow-format kinds (README,
    "Narrow formats, mixed operands and block scaling")."""
    return "\n".join([HEADER, *rows(arch), "", NARROW_HEADER, *narrow_rows(arch)])
