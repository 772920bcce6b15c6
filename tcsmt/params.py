"""The parameters of the block-FMA model family (one matrix-unit path = one ModelParams).

Every per-GPU number lives in ``models/*.toml``; this module only defines what
the parameters mean, checks their values and applies overrides such as
``carry_bits=2``.  The arithmetic they select is defined in
:mod:`tcsmt.semantics`.
"""
from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field
from typing import Any

from .errors import TcsmtError
from .formats import get_format

ROUNDINGS = ("rz", "rne", "ru", "rd")
ALIGN_LOSS = ("trunc", "rne", "floor")
OVERFLOW = ("wrap", "saturate")


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
               RNE additions, then + C with RNE).

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
      c_round  rounding of the C addition when c_mode = "after".
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
               cancellations included), as MMA-Sim's fused dot-add returns.
      zero_exponent  None: zero addends take no part in the alignment (E is
               the largest alignment exponent of the non-zero addends); an
               integer z: a zero factor or a zero C has exponent z, so a zero
               product's alignment exponent is z + e(other factor) (z + z for
               two zeros) and a zero C's is z, and both join the maximum E
               (MMA-Sim gives every zero the exponent -126, whatever its
               format).  Only the windowed block sum reads it.
    """

    in_fmt: str
    out_fmt: str
    operand_fmt: str = ""
    b_fmt: str = ""
    c_fmt: str = ""
    acc_fmt: str = "fp32"
    instr: str = "mma"
    instr_shape: str = ""
    instr_k: int = 0
    block_k: int = 0
    block_interleave: int = 0
    reduction: str = "chain"
    product_exponent: str = "raw"
    c_mode: str = "aligned"
    extra_bits: int | str = 0
    align: str = "trunc"
    align_floor: int | None = None
    carry_bits: int | str = "unbounded"
    overflow: str = "wrap"
    block_round: str = "rz"
    block_frac_bits: int = 0
    c_round: str = "rne"
    out_round: str = "rne"
    subnormal_in: bool = True
    subnormal_c: bool = True
    subnormal_out: bool = True
    overflow_result: str = "ieee"
    zero_sign: str = "ieee"
    zero_exponent: int | None = None
    product_groups: int = 1
    sum_frac_bits: int = 0
    late_align: str = "floor"
    c_drop: int | None = None
    name: str = ""
    sources: tuple[str, ...] = field(default=(), compare=False)
    notes: str = field(default="", compare=False)

    # ------------------------------------------------------------ derived
    @property
    def path_id(self) -> str:
        return f"{self.in_fmt}.{self.out_fmt}"

    @property
    def window_frac_bits(self) -> int | None:
        """F: fraction bits of the alignment window below 2^E (None = exact)."""
        if self.extra_bits == "exact":
            return None
        return get_format(self.acc_fmt).frac_bits + int(self.extra_bits)

    def semantic_key(self) -> tuple:
        """The fields that determine the arithmetic (for equality of models)."""
        skip = {"name", "sources", "notes", "instr", "instr_shape"}
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


PARAM_NAMES = tuple(f.name for f in dataclasses.fields(ModelParams))
PATH_FIELDS = ("in_fmt", "out_fmt", "b_fmt", "c_fmt", "instr", "instr_shape")
"""Fields that identify a path of an architecture: never overridden in a model spec."""
MAX_K = 4096
"""Largest instr_k / block_k accepted (the largest in models/ is 128)."""
_INT_OR = {"extra_bits": "exact", "carry_bits": "unbounded"}
_BOOLS = {"subnormal_in", "subnormal_c", "subnormal_out"}
_OPTIONAL_INTS = ("align_floor", "zero_exponent", "c_drop")
_INTS = {"instr_k", "block_k", "block_frac_bits", "block_interleave", "product_groups", "sum_frac_bits"}


def coerce(key: str, value: Any) -> Any:
    """Convert an override value (often a string from the command line) to its type."""
    if key not in PARAM_NAMES or key in {"sources", "notes", "name"}:
        raise TcsmtError(f"unknown model parameter {key!r} (known: {', '.join(p for p in PARAM_NAMES if p not in ('sources', 'notes', 'name'))})")
    if key in _BOOLS:
        if isinstance(value, bool):
            return value
        s = str(value).lower()
        if s in ("1", "true", "yes", "on"):
            return True
        if s in ("0", "false", "no", "off", "flush"):
            return False
        raise TcsmtError(f"{key} takes true or false, not {value!r}")
    if key in _INT_OR:
        if isinstance(value, str) and value.lower() == _INT_OR[key]:
            return _INT_OR[key]
        try:
            return int(value)
        except (TypeError, ValueError):
            raise TcsmtError(f"{key} takes an integer or {_INT_OR[key]!r}, not {value!r}") from None
    if key in _INTS or key in _OPTIONAL_INTS:
        if key in _OPTIONAL_INTS and (value is None or str(value).lower() == "none"):
            return None
        try:
            return int(value)
        except (TypeError, ValueError):
            raise TcsmtError(f"{key} takes an integer, not {value!r}") from None
    return str(value).lower() if key not in ("in_fmt", "out_fmt", "b_fmt", "c_fmt", "acc_fmt", "operand_fmt", "instr_shape") else str(value)


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
    for key in ("instr_k", "block_k", "block_interleave", "block_frac_bits", "extra_bits", "carry_bits", "align_floor",
                "zero_exponent", "product_groups", "sum_frac_bits", "c_drop"):
        v = getattr(p, key)
        if isinstance(v, numbers.Integral) and not isinstance(v, (bool, int)):
            changes[key] = int(v)
    return dataclasses.replace(p, **changes) if changes else p


def validate(p: ModelParams) -> ModelParams:
    """Check every parameter's type and range; fill derived defaults (c_fmt, block_frac_bits)."""
    p = _plain_ints(p)
    for key in ("in_fmt", "out_fmt", "acc_fmt", "c_fmt", "operand_fmt", "b_fmt", "instr", "instr_shape"):
        if not isinstance(getattr(p, key), str):
            raise TcsmtError(f"invalid model parameters: {key} must be a string, not {getattr(p, key)!r}")
    for key in ("instr_k", "block_k", "block_interleave", "block_frac_bits", "product_groups", "sum_frac_bits"):
        if not _is_int(getattr(p, key)):
            raise TcsmtError(f"invalid model parameters: {key} must be an integer, not {getattr(p, key)!r}")
    for key, word in (("extra_bits", "exact"), ("carry_bits", "unbounded")):
        v = getattr(p, key)
        if not (_is_int(v) or v == word):
            raise TcsmtError(f"invalid model parameters: {key} must be an integer or {word!r}, not {v!r}")
    for key in _OPTIONAL_INTS:
        if not (getattr(p, key) is None or _is_int(getattr(p, key))):
            raise TcsmtError(f"invalid model parameters: {key} must be an integer or None, not {getattr(p, key)!r}")
    for key in ("subnormal_in", "subnormal_c", "subnormal_out"):
        if not isinstance(getattr(p, key), bool):
            raise TcsmtError(f"invalid model parameters: {key} must be true or false, not {getattr(p, key)!r}")
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
        (p.block_round in ROUNDINGS, f"block_round must be one of {ROUNDINGS}"),
        (p.c_round in ROUNDINGS, f"c_round must be one of {ROUNDINGS}"),
        (p.out_round in ROUNDINGS, f"out_round must be one of {ROUNDINGS}"),
        (p.align in ALIGN_LOSS, f"align must be one of {ALIGN_LOSS}"),
        (p.overflow in OVERFLOW, f"overflow must be one of {OVERFLOW}"),
        (p.product_exponent in ("raw", "normalized"), "product_exponent must be raw or normalized"),
        (p.c_mode in ("aligned", "after", "after_instr", "after_sum"),
         "c_mode must be aligned, after, after_instr or after_sum"),
        (p.block_interleave >= 0, "block_interleave must be >= 0"),
        (p.block_interleave == 0 or p.block_k == 0 or p.block_interleave <= p.block_k,
         "block_interleave must not exceed block_k"),
        (p.reduction in ("chain", "pairwise"), "reduction must be chain or pairwise"),
        (p.overflow_result in ("ieee", "inf"), "overflow_result must be ieee or inf"),
        (p.zero_sign in ("ieee", "positive", "plus"), "zero_sign must be ieee, positive or plus"),
        (p.zero_exponent is None or -1100 <= p.zero_exponent <= 1100, "zero_exponent must be -1100..1100 or none"),
        (0 <= p.instr_k <= MAX_K, f"instr_k must be 0..{MAX_K} (0: no instruction boundary)"),
        (0 <= p.block_k <= MAX_K, f"block_k must be 0..{MAX_K} (0: all K in one block)"),
        (p.block_k == 0 or p.instr_k == 0 or p.block_k <= p.instr_k, "block_k must not exceed instr_k"),
        (p.block_k == 0 or p.instr_k == 0 or p.instr_k % p.block_k == 0, "instr_k must be a multiple of block_k"),
        (1 <= p.block_frac_bits <= acc.frac_bits, f"block_frac_bits must be 1..{acc.frac_bits}"),
        (p.carry_bits == "unbounded" or 0 <= int(p.carry_bits) <= 64, "carry_bits must be 0..64 or unbounded"),
        (p.extra_bits == "exact" or -acc.frac_bits <= int(p.extra_bits) <= 256, f"extra_bits must be -{acc.frac_bits}..256 or exact"),
        (p.late_align in ALIGN_LOSS, f"late_align must be one of {ALIGN_LOSS}"),
        (p.product_groups >= 1 and (p.block_k <= 0 or p.product_groups <= p.block_k),
         "product_groups must be 1..block_k"),
        (p.c_mode != "after_sum" or (p.extra_bits != "exact" and p.reduction == "chain"
                                    and p.sum_frac_bits >= get_format(p.acc_fmt).frac_bits + int(p.extra_bits)),
         "c_mode after_sum needs a window (extra_bits not exact), chain reduction and sum_frac_bits >= F"),
        (p.c_drop is None or 0 <= p.c_drop <= 1100, "c_drop must be 0..1100 or none"),
    ]
    if p.align_floor is not None:
        lo, hi = floor_range(p)
        checks.append((lo <= p.align_floor <= hi,
                       f"align_floor must be {lo}..{hi} (the exponents of this path's terms) or none, "
                       f"not {p.align_floor}"))
    for ok, msg in checks:
        if not ok:
            raise TcsmtError(f"invalid model parameters{' for ' + p.name if p.name else ''}: {msg}")
    return p
