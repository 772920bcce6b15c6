"""Library GEMM plans: what cuBLAS does for one call, as data read from ``models/library/*.toml``.

A :class:`Plan` says, for one call (op, shape, dtypes, flags) on one GPU and
library version:

* ``chain``: the K-chain of one slice, a library path of ``models/<arch>.toml``
  (blocks chained through the accumulator, the promotion interval of slow fp8
  accumulation): :class:`tcsmt.arith.params.ModelParams` with C = +0, giving
  accumulator-format (fp32) patterns;
* ``in_round``: how the call's inputs become the chain's input format where
  the two differ (float32 tensors with tf32 on: fp32 -> tf32, 10 fraction
  bits kept, rounded with ``in_round``: "rne", "rna" or "rz"; "" = no
  conversion recorded, so the inputs must already be tf32 values);
* the split-K count ``split_k`` = S and the slice rule: K is cut into
  T = ceil(K / grain) tiles of ``grain`` k's; ``slices = "contiguous"`` gives
  slice s the tiles [s*q, (s+1)*q) with q = ceil(T / S) (``remainder = "last"``:
  the last non-empty slice is short; slices past T are empty) or the first
  T mod S slices one tile more than the others (``remainder = "spread"``);
  ``slices = "interleaved"`` gives tile t to slice t mod S.  An empty slice's
  partial is +0.  ``k_floor`` = F (0 = none; contiguous slices with remainder
  "last" only): the tiles cut K' = K - (K mod F) instead of K, and the k's
  [K', K) go to the end of the last slice that holds k's of [0, K') (the first
  slice where K' = 0);
* ``k_tile`` (0 = none): residue-first K tiles of this many k's inside each
  slice, as CUTLASS 2.x kernels iterate K: a slice of L k's whose L mod
  k_tile = r is not 0 runs its first r k's, then k_tile - r zero products (the
  first tile's predicated-off positions), then the rest in full tiles; the
  K-chain's blocks are counted over that padded sequence;
* ``segment`` (0 = none): a slice whose chain restarts from +0 after every
  ``segment`` of its k's (in slice order): the slice's partial is the serial
  fp32 sum of its segment sums, r = P0, r = RN32(r + P_j) for j = 1, 2, ...,
  each exact and rounded once with RNE (the thread sums of cuBLAS's
  ``gemv2T_kernel_val``: its 16 threads each sum their k's of every block of
  512 apart, then add the block sums in order);
* ``segment_k`` (a ``segment_k_on`` launch, :class:`tcsmt.library.segment_k.SegmentKLaunch`; None = none): the
  outputs in the tiles the launch splits are S K-chains from +0 over the launch's segments of K, their fp32 partials
  joined by its tree (RN32 per sum); the others one K-chain (:mod:`tcsmt.library.segment_k_eval`); then the
  reduction, epilogue and output conversion below, as for any fp32 partial;
* ``reduce``: how the partials are combined (:data:`tcsmt.arith.semantics.REDUCTIONS`);
* ``epilogue``: steps in fp32, in order (:data:`EPILOGUE_STEPS`);
* the output conversion: RNE from fp32 to ``out_dtype`` (none for fp32).

Plans are recorded per GPU and library version in a plan table; a call no
recorded plan covers is an error, never a guess (pass ``plan=`` explicitly).

Over 400 lines: the plan format (Call, Plan and its slice rule), its checks and the table loader are one contract,
read together by the converter, the catalogs and the evaluation.
"""
from __future__ import annotations

import dataclasses
import gzip
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, overload

from tcsmt.arith.params import ModelParams
from tcsmt.arith.registry import models_dir, resolve
from tcsmt.arith.semantics import REDUCTIONS
from tcsmt.errors import TcsmtError
from tcsmt.io.limits import LIBRARY_DIM, SPLIT_K
from tcsmt.library.segment_k import SegmentKLaunch, describe_launch, for_call, launch_from_entry

OPS = ("mm", "addmm", "linear", "bmm", "scaled_mm")
TORCH_DTYPES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32",
                "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}
