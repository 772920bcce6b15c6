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
               (``c_round``) in acc_fmt.
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
               non-zero sum that rounds to zero gives +0.

    Mixed operand formats and block scaling (tcgen05 / sm_120 fp4, fp6, fp8)
      b_fmt    format of B where it differs from A's (``in_fmt``): the
               kind::f8f6f4 instructions take any pair of e4m3, e5m2, e3m2,
               e2m3, e2m1; "" = in_fmt.  A product of two formats is exact
               (significand product, exponent e(a)+e(b)).
      scale_fmt  "" (no block scaling), "ue8m0" or "ue4m3": the format of the
               scale factors; every ``scale_block`` consecutive products of a
               row of A (column of B) share one factor of A (of B), given as
               extra inputs (shape (n, K / scale_block) each).
      scale_block  products per scale factor (32 for mxf8f6f4 and
               scale_vec::2X, 16 for scale_vec::4X); divides instr_k.
      scale_apply  where the two block scales enter:
               "products": each exact product is multiplied exactly by its
               block's two scales before the alignment (its alignment
               exponent e(a)+e(b)+e(sa)+e(sb) with product_exponent "raw");
               "groups": the products of each group of ``scale_group_k``
               (one scale block or part of one) are first summed exactly, and
               that exact group sum, multiplied exactly by the two scales, is
               one addend of the block; with product_exponent "raw" its
               alignment exponent is e(sa)+e(sb), the scales' exponents only,
               whatever the size of the group sum ("normalized": the exponent
               of its leading bit).  The block then aligns these addends (and
               C) to the largest exponent with F = 23 + extra_bits fraction
               bits, as for products.
      scale_group_k  products per group sum with scale_apply "groups"
               (16 in MMA-Sim's mxf4nvf4); divides scale_block.
      scale_group_bits  significant bits the group sum keeps before it is
               scaled: "exact" (every bit: MMA-Sim), or n (1..64): the
               exact sum truncated toward zero to its n leading bits.
      scale_zero_group  with "groups": "aligns" (a group whose exact sum is 0
               still puts its scale exponent into the alignment maximum E) or
               "skipped" (zero addends take no part in E, as everywhere else).
    """

    in_fmt: str
    out_fmt: str
    operand_fmt: str = ""
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
    b_fmt: str = ""
    scale_fmt: str = ""
    scale_block: int = 0
    scale_apply: str = "products"
    scale_group_k: int = 0
    scale_group_bits: int | str = "exact"
    scale_zero_group: str = "skipped"
    name: str = ""
    sources: tuple[str, ...] = field(default=(), compare=False)
    notes: str = field(default="", compare=False)

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
PATH_FIELDS = ("in_fmt", "out_fmt", "c_fmt", "instr", "instr_shape", "b_fmt", "scale_fmt", "scale_block")
"""Fields that identify a path of an architecture: never overridden in a model spec."""
MAX_K = 4096
"""Largest instr_k / block_k accepted (the largest in models/ is 128)."""
_INT_OR = {"extra_bits": "exact", "carry_bits": "unbounded", "scale_group_bits": "exact"}
_BOOLS = {"subnormal_in", "subnormal_c", "subnormal_out"}
_INTS = {"instr_k", "block_k", "block_frac_bits", "block_interleave", "scale_block", "scale_group_k"}


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
    if key in _INTS or key == "align_floor":
        if key == "align_floor" and (value is None or str(value).lower() == "none"):
            return None
        try:
            return int(value)
        except (TypeError, ValueError):
            raise TcsmtError(f"{key} takes an integer, not {value!r}") from None
    return str(value).lower() if key not in ("in_fmt", "out_fmt", "c_fmt", "acc_fmt", "operand_fmt", "instr_shape",
                                             "b_fmt", "scale_fmt") else str(value)


def floor_range(p: ModelParams) -> tuple[int, int]:
    """The exponents an ``align_floor`` may take on this path: (lowest, highest).

    lowest is the least subnormal exponent of any term (a product of two
    operand-format subnormals, C, or the accumulator chained between blocks);
    highest is the largest exponent a term can have (a product's 2*(emax+1),
    C's or the accumulator's emax).
    """
    op = get_format(p.operand_fmt or p.in_fmt)
    fc, acc = get_format(p.c_fmt or p.out_fmt), get_format(p.acc_fmt)
    lowest = min(2 * op.min_subnormal_exp, fc.min_subnormal_exp, acc.min_subnormal_exp)
    highest = max(2 * (op.emax + 1), fc.emax, acc.emax)
    return lowest, highest


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _plain_ints(p: ModelParams) -> ModelParams:
    """numpy integer scalars (np.int64(4)) in integer fields become Python ints."""
    changes: dict[str, Any] = {}
    for key in ("instr_k", "block_k", "block_interleave", "block_frac_bits", "extra_bits", "carry_bits", "align_floor",
                "scale_block", "scale_group_k", "scale_group_bits"):
        v = getattr(p, key)
        if isinstance(v, numbers.Integral) and not isinstance(v, (bool, int)):
            changes[key] = int(v)
    return dataclasses.replace(p, **changes) if changes else p


def validate(p: ModelParams) -> ModelParams:
    """Check every parameter's type and range; fill derived defaults (c_fmt, block_frac_bits)."""
    p = _plain_ints(p)
    for key in ("in_fmt", "out_fmt", "acc_fmt", "c_fmt", "operand_fmt", "instr", "instr_shape", "b_fmt", "scale_fmt"):
        if not isinstance(getattr(p, key), str):
            raise TcsmtError(f"invalid model parameters: {key} must be a string, not {getattr(p, key)!r}")
    for key in ("instr_k", "block_k", "block_interleave", "block_frac_bits", "scale_block", "scale_group_k"):
        if not _is_int(getattr(p, key)):
            raise TcsmtError(f"invalid model parameters: {key} must be an integer, not {getattr(p, key)!r}")
    for key, word in (("extra_bits", "exact"), ("carry_bits", "unbounded"), ("scale_group_bits", "exact")):
        v = getattr(p, key)
        if not (_is_int(v) or v == word):
            raise TcsmtError(f"invalid model parameters: {key} must be an integer or {word!r}, not {v!r}")
    if not (p.align_floor is None or _is_int(p.align_floor)):
        raise TcsmtError(f"invalid model parameters: align_floor must be an integer or None, not {p.align_floor!r}")
    for key in ("subnormal_in", "subnormal_c", "subnormal_out"):
        if not isinstance(getattr(p, key), bool):
            raise TcsmtError(f"invalid model parameters: {key} must be true or false, not {getattr(p, key)!r}")
    for key in ("in_fmt", "out_fmt", "acc_fmt"):
        get_format(getattr(p, key))
    if p.operand_fmt:
        fi, fo = get_format(p.in_fmt), get_format(p.operand_fmt)
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
        (p.c_mode in ("aligned", "after", "after_instr"), "c_mode must be aligned, after or after_instr"),
        (p.block_interleave >= 0, "block_interleave must be >= 0"),
        (p.block_interleave == 0 or p.block_k == 0 or p.block_interleave <= p.block_k,
         "block_interleave must not exceed block_k"),
        (p.reduction in ("chain", "pairwise"), "reduction must be chain or pairwise"),
        (p.overflow_result in ("ieee", "inf"), "overflow_result must be ieee or inf"),
        (p.zero_sign in ("ieee", "positive"), "zero_sign must be ieee or positive"),
        (0 <= p.instr_k <= MAX_K, f"instr_k must be 0..{MAX_K} (0: no instruction boundary)"),
        (0 <= p.block_k <= MAX_K, f"block_k must be 0..{MAX_K} (0: all K in one block)"),
        (p.block_k == 0 or p.instr_k == 0 or p.block_k <= p.instr_k, "block_k must not exceed instr_k"),
        (p.block_k == 0 or p.instr_k == 0 or p.instr_k % p.block_k == 0, "instr_k must be a multiple of block_k"),
        (1 <= p.block_frac_bits <= acc.frac_bits, f"block_frac_bits must be 1..{acc.frac_bits}"),
        (p.carry_bits == "unbounded" or 0 <= int(p.carry_bits) <= 64, "carry_bits must be 0..64 or unbounded"),
        (p.extra_bits == "exact" or -acc.frac_bits <= int(p.extra_bits) <= 256, f"extra_bits must be -{acc.frac_bits}..256 or exact"),
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
    """The checks of the mixed-format and block-scaling parameters (formats looked up first)."""
    from .formats import SCALE_FORMATS

    for key in ("b_fmt", "scale_fmt"):
        if getattr(p, key):
            get_format(getattr(p, key))
    for key in ("in_fmt", "b_fmt", "out_fmt", "c_fmt", "acc_fmt", "operand_fmt"):
        if getattr(p, key) and get_format(getattr(p, key)).name in SCALE_FORMATS:
            return [(False, f"{key} {getattr(p, key)} is a scale format (only scale_fmt takes one)")]
    checks = [
        (not p.b_fmt or not p.operand_fmt, "b_fmt and operand_fmt cannot both be set"),
        (p.scale_apply in ("products", "groups"), "scale_apply must be products or groups"),
        (p.scale_zero_group in ("aligns", "skipped"), "scale_zero_group must be aligns or skipped"),
        (p.scale_group_bits == "exact" or 1 <= int(p.scale_group_bits) <= 64, "scale_group_bits must be 1..64 or exact"),
    ]
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
