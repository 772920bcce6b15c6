"""The parameters of the block-FMA model family (one matrix-unit path = one ModelParams).

Every per-GPU number lives in ``models/*.toml``; this module only defines what
the parameters mean, checks their values and applies overrides such as
``carry_bits=2``.  The arithmetic they select is defined in
:mod:`tcsmt.arith.semantics`.

The module is over 400 lines because the :class:`ModelParams` docstring (about 240 lines) is the parameter
reference: every field's meaning, unit, choices and published source next to its declaration; the override,
coercion and validation code after it reads the same per-field roles, so it stays beside them.
"""
from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field
from typing import Any

from tcsmt.arith.formats import get_format
from tcsmt.errors import TcsmtError
from tcsmt.io.limits import parse_int, shown

ROUNDINGS = ("rz", "rne", "ru", "rd")
ALIGN_LOSS = ("trunc", "rne", "floor")
OVERFLOW = ("wrap", "saturate")


ROLES = ("path", "path_int", "format", "int", "int_or_word", "int_or_none", "bool", "choice", "label")
"""What a ModelParams field holds, declared once per field (its ``metadata["role"]``); checks, coercion
and the derived name lists below all read it:

- ``path``: names the path (a format name, ``instr``, ``instr_shape``): chosen with --in/--out/--instr,
  never overridden;
- ``path_int``: an integer that names the path with the others (``scale_block``: the instruction's
  ``.block16``/``.block32`` variant): checked as an integer, never overridden;
- ``format``: a format name (the accumulator's, the operands' conversion format);
- ``int``: an integer; ``int_or_word``: an integer or one word (``exact``, ``unbounded``);
  ``int_or_none``: an integer or None;
- ``bool``: true or false; ``choice``: one of the field's ``choices``;
- ``label``: the name, sources and notes: no arithmetic, never overridden.

"Absent" has one spelling per kind: ``""`` for a string (operand_fmt: no conversion; c_fmt: out_fmt's;
instr_shape: unknown), ``None`` for align_floor; the integers 0 of instr_k, block_k and block_frac_bits
and the words ``exact``/``unbounded`` are values with a stated meaning, not absences.
"""


def _param(default: Any, role: str, *, choices: tuple[str, ...] = (), word: str = "", compare: bool = True) -> Any:
    """A ModelParams field with its role (see ROLES)."""
    assert role in ROLES
    meta = {"role": role, "choices": choices, "word": word}
    if default is dataclasses.MISSING:  # a required field (in_fmt, out_fmt)
        return field(compare=compare, metadata=meta)
    return field(default=default, compare=compare, metadata=meta)