FP8 = ("float8_e4m3fn", "float8_e5m2")
SCALES = (None, "tensor", "row")
SLICES = ("contiguous", "interleaved")
REMAINDERS = ("last", "spread")
K_TILE = 4096
"""The largest residue-first K tile of a plan (CUTLASS's K tiles are 32 to 256 k's; each slice is padded
to whole tiles, so split_k x k_tile bounds the products of one output)."""
IN_ROUNDS = ("", "rne", "rna", "rz")
"""Input conversions of a plan: none recorded (inputs must fit the chain's format), or rounded with RNE, RNA, RZ."""
EPILOGUE_STEPS = {
    "scale": "y = FFMA(y, s, +0) with s = RN32(scale_a * scale_b) (per tensor, or s_ij = RN32(scale_a[i] * scale_b[j]) row-wise)",
    "alpha": "y = RN32(alpha * y)",
    "beta_c": "y = FFMA(beta, C, y) (C converted exactly to fp32)",
    "alpha_beta_c": "y = FFMA(alpha, y, RN32(beta * C))",
    "bias": "y = RN32(y + bias[j]) (bias converted exactly to fp32)",
    "scale_b_then_a": "y = RN32(RN32(y * scale_b[j]) * scale_a[i]) (row-wise scales: column scale first)",
    "out_round_c": "y = RN32(RN_out(y) + C) (y rounded to the output format with RNE first, C converted exactly "
                   "to fp32; the output rounding follows: RN_out(RN32(RN_out(y) + C)))",
}
C_STEPS = frozenset({"beta_c", "alpha_beta_c", "out_round_c"})
"""The epilogue steps that read C (the matrix, or the 1-D bias of an ``addmm`` broadcast over the rows)."""


def plans_dir() -> Path:
    """The folder of plan tables: ``models/library``."""
    return models_dir() / "library"


@overload
def torch_dtype(name: str, what: str) -> str: ...
@overload
def torch_dtype(name: None, what: str) -> None: ...
def torch_dtype(name: str | None, what: str) -> str | None:
    """A torch dtype name (``"bfloat16"``, ``"torch.bfloat16"``) checked; None stays None."""
    if name is None:
        return None
    key = str(name).removeprefix("torch.")
    if key not in TORCH_DTYPES:
        raise TcsmtError(f"unknown {what} {name!r} (known: {', '.join(TORCH_DTYPES)})")
    return key


BETA_KINDS = (0.0, 1.0, 2.0)
"""A value of beta for each :func:`beta_kind` (0, 1, 2): what a catalog run's family stands for."""


def beta_kind(beta: float) -> int:
    """0 where beta = 0, 1 where beta = 1, 2 for every other beta: three kinds of call to cuBLAS, which runs other
    kernels for each (on the H100, ``addmm`` with a matrix C: ``nvjet_..._badd_`` at beta = 1, ``nvjet_..._bx_`` at
    beta = 2 or 0.75, ``evidence/h100_library_validation.json.gz``), so a plan recorded at one kind never answers
    another (before, beta = 1 and beta = 2 shared one key, and an ``addmm`` with alpha = 1, beta = 2 was answered
    with the ``_badd_`` kernels' epilogue, which adds C once)."""
    return 0 if beta == 0.0 else 1 if beta == 1.0 else 2


@dataclass(frozen=True)
class Call:
    """One library call as a user makes it (torch names); the key plans are looked up by."""

    op: str
    M: int
    N: int
    K: int
    a_dtype: str
    b_dtype: str
    out_dtype: str
    batch: int = 1
    alpha: float = 1.0
    beta: float = 0.0
    bias: bool = False
    tf32: bool = False
    scale: str | None = None
    fast_accum: bool = False
    a_t: bool = False
    """A is the transposed view of a contiguous (K, M) tensor (autograd's ``grad_out.t()`` of a weight gradient);
    False: A is a contiguous (M, K) tensor."""
    b_t: bool = False
    """B is the transposed view of a contiguous (N, K) tensor (``weight.t()``); False: a contiguous (K, N) tensor.
    ``linear`` and ``scaled_mm`` take the (N, K) weight itself: their layout is the op's, and ``b_t`` is False."""
    settings: str = "default"
    """The library settings the call runs under (:func:`tcsmt.library.settings.settings_key`)."""

    def key(self) -> tuple:
        """What selects the plan: the alpha/beta/bias values only matter by kind (cuBLAS's epilogue choice: alpha
        = 1 or not, :func:`beta_kind`)."""
        return (self.op, self.M, self.N, self.K, self.batch, self.a_dtype, self.b_dtype, self.out_dtype,
                self.tf32, self.scale, self.fast_accum, self.bias, self.alpha != 1.0, beta_kind(self.beta),
                self.a_t, self.b_t, self.settings)

    def family_key(self) -> tuple:
        """The key without the shape: the calls that one catalog run of token counts may cover."""
        return (self.op, self.batch, self.a_dtype, self.b_dtype, self.out_dtype, self.tf32, self.scale,
                self.fast_accum, self.bias, self.alpha != 1.0, beta_kind(self.beta), self.a_t, self.b_t,
                self.settings)

    def label(self) -> str:
        b = f"{self.batch}x" if self.op == "bmm" else ""
        dt = self.a_dtype if self.b_dtype == self.a_dtype else f"{self.a_dtype}x{self.b_dtype}"
        extra = [f"-> {self.out_dtype}"]
        if self.tf32:
            extra.append("tf32")
        if self.scale:
            extra.append(f"scale={self.scale}")
        if self.fast_accum:
            extra.append("fast_accum")
        if self.bias:
            extra.append("bias")
        if self.alpha != 1.0 or self.beta != 0.0:
            extra.append(f"alpha={self.alpha:g} beta={self.beta:g}")
        if self.a_t or self.b_t:
            extra.append("layout " + ("A^T" if self.a_t else "A") + "," + ("B^T" if self.b_t else "B"))
        if self.settings != "default":
            extra.append(f"settings {self.settings}")
        return f"{self.op} {dt} {b}{self.M}x{self.N}x{self.K} {' '.join(extra)}"