@dataclass(frozen=True)
class ModelParams:
    """One path of one matrix unit: D = A.B + C for vectors of length K.

    Formats
      in_fmt   format of A and B entries.
      operand_fmt  if set, A and B are first converted exactly to this format
               and the products use its exponents (fp8 -> fp16 in the fp8
               mma.sync emulation of sm_90/sm_100); every in_fmt value must be
               representable in it.
      b_fmt    format of B where it differs from A's (mixed e4m3 x e5m2 and fp8 x
               bf8 paths; "" = in_fmt, the format of A).
      c_fmt    format of C (and of D between instructions): fp32, fp16 or fp64.
      out_fmt  format of D.
      acc_fmt  format of the accumulator between blocks inside one instruction.

      in_fmt, out_fmt, c_fmt, instr and instr_shape name the path: an
      override (``volta:in_fmt=bf16``) is refused; the path is chosen with
      the formats and instruction asked for (--in/--out/--instr).

    Grouping
      instr_k  products consumed by one instruction (the k of mma.mMnNkK),
               0..MAX_K (0: no instruction boundary, K is one instruction);
               between instructions the accumulator is held in ``out_fmt``.
      block_k  products summed by one block FMA, 0..MAX_K (<= instr_k and
               dividing it; 0 = all K at once).
               Blocks chain through the rounded accumulator: the block result
               is C of the next block.
      block_interleave  0: block j of an instruction holds the products
               k = j*block_k .. (j+1)*block_k - 1 (contiguous); n > 0: runs
               of n consecutive products are dealt to the instruction's
               blocks in turn (block j holds k with (k // n) % blocks == j),
               as Hopper's fp8 mma.sync emulation does with n = 2;
               0..block_k.
      reduction "chain" (block FMAs in k order, C first) or "pairwise" (each
               product rounded to acc_fmt with RNE, then a balanced tree of
               RNE additions, then + C rounded with ``c_round``).

    Inside one block
      product_exponent "raw": a product's alignment exponent is e(a)+e(b)
               (field exponents, emin for subnormals), its significand may be
               >= 2; "normalized": the exponent of its leading bit.
      c_mode   "aligned": C joins the common alignment with the products;
               "after": the products form a block on their own, rounded as
               below, and C is added to that result with one correctly rounded
               addition (``c_round``) in acc_fmt;
               "after_instr": each instruction's blocks chain from +0 (the
               first block's C is +0) and the instruction's C is added to
               their result at the end with one correctly rounded addition
               (``c_round``) in acc_fmt;
               "after_sum": the products form a window sum on their own (in
               ``product_groups`` interleaved subsets, below), not rounded;
               that exact sum S (exponent E_S, the window's E) and C are then
               aligned again to M = max(E_S, e(C)): S keeps ``sum_frac_bits``
               fraction bits below M, C keeps F, both losing their low bits
               by ``late_align``; C counts as 0 where e(C) < M - ``c_drop``;
               the exact sum is rounded once into acc_fmt with block_round
               (AMD CDNA3 per MMA-Sim).
      product_groups  with c_mode "after_sum": the block's products are dealt
               to this many subsets (product k to subset k mod n), each
               aligned to its own largest exponent with F fraction bits and
               summed; the subset sums are aligned to the largest subset
               exponent with F fraction bits by ``late_align`` and added
               (CDNA3 fp8: 2, its even and odd products); 1..block_k.
      sum_frac_bits  with c_mode "after_sum": fraction bits the product sum
               keeps below M (>= F; CDNA3: 31).
      late_align  with c_mode "after_sum": how the realigned subset sums, S
               and C lose their low bits: trunc, rne or floor.
      c_drop   with c_mode "after_sum": C is dropped where its exponent is
               below M - c_drop (None: never; CDNA3 fp8: 25).
      extra_bits  alignment bits kept below the acc_fmt LSB of the largest
               term: the window's LSB is 2^(E - F), F = acc.frac_bits +
               extra_bits (may be negative: fp8 on Ada/Hopper keeps F = 13),
               -acc.frac_bits..256 (so F >= 0); "exact" keeps every bit (a
               Kulisch accumulator).
      align    how an aligned term loses the bits below the window: "trunc"
               (magnitude truncated, sign kept: sign-magnitude), "rne"
               (magnitude rounded to nearest even at the window LSB), "floor"
               (two's-complement truncation: towards minus infinity).
      align_floor  E is never below this exponent (None: no floor); it must
               lie in the exponent range of the terms (:func:`floor_range`:
               from the least subnormal exponent of the products, C and the
               accumulator up to their largest exponent), since a floor
               outside it is either inert or discards every normal sum.
      carry_bits  bits above the largest term's leading bit (2^E) that the
               adder holds: |sum| < 2^(E+1+carry_bits), 0..64; "unbounded".
      overflow "wrap": |sum| is reduced modulo 2^(F+1+carry_bits) (the carry
               out is lost, as seed 000 describes); "saturate": clipped.
      block_round  rounding of the normalised block sum: rz, rne, ru, rd.
      block_frac_bits  fraction bits the block result keeps (23 for fp32;
               13 for the e8m13 fp8 accumulator), 1..acc.frac_bits (0 in the
               model file: acc.frac_bits).
      c_round  rounding of the C addition when c_mode is "after" or
               "after_instr" (the instruction's C), and of the final + C of
               pairwise reduction; unread otherwise.
      out_round  rounding from acc_fmt to out_fmt (fp16 output: rne).

    Special values
      subnormal_in / subnormal_c / subnormal_out: False flushes subnormal
      A/B inputs, C inputs, or results to signed zero.
      NaN/Inf follow IEEE 754 (NaN in -> NaN; inf*0 and inf-inf -> NaN;
      otherwise inf), with the canonical NaN 0x7fffffff; no published evidence
      says otherwise.
      overflow_result "ieee": a rounding that overflows gives inf or the
               largest finite number as IEEE 754 prescribes for its direction
               (rz: largest finite); "inf": always inf of the sum's sign.
      zero_sign "ieee": an exact cancellation gives +0 (-0 with rd), a sum of
               zeros that are all -0 gives -0, and a non-zero sum that rounds
               to zero keeps its sign; "positive": as "ieee" except that a
               non-zero sum that rounds to zero gives +0; "plus": every zero
               result of a rounded sum is +0 (all-(-0) sums and rd
               cancellations included), as MMA-Sim's fused dot-add returns;
               "exact_plus": a sum that is exactly zero gives +0 (all-(-0)
               sums and rd cancellations included), a non-zero sum that
               rounds to zero keeps its sign (MMA-Sim's CDNA3 group: the
               aligned terms are added as numbers from +0, then the exact
               result is rounded to fp32).
      zero_exponent  None: zero addends take no part in the alignment (E is
               the largest alignment exponent of the non-zero addends); an
               integer z: a zero factor or a zero C has exponent z, so a zero
               product's alignment exponent is z + e(other factor) (z + z for
               two zeros) and a zero C's is z, and both join the maximum E
               (MMA-Sim gives every zero the exponent -126, whatever its
               format).  Only the windowed block sum reads it.
      product_inf  None: products are exact whatever their size; an integer
               T: where no input of the block is NaN or infinite, a product
               of magnitude >= 2^T makes the block's result an infinity of
               the product's sign, and products >= 2^T of both signs make it
               NaN (MMA-Sim's CDNA3 group, T = 128: a product that would
               overflow fp32).  Not read on block-scaled paths.

    Block scaling (tcgen05 / sm_120 mxf8f6f4, mxf4nvf4)
      scale_fmt  "" (no block scaling), "ue8m0" or "ue4m3": the format of the
               scale factors; every ``scale_block`` consecutive products of a
               row of A (column of B) share one factor of A (of B), given as
               extra inputs (shape (n, K / scale_block) each).
      scale_block  products per scale factor (32 for mxf8f6f4 and
               scale_vec::2X, 16 for scale_vec::4X); divides instr_k.  With
               scale_fmt it names the path (never overridden).
      scale_apply  where the two block scales enter:
               "products": each exact product is multiplied exactly by its
               block's two scales before the alignment (its alignment
               exponent e(a)+e(b)+e(sa)+e(sb) with product_exponent "raw");
               "groups": the products of each group of ``scale_group_k``
               (one scale block or part of one) are first summed exactly, and
               that group sum, multiplied exactly by the two scales, is one
               addend of the block; with product_exponent "raw" its alignment
               exponent is e(sa)+e(sb), the scales' exponents only, whatever
               the size of the group sum ("normalized": the exponent of its
               leading bit).  The block then aligns these addends (and C) to
               the largest exponent with F = 23 + extra_bits fraction bits,
               as for products.
      scale_group_k  products per group sum with scale_apply "groups"
               (16 in MMA-Sim's mxf4nvf4); divides scale_block.
      scale_group_bits  significant bits the group sum keeps before it is
               scaled: "exact" (every bit: MMA-Sim), or n (1..64): the
               exact sum truncated toward zero to its n leading bits.
      scale_zero_group  with "groups": "aligns" (a group whose exact sum is 0
               still puts its scale exponent into the alignment maximum E;
               a group with a zero scale, ue4m3 0x00, is a zero operand and
               joins only under zero_exponent, at z + e(other scale)),
               "aligns_emin" (every group joins, a zero scale with the
               exponent of its field, the scale format's emin: -6 for ue4m3)
               or "skipped" (zero addends take no part in E, as everywhere
               else).
    """

    in_fmt: str = _param(dataclasses.MISSING, "path")
    out_fmt: str = _param(dataclasses.MISSING, "path")
    operand_fmt: str = _param("", "format")
    b_fmt: str = _param("", "path")
    c_fmt: str = _param("", "path")
    acc_fmt: str = _param("fp32", "format")
    instr: str = _param("mma", "path")
    instr_shape: str = _param("", "path")
    instr_k: int = _param(0, "int")
    block_k: int = _param(0, "int")
    block_interleave: int = _param(0, "int")
    reduction: str = _param("chain", "choice", choices=("chain", "pairwise"))
    product_exponent: str = _param("raw", "choice", choices=("raw", "normalized"))
    c_mode: str = _param("aligned", "choice", choices=("aligned", "after", "after_instr", "after_sum"))
    extra_bits: int | str = _param(0, "int_or_word", word="exact")
    align: str = _param("trunc", "choice", choices=ALIGN_LOSS)
    align_floor: int | None = _param(None, "int_or_none")
    carry_bits: int | str = _param("unbounded", "int_or_word", word="unbounded")
    overflow: str = _param("wrap", "choice", choices=OVERFLOW)
    block_round: str = _param("rz", "choice", choices=ROUNDINGS)
    block_frac_bits: int = _param(0, "int")
    c_round: str = _param("rne", "choice", choices=ROUNDINGS)
    out_round: str = _param("rne", "choice", choices=ROUNDINGS)
    subnormal_in: bool = _param(True, "bool")
    subnormal_c: bool = _param(True, "bool")
    subnormal_out: bool = _param(True, "bool")
    overflow_result: str = _param("ieee", "choice", choices=("ieee", "inf"))
    zero_sign: str = _param("ieee", "choice", choices=("ieee", "positive", "plus", "exact_plus"))
    zero_exponent: int | None = _param(None, "int_or_none")
    product_inf: int | None = _param(None, "int_or_none")
    product_groups: int = _param(1, "int")
    sum_frac_bits: int = _param(0, "int")
    late_align: str = _param("floor", "choice", choices=ALIGN_LOSS)
    c_drop: int | None = _param(None, "int_or_none")
    scale_fmt: str = _param("", "path")
    scale_block: int = _param(0, "path_int")
    scale_apply: str = _param("products", "choice", choices=("products", "groups"))
    scale_group_k: int = _param(0, "int")
    scale_group_bits: int | str = _param("exact", "int_or_word", word="exact")
    scale_zero_group: str = _param("skipped", "choice", choices=("aligns", "aligns_emin", "skipped"))
    name: str = _param("", "label")
    sources: tuple[str, ...] = _param((), "label", compare=False)
    notes: str = _param("", "label", compare=False)

    # ------------------------------------------------------------ derived
    @property
    def path_id(self) -> str:
        return f"{self.in_fmt}.{self.out_fmt}"

    @property
    def b_format(self) -> str:
        """B's format: ``b_fmt`` where set, else ``in_fmt``."""
        return self.b_fmt or self.in_fmt

    @property
    def window_frac_bits(self) -> int | None:
        """F: fraction bits of the alignment window below 2^E (None = exact)."""
        if self.extra_bits == "exact":
            return None
        return get_format(self.acc_fmt).frac_bits + int(self.extra_bits)

    def semantic_key(self) -> tuple:
        """The fields that determine the arithmetic (for equality of models)."""
        skip = {*LABEL_FIELDS, "instr", "instr_shape"}  # the instruction's name is not its arithmetic
        return tuple((f.name, getattr(self, f.name)) for f in dataclasses.fields(self) if f.name not in skip)

    def with_overrides(self, overrides: dict[str, Any]) -> ModelParams:
        """These parameters with ``overrides`` applied (TcsmtError for a path field or a bad value)."""
        for k in overrides:
            if k in PATH_FIELDS:
                raise TcsmtError(f"{k} names the path, not a model parameter: choose the path with --in, --out "
                                 f"and --instr (in Python: the in_fmt, out_fmt and instr arguments), "
                                 f"not with {k}=...")
        changes = {k: coerce(k, v) for k, v in overrides.items()}
        return validate(dataclasses.replace(self, **changes))

    def describe(self) -> dict[str, Any]:
        skip = {"sources", "notes"}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip}


def _role(name: str) -> str:
    return _FIELDS[name].metadata["role"]


_FIELDS = {f.name: f for f in dataclasses.fields(ModelParams)}
PARAM_NAMES = tuple(_FIELDS)
PATH_FIELDS = tuple(n for n in PARAM_NAMES if _role(n) in ("path", "path_int"))
"""Fields that identify a path of an architecture: never overridden in a model spec."""
LABEL_FIELDS = tuple(n for n in PARAM_NAMES if _role(n) == "label")
"""The name, sources and notes: no arithmetic, never overridden."""
MAX_K = 4096
"""Largest instr_k / block_k accepted (the largest in models/ is 128)."""


def coerce(key: str, value: Any) -> Any:
    """Convert an override value (often a string from the command line) to its field's type (by role)."""
    if key not in PARAM_NAMES or _role(key) == "label":
        known = ", ".join(p for p in PARAM_NAMES if _role(p) != "label")
        raise TcsmtError(f"unknown model parameter {key!r} (known: {known})")
    role, word = _role(key), _FIELDS[key].metadata["word"]
    if role == "bool":
        if isinstance(value, bool):
            return value
        s = str(value).lower()
        if s in ("1", "true", "yes", "on"):
            return True
        if s in ("0", "false", "no", "off", "flush"):
            return False
        raise TcsmtError(f"{key} takes true or false, not {shown(value)}")
    if role == "int_or_word":
        if isinstance(value, str) and value.lower() == word:
            return word
        if isinstance(value, float) or isinstance(value, bool):
            raise TcsmtError(f"{key} takes an integer or {word!r}, not {shown(value)}")
        try:
            return parse_int(value, key)
        except TcsmtError:
            raise TcsmtError(f"{key} takes an integer or {word!r}, not {shown(value)}") from None
    if role in ("int", "int_or_none", "path_int"):
        if role == "int_or_none" and (value is None or str(value).lower() == "none"):
            return None
        if isinstance(value, float) or isinstance(value, bool):
            raise TcsmtError(f"{key} takes an integer, not {shown(value)}")
        try:
            return parse_int(value, key)
        except TcsmtError:
            raise TcsmtError(f"{key} takes an integer, not {shown(value)}") from None
    if role in ("path", "format"):  # format names and shapes keep their case
        return str(value)
    return str(value).lower()