@dataclass(frozen=True)
class Plan:
    """What the library computes for one call (see the module docstring for each field's arithmetic)."""

    call: Call
    gpu: str
    library: str
    chain: ModelParams
    chain_spec: str
    in_round: str = ""
    split_k: int = 1
    grain: int = 0
    k_floor: int = 0
    k_tile: int = 0
    segment: int = 0
    slices: str = "contiguous"
    remainder: str = "last"
    reduce: str = "fp32_forward"
    epilogue: tuple[str, ...] = ()
    kernels: tuple[str, ...] = ()
    segment_k: SegmentKLaunch | None = None
    sources: tuple[str, ...] = field(default=(), compare=False)
    table: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.segment_k is not None and self.segment_k.from_call:  # its problem is the call's, whichever call
            object.__setattr__(self, "segment_k", for_call(self.segment_k, self.call.M, self.call.N, self.call.K))

    def arithmetic(self) -> tuple:
        """What decides the output bits (the call's shape and flags aside): two plans with equal arithmetic
        compute the same outputs, whatever their kernels, library version or provenance.  K tiles count only where a
        slice's length is not a multiple of them: otherwise residue first inserts no zero products and the chain's
        blocks are the same (a plan recorded without a decided K tile is then the same arithmetic)."""
        return (self.chain, self.in_round, self._k_tile_in_effect(), self.split_k, self.grain if self.split_k > 1 else 0,
                self.slices if self.split_k > 1 else "", self.remainder if self.split_k > 1 else "",
                self.reduce if self.split_k > 1 else "", self.epilogue) + \
            ((self.k_floor,) if self.split_k > 1 and self.k_floor else ()) + \
            ((("segment", self.segment),) if self.segment else ()) + \
            ((("segment_k", self.segment_k),) if self.segment_k is not None else ())

    def _k_tile_in_effect(self) -> int:
        """``k_tile`` where some slice of the call has a residue (its length mod ``k_tile`` is not 0), else 0."""
        if not self.k_tile:
            return 0
        lengths = [self.call.K] if self.split_k == 1 else [len(r) for r in self.slice_ranges()]
        return self.k_tile if any(n % self.k_tile for n in lengths) else 0

    def slice_ranges(self, K: int | None = None) -> list[list[int]]:
        """The k indices of each slice, in order (an empty list for an empty slice).

        With grain G, T = ceil(K'/G) tiles of K' = K (no ``k_floor``) or K - (K mod k_floor): tile t holds the k's
        [t*G, min(K', (t+1)*G)); ``contiguous`` / ``last``: slice s holds tiles [s*q, (s+1)*q), q = ceil(T/S)
        (so, for every rule the families name, slice s holds [s*chunk, min(K', (s+1)*chunk)) with chunk = q*G);
        ``spread``: the first T mod S slices one tile more; ``interleaved``: tile t in slice t mod S.  With
        ``k_floor``, the last slice holding k's of [0, K') (slice 0 where K' = 0) also holds [K', K)."""
        K = self.call.K if K is None else K
        S = self.split_k
        if S == 1:
            return [list(range(K))]
        G = self.grain
        K_full = K
        if self.k_floor:
            K -= K % self.k_floor
        T = -(-K // G)
        tiles_of: list[list[int]]
        if self.slices == "interleaved":
            tiles_of = [list(range(s, T, S)) for s in range(S)]
        elif self.remainder == "last":
            q = -(-T // S)
            tiles_of = [list(range(min(T, s * q), min(T, (s + 1) * q))) for s in range(S)]
        else:  # spread: the first T mod S slices get one more tile
            base, extra = divmod(T, S)
            tiles_of, t0 = [], 0
            for s in range(S):
                n = base + (1 if s < extra else 0)
                tiles_of.append(list(range(t0, t0 + n)))
                t0 += n
        out = [[k for t in ts for k in range(t * G, min(K, (t + 1) * G))] for ts in tiles_of]
        if K_full > K:  # the tail of a floored K: to the last slice holding k's (slice 0 where none does)
            last = max((s for s, ks in enumerate(out) if ks), default=0)
            out[last] += list(range(K, K_full))
        return out

    def segments(self, ks: list[int]) -> list[list[int]]:
        """One slice's k's (:meth:`slice_ranges`) cut into the runs its chain sums from +0: every ``segment`` k's in
        slice order, the last run short; the whole slice without ``segment`` (an empty slice: one empty run)."""
        n = self.segment
        if not n or len(ks) <= n:
            return [ks]
        return [ks[i:i + n] for i in range(0, len(ks), n)]

    def describe(self) -> str:
        """A printable account of the plan with its provenance."""
        c = self.call
        lines = [f"plan for {c.label()} on {self.gpu} ({self.library})"]
        if self.kernels:
            lines.append(f"  kernels : {', '.join(self.kernels)}")
        if c.tf32:
            conv = (f"fp32 -> tf32 with {self.in_round.upper()} (10 fraction bits kept)" if self.in_round
                    else "none recorded: the inputs must already be tf32 values")
            lines.append(f"  inputs  : {conv}")
        lines.append(f"  chain   : {self.chain_spec} = {self.chain.name}")
        p = self.chain
        if p.b_fmt:
            lines.append(f"            A in {p.in_fmt}, B in {p.b_fmt} (each decoded in its own format; exact products)")
        lines.append(f"            blocks of {p.block_k} products chained through {p.acc_fmt}"
                     + (f", promoted to fp32 every {p.instr_k} products" if p.instr_k else "")
                     + f" (extra_bits={p.extra_bits}, block_frac_bits={p.block_frac_bits}, block_round={p.block_round})")
        if self.k_tile:
            lines.append(f"  K tiles : {self.k_tile} k's, residue first (a slice's first L mod {self.k_tile} k's, "
                         "then zero products to the tile's end, then full tiles)")
        if self.segment:
            lines.append(f"  segments: each slice's chain restarts from +0 after every {self.segment} of its k's; the "
                         "slice's partial is the serial fp32 sum (RNE) of its segment sums, in order")
        if self.segment_k is not None:
            lines += describe_launch(self.segment_k)
        elif self.split_k == 1:
            lines.append("  split-K : none (S = 1)")
        else:
            sizes = [len(r) for r in self.slice_ranges()]
            floor = (f", tiles over K floored to a multiple of {self.k_floor} (the tail in the last slice)"
                     if self.k_floor else "")
            lines.append(f"  split-K : S = {self.split_k}, grain {self.grain}{floor}, {self.slices} slices, remainder "
                         f"{self.remainder}; slice lengths {sizes}")
            lines.append(f"  reduce  : {self.reduce}")
        steps = "; ".join(f"{s}: {EPILOGUE_STEPS[s]}" for s in self.epilogue) or "none (the reduced fp32 sum)"
        lines.append(f"  epilogue: {steps}")
        out = "none (fp32)" if c.out_dtype == "float32" else f"RNE fp32 -> {c.out_dtype}"
        lines.append(f"  output  : {out}")
        if self.table:
            lines.append(f"  table   : {self.table}")
        for s in self.sources:
            lines.append(f"  source  : {s}")
        return "\n".join(lines)

    __str__ = describe


# ------------------------------------------------------------------ tables
@dataclass(frozen=True)
class PlanTable:
    """One plan table file: one GPU and library version."""

    path: str
    gpu: str
    arch: str
    device: str
    library: str
    sources: tuple[str, ...]
    plans: tuple[Plan, ...]
    unknown: tuple[tuple[Call, str], ...] = ()
    """Calls recorded without a usable plan, with what is unknown (e.g. split-K)."""
    by_key: dict[tuple, list[Plan]] = field(default_factory=dict, compare=False, hash=False, repr=False)
    """The plans by :meth:`Call.key` (filled by :func:`load_table`)."""
    unknown_by_key: dict[tuple, list[str]] = field(default_factory=dict, compare=False, hash=False, repr=False)
    """What is unknown of each call in ``unknown``, by :meth:`Call.key` (filled by :func:`load_table`)."""


def _chain(spec: dict[str, Any], where: str) -> tuple[ModelParams, str]:
    try:
        arch, fin, fout, instr = spec["arch"], spec["in_fmt"], spec["out_fmt"], spec["instr"]
    except (KeyError, TypeError):
        raise TcsmtError(f"{where}: chain needs arch, in_fmt, out_fmt and instr") from None
    p = resolve(arch, fin, fout, instr)
    return p, f"{arch} {fin}->{fout} ({instr})"


def call_from_entry(raw: dict[str, Any], shape: list[int], where: str) -> Call:
    if len(shape) != 4 or not all(isinstance(x, int) and x >= 1 for x in shape):
        raise TcsmtError(f"{where}: shapes are [M, N, K, batch] of positive integers, not {shape!r}")
    a = torch_dtype(raw.get("a_dtype"), "a_dtype")
    if a is None:
        raise TcsmtError(f"{where}: a_dtype missing")
    return Call(op=raw["op"], M=shape[0], N=shape[1], K=shape[2], batch=shape[3], a_dtype=a,
                b_dtype=torch_dtype(raw.get("b_dtype") or a, "b_dtype"),
                out_dtype=torch_dtype(raw.get("out_dtype") or a, "out_dtype"),
                alpha=float(raw.get("alpha", 1.0)), beta=float(raw.get("beta", 0.0)), bias=bool(raw.get("bias", False)),
                tf32=bool(raw.get("tf32", False)), scale=raw.get("scale") or None,
                fast_accum=bool(raw.get("fast_accum", False)))


def _chain_inputs(dtype: str, tf32: bool) -> tuple[str, ...]:
    """The chain input formats a call's operands of torch dtype ``dtype`` may take: its own format; for float32
    with tf32 allowed, tf32 (a tensor-core kernel) or fp32 itself (allowing tf32 permits it, and cuBLAS's CUDA-core
    FFMA kernels, which it also picks for such calls, multiply the fp32 values as they are)."""
    own = TORCH_DTYPES[dtype]
    return ("tf32", own) if tf32 and own == "fp32" else (own,)


def _check_plan(p: Plan, where: str) -> Plan:
    problems = [
        (p.call.op in OPS, f"op must be one of {OPS}"),
        (1 <= p.split_k <= SPLIT_K, f"split_k must be 1..{SPLIT_K:,} (its limit)"),
        (0 <= p.grain <= LIBRARY_DIM, f"grain must be 0..{LIBRARY_DIM:,} (its limit)"),
        (p.in_round in IN_ROUNDS, f"in_round must be one of {IN_ROUNDS}"),
        (0 <= p.k_tile <= K_TILE, f"k_tile must be 0..{K_TILE:,} (its limit)"),
        (0 <= p.segment <= LIBRARY_DIM, f"segment must be 0..{LIBRARY_DIM:,} (its limit)"),
        (not (p.segment and p.k_tile), "segment and k_tile do not combine (no kernel was read with both)"),
        (not p.segment or p.chain.instr_k == 0 or p.segment % p.chain.instr_k == 0,
         "a segment must be a multiple of the chain's promotion interval"),
        (not p.in_round or p.call.tf32, "in_round applies to float32 calls with tf32 (fp32 -> tf32)"),
        (p.split_k == 1 or p.grain >= 1, "split-K plans need grain >= 1"),
        (0 <= p.k_floor <= LIBRARY_DIM, f"k_floor must be 0..{LIBRARY_DIM:,} (its limit)"),
        (not p.k_floor or (p.slices, p.remainder) == ("contiguous", "last"),
         "k_floor applies to contiguous slices with remainder 'last' only"),
        (p.slices in SLICES, f"slices must be one of {SLICES}"),
        (p.segment_k is None or (p.split_k == 1 and not p.segment and not p.k_tile and p.call.batch == 1),
         "segment_k plans have no split_k, segment or k_tile and one batch (the launch splits K itself)"),
        (p.remainder in REMAINDERS, f"remainder must be one of {REMAINDERS}"),
        (p.reduce in REDUCTIONS, f"reduce must be one of {REDUCTIONS}"),
        (all(s in EPILOGUE_STEPS for s in p.epilogue), f"epilogue steps must be among {tuple(EPILOGUE_STEPS)}"),
        (p.chain.out_fmt == "fp32" and p.chain.c_fmt == "fp32", "the chain must give fp32 partials"),
        (p.chain.in_fmt in _chain_inputs(p.call.a_dtype, p.call.tf32),
         f"the chain's in_fmt {p.chain.in_fmt} does not take {p.call.a_dtype}" + (" with tf32" if p.call.tf32 else "")),
        (p.chain.b_format in _chain_inputs(p.call.b_dtype, p.call.tf32),
         f"the chain's B format {p.chain.b_format} does not take {p.call.b_dtype}"),
        (not p.call.tf32 or p.chain.in_fmt == "tf32" or not p.in_round, "in_round applies to tf32 chains only"),
        (p.chain.instr_k == 0 or p.grain == 0 or p.grain % p.chain.instr_k == 0 or p.split_k == 1,
         "the grain must be a multiple of the chain's promotion interval"),
    ]
    for ok, msg in problems:
        if not ok:
            raise TcsmtError(f"{where}: {msg}")
    return p


def plan_fields(raw: dict[str, Any], where: str,
                chains: dict[str, tuple[ModelParams, str]] | None = None) -> tuple[ModelParams, str, dict[str, Any]]:
    """The chain and the other plan fields of one plan entry (a table's ``[[plans]]`` or a catalog's plan row);
    ``chains``: the chains already resolved, by their spec's text (a table names a few chains thousands of times)."""
    try:
        spec, memo = raw.get("chain") or {}, {} if chains is None else chains
        chain, chain_spec = memo[repr(spec)] if repr(spec) in memo else memo.setdefault(repr(spec), _chain(spec, where))
        base = {"in_round": str(raw.get("in_round", "")), "split_k": int(raw.get("split_k", 1)),
                "grain": int(raw.get("grain", 0)), "k_floor": int(raw.get("k_floor", 0)),
                "k_tile": int(raw.get("k_tile", 0)), "segment": int(raw.get("segment", 0)),
                "slices": raw.get("slices", "contiguous"), "remainder": raw.get("remainder", "last"),
                "reduce": raw.get("reduce", "fp32_forward"), "epilogue": tuple(raw.get("epilogue", ())),
                "kernels": tuple(raw.get("kernels", ())), "sources": tuple(raw.get("sources", ())),
                "segment_k": launch_from_entry(raw["segment_k"]) if raw.get("segment_k") is not None else None}
    except (ValueError, TypeError) as exc:
        raise TcsmtError(f"{where}: {exc}") from None
    if not base["sources"]:
        raise TcsmtError(f"{where}: every plan needs its sources (provenance)")
    return chain, chain_spec, base


def plan_from_fields(raw: dict[str, Any], call: Call, gpu: str, library: str, table: str, where: str) -> Plan:
    """The checked :class:`Plan` of ``call`` under one plan entry's fields."""
    chain, chain_spec, base = plan_fields(raw, where)
    return _check_plan(Plan(call=call, gpu=gpu, library=library, chain=chain, chain_spec=chain_spec, table=table,
                            **base), where)


def read_table_text(path: Path) -> str:
    """The TOML text of a plan table: ``*.toml``, or ``*.toml.gz`` (the large generated tables are kept gzipped)."""
    data = Path(path).read_bytes()
    return (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")


def load_table(path: Path) -> PlanTable:
    """Read one plan table (format: docs in ``models/library/README.md``)."""
    try:
        data = tomllib.loads(read_table_text(path))
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile, tomllib.TOMLDecodeError) as exc:
        raise TcsmtError(f"cannot read plan table {path}: {exc}") from None
    name = Path(path).name
    for key in ("gpu", "arch", "library"):
        if key not in data:
            raise TcsmtError(f"plan table {name}: missing {key!r}")
    plans, unknown = [], []
    chains: dict[str, tuple[ModelParams, str]] = {}
    for i, raw in enumerate(data.get("plans", [])):
        where = f"plan table {name}, plan {i}"
        shapes = raw.get("shapes", [])
        if not shapes:
            continue
        chain, chain_spec, base = plan_fields(raw, where, chains)  # once per entry: its shapes share the fields
        for shape in shapes:
            call = call_from_entry(raw, shape, where)
            plans.append(_check_plan(Plan(call=call, gpu=data["gpu"], library=data["library"], chain=chain,
                                          chain_spec=chain_spec, table=name, **base), where))
    for i, raw in enumerate(data.get("unknown", [])):
        for shape in raw.get("shapes", []):
            unknown.append((call_from_entry(raw, shape, f"plan table {name}, unknown {i}"), str(raw.get("why", "plan unknown"))))
    by_key: dict[tuple, list[Plan]] = {}
    for p in plans:
        by_key.setdefault(p.call.key(), []).append(p)
    unknown_by_key: dict[tuple, list[str]] = {}
    for c, w in unknown:
        unknown_by_key.setdefault(c.key(), []).append(w)
    return PlanTable(str(path), data["gpu"], data["arch"], data.get("device", ""), data["library"],
                     tuple(data.get("sources", ())), tuple(plans), tuple(unknown), by_key, unknown_by_key)


@cache
def _tables_cached(directory: str) -> tuple[PlanTable, ...]:
    d = Path(directory)
    return tuple(load_table(f) for f in sorted([*d.glob("*.toml"), *d.glob("*.toml.gz")])) if d.is_dir() else ()


def tables() -> tuple[PlanTable, ...]:
    return _tables_cached(str(plans_dir()))


def gpus() -> list[str]:
    return sorted({t.gpu for t in tables()})


def tables_for_arch(arch: str) -> list[PlanTable]:
    return [t for t in tables() if t.arch == arch]


def table_lookup(call: Call, gpu: str, within: tuple[PlanTable, ...] | None = None) -> tuple[Plan | None, str]:
    """(the plan the plan tables of ``gpu`` record for ``call``, '') or (None, what they say is unknown, or '' where
    no table names the call).  TcsmtError where two tables disagree.  ``within``: the tables to read (default
    :func:`tables`; a caller looking up many calls reads them once)."""
    mine = [t for t in (tables() if within is None else within) if t.gpu == gpu]
    key = call.key()
    found = [p for t in mine for p in t.by_key.get(key, ())]
    if found:
        first = found[0]
        for other in found[1:]:
            if other.arithmetic() != first.arithmetic():
                raise TcsmtError(f"plan tables {first.table} and {other.table} disagree on {call.label()} on {gpu}")
        return dataclasses.replace(first, call=call), ""
    why = [w for t in mine for w in t.unknown_by_key.get(key, ())]
    return None, (why[0] if why else "")