def floor_range(p: ModelParams) -> tuple[int, int]:
    """The exponents an ``align_floor`` may take on this path: (lowest, highest).

    lowest is the least subnormal exponent of any term (a product of two
    operand-format subnormals, C, or the accumulator chained between blocks);
    highest is the largest exponent a term can have (a product's 2*(emax+1),
    C's or the accumulator's emax).
    """
    op = get_format(p.operand_fmt or p.in_fmt)
    op_b = get_format(p.operand_fmt or p.b_fmt or p.in_fmt)
    fc, acc = get_format(p.c_fmt or p.out_fmt), get_format(p.acc_fmt)
    lowest = min(op.min_subnormal_exp + op_b.min_subnormal_exp, fc.min_subnormal_exp, acc.min_subnormal_exp)
    highest = max(op.emax + 1 + op_b.emax + 1, fc.emax, acc.emax)
    return lowest, highest


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _plain_ints(p: ModelParams) -> ModelParams:
    """numpy integer scalars (np.int64(4)) in integer fields become Python ints."""
    changes: dict[str, Any] = {}
    for key in (n for n in PARAM_NAMES if _role(n) in ("int", "path_int", "int_or_word", "int_or_none")):
        v = getattr(p, key)
        if isinstance(v, numbers.Integral) and not isinstance(v, (bool, int)):
            changes[key] = int(v)
    return dataclasses.replace(p, **changes) if changes else p


def _check_type(key: str, v: Any, model: str) -> None:
    """The value's type fits the field's role (TcsmtError otherwise); choices are checked here too."""
    role, meta = _role(key), _FIELDS[key].metadata
    bad = f"invalid model parameters{' for ' + model if model else ''}: {key} must be"
    if role in ("path", "format") and not isinstance(v, str):
        raise TcsmtError(f"{bad} a string, not {v!r}")
    if role in ("int", "path_int") and not _is_int(v):
        raise TcsmtError(f"{bad} an integer, not {v!r}")
    if role == "int_or_word" and not (_is_int(v) or v == meta["word"]):
        raise TcsmtError(f"{bad} an integer or {meta['word']!r}, not {v!r}")
    if role == "int_or_none" and not (v is None or _is_int(v)):
        raise TcsmtError(f"{bad} an integer or None, not {v!r}")
    if role == "bool" and not isinstance(v, bool):
        raise TcsmtError(f"{bad} true or false, not {v!r}")
    if role == "choice" and v not in meta["choices"]:
        raise TcsmtError(f"{bad} one of {meta['choices']}, not {v!r}")


def validate(p: ModelParams) -> ModelParams:
    """Check every parameter's type and range; fill derived defaults (c_fmt, block_frac_bits)."""
    p = _plain_ints(p)
    for key in PARAM_NAMES:
        _check_type(key, getattr(p, key), p.name if isinstance(p.name, str) else "")
    for key in ("in_fmt", "out_fmt", "acc_fmt"):
        get_format(getattr(p, key))
    if p.b_fmt:
        get_format(p.b_fmt)
    if p.operand_fmt:
        fo = get_format(p.operand_fmt)
        for fi in {get_format(p.in_fmt), get_format(p.b_fmt or p.in_fmt)}:
            if fo.emax < fi.emax or fo.min_subnormal_exp > fi.min_subnormal_exp or fo.frac_bits < fi.frac_bits:
                raise TcsmtError(f"operand_fmt {fo.name} cannot hold every {fi.name} value exactly")
    if not p.c_fmt:
        p = dataclasses.replace(p, c_fmt=p.out_fmt)
    get_format(p.c_fmt)
    acc = get_format(p.acc_fmt)
    if p.block_frac_bits == 0:
        p = dataclasses.replace(p, block_frac_bits=acc.frac_bits)
    checks = [
        (p.block_interleave >= 0, "block_interleave must be >= 0"),
        (p.block_interleave == 0 or p.block_k == 0 or p.block_interleave <= p.block_k,
         "block_interleave must not exceed block_k"),
        (p.zero_exponent is None or -1100 <= p.zero_exponent <= 1100, "zero_exponent must be -1100..1100 or none"),
        (p.product_inf is None or -1100 <= p.product_inf <= 1100, "product_inf must be -1100..1100 or none"),
        (p.product_inf is None or not p.scale_fmt, "product_inf is not read on a block-scaled path"),
        (0 <= p.instr_k <= MAX_K, f"instr_k must be 0..{MAX_K} (0: no instruction boundary)"),
        (0 <= p.block_k <= MAX_K, f"block_k must be 0..{MAX_K} (0: all K in one block)"),
        (p.block_k == 0 or p.instr_k == 0 or p.block_k <= p.instr_k, "block_k must not exceed instr_k"),
        (p.block_k == 0 or p.instr_k == 0 or p.instr_k % p.block_k == 0, "instr_k must be a multiple of block_k"),
        (1 <= p.block_frac_bits <= acc.frac_bits, f"block_frac_bits must be 1..{acc.frac_bits}"),
        (p.carry_bits == "unbounded" or 0 <= int(p.carry_bits) <= 64, "carry_bits must be 0..64 or unbounded"),
        (p.extra_bits == "exact" or -acc.frac_bits <= int(p.extra_bits) <= 256, f"extra_bits must be -{acc.frac_bits}..256 or exact"),
        (p.product_groups >= 1 and (p.block_k <= 0 or p.product_groups <= p.block_k),
         "product_groups must be 1..block_k"),
        (p.c_mode != "after_sum" or (p.extra_bits != "exact" and p.reduction == "chain"
                                    and p.sum_frac_bits >= get_format(p.acc_fmt).frac_bits + int(p.extra_bits)),
         "c_mode after_sum needs a window (extra_bits not exact), chain reduction and sum_frac_bits >= F"),
        (p.c_drop is None or 0 <= p.c_drop <= 1100, "c_drop must be 0..1100 or none"),
    ]
    checks += _scale_checks(p)
    if p.align_floor is not None:
        lo, hi = floor_range(p)
        checks.append((lo <= p.align_floor <= hi,
                       f"align_floor must be {lo}..{hi} (the exponents of this path's terms) or none, "
                       f"not {p.align_floor}"))
    for ok, msg in checks:
        if not ok:
            raise TcsmtError(f"invalid model parameters{' for ' + p.name if p.name else ''}: {msg}")
    return p


def _scale_checks(p: ModelParams) -> list[tuple[bool, str]]:
    """The checks of the block-scaling parameters (formats looked up first)."""
    from tcsmt.arith.formats import SCALE_FORMATS

    if p.scale_fmt:
        get_format(p.scale_fmt)
    for key in ("in_fmt", "b_fmt", "out_fmt", "c_fmt", "acc_fmt", "operand_fmt"):
        if getattr(p, key) and get_format(getattr(p, key)).name in SCALE_FORMATS:
            return [(False, f"{key} {getattr(p, key)} is a scale format (only scale_fmt takes one)")]
    checks = [(p.scale_group_bits == "exact" or 1 <= int(p.scale_group_bits) <= 64,
               "scale_group_bits must be 1..64 or exact")]
    if not p.scale_fmt:
        return [*checks, (p.scale_block == 0, "scale_block needs a scale_fmt")]
    return [*checks,
            (get_format(p.scale_fmt).name in SCALE_FORMATS, f"scale_fmt must be one of {SCALE_FORMATS}"),
            (p.instr_k > 0 and p.scale_block > 0 and p.instr_k % p.scale_block == 0,
             "a block-scaled path needs instr_k > 0 and a scale_block that divides it"),
            (p.block_k in (0, p.instr_k) and p.reduction == "chain" and not p.operand_fmt and p.c_mode == "aligned",
             "a block-scaled path sums one instruction in one block with C aligned (block_k = instr_k, "
             "reduction chain, no operand_fmt, c_mode aligned)"),
            (p.scale_apply == "products" or (p.scale_group_k > 0 and p.scale_block % p.scale_group_k == 0),
             "scale_apply groups needs a scale_group_k that divides scale_block")]
