"""A compiled CPU GEMM on one library path: every (row, column) dot product of an
(r, K) x (K, c) product under one ModelParams' K-chain with C = +0.

This is a **second implementation** of the semantics of :mod:`tcsmt.arith.semantics`,
written for speed (numba, exact int64 arithmetic, all cores); it is not a new
definition of anything.  ``gemm(p, A, B)[i, j]`` is, bit for bit,
``tcsmt.sim.simulator.simulate_params(p, A[i], B[:, j], +0)``, i.e.
:func:`tcsmt.arith.semantics.dot` with C = +0, without materialising r*c*K elements.
The compiled loops in :mod:`tcsmt.kernels.cpu_numba` mirror, function by function:

* :func:`tcsmt.arith.semantics.decode` (A and B decoded once, in parallel),
* :func:`tcsmt.arith.semantics.groups` (instructions of ``instr_k``, contiguous blocks of ``block_k``),
* :func:`tcsmt.arith.semantics.product_term` (exact products, raw alignment exponent e(a)+e(b)),
* :func:`tcsmt.arith.semantics.block_sum` (E = the largest alignment exponent of the
  non-zero addends, at least ``align_floor``; window LSB 2^(E-F); truncation of
  the magnitude or two's-complement floor; exact sum with unbounded carries),
* :func:`tcsmt.arith.semantics.sum_and_round` and :func:`tcsmt.arith.semantics.round_to`
  (one normalisation and rounding per block, zero-sign rules, overflow),
* :func:`tcsmt.arith.semantics.merge_flags` / :func:`tcsmt.arith.semantics.apply_flags` (NaN/inf),
* :func:`tcsmt.arith.semantics.add_rounded` (c_mode "after_instr": promotion of each
  instruction's result by one correctly rounded fp32 addition),
* :func:`tcsmt.arith.semantics.convert` (the final conversion to ``out_fmt``).

Work: A and B are decoded once (O((r + c) K)); the outputs are computed in
parallel over 8 x 8 tiles, each output streaming over K with int64 block sums
(no r*c*K array).  Measured (benchmarks/bench_library.py, bf16 -> fp32 cuBLAS
path, 256 x 4096 x 256, on a shared 2-core AMD EPYC): 1.4-2.0 * 10^8 products
per second on one thread, about 3 * 10^8 products per CPU second; 20-90 times
the numpy simulator.  The first call compiles (about 5-7 s; cached on disk by
numba afterwards, 0.2-0.5 s).

:func:`pairs` computes one output per (row, column) pair with a C per pair (fp32), the chain of
:func:`tcsmt.arith.semantics.dot` itself: ``tcsmt.simulate`` runs on it (:mod:`tcsmt.kernels.simulate`).  Its
kernel is :mod:`tcsmt.kernels.cpu_rows`, written for one dot product per row (each block's K vectorised, the
per-block steps vectorised across rows), a third implementation of the same chain.

``tests/test_gemm_kernel.py`` ties the two implementations together (every
output of every supported library path on many input distributions, and every compiled instruction
path with random C).

The parameters it supports are checked by :func:`check_supported`, field by
field; any other value raises :class:`TcsmtError` so the caller can fall back
to the numpy simulator.  Without numba, :func:`gemm` raises TcsmtError too.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from tcsmt.arith.formats import get_format
from tcsmt.arith.params import ModelParams
from tcsmt.errors import TcsmtError
from tcsmt.sim.simulator import to_bits

_ROUND_CODE = {"rz": 0, "rne": 1, "ru": 2, "rd": 3}
_INT64_SAFE_BITS = 62  # the block sum must fit an int64 with room for its sign

# How each ModelParams field is treated (check_supported goes through every field).
_NO_ARITHMETIC = ("instr", "instr_shape", "name", "sources", "notes")
_HANDLED = ("in_fmt", "out_fmt", "b_fmt", "c_fmt", "acc_fmt", "operand_fmt", "instr_k", "block_k", "block_interleave",
            "reduction", "product_exponent", "c_mode", "extra_bits", "align", "align_floor", "carry_bits",
            "overflow", "block_round", "block_frac_bits", "c_round", "out_round", "subnormal_in", "subnormal_c",
            "subnormal_out", "overflow_result", "zero_sign", "zero_exponent", "product_inf", "product_groups", "sum_frac_bits",
            "late_align", "c_drop", "scale_fmt", "scale_block", "scale_apply", "scale_group_k", "scale_group_bits",
            "scale_zero_group")


def check_supported(p: ModelParams) -> None:
    """Raise TcsmtError naming the first ModelParams field value this kernel does not implement.

    Every field of ModelParams is either without arithmetic effect
    (``_NO_ARITHMETIC``) or checked here (``_HANDLED``); a field added to
    ModelParams later fails this check until it is classified.
    """
    fields = {f.name for f in dataclasses.fields(ModelParams)}
    unknown = fields - set(_NO_ARITHMETIC) - set(_HANDLED)
    if unknown:
        raise TcsmtError(f"gemm kernel: ModelParams field(s) {sorted(unknown)} not classified")

    def no(field: str, why: str) -> None:
        raise TcsmtError(f"gemm kernel does not support {field} = {getattr(p, field)!r} ({why}); use the numpy simulator")

    for field, fmt in (("in_fmt", get_format(p.in_fmt)), ("b_fmt", get_format(p.b_format))):
        if fmt.specials != "ieee" and fmt.specials != "fn":
            no(field, "unknown special-value convention")
        if fmt.frac_bits > 11 or fmt.storage_bits > 32:
            no(field, "products wider than 24 bits")
    if p.acc_fmt != "fp32":
        no("acc_fmt", "only an fp32 accumulator is compiled")
    fout = get_format(p.out_fmt)
    if fout.name != "fp32" and (fout.specials != "ieee" or fout.pad_bits or fout.frac_bits > 23 or fout.exp_bits > 8):
        no("out_fmt", "only fp32 or a narrower IEEE format without pad bits")
    get_format(p.c_fmt or p.out_fmt)  # C is +0: any format's +0 is the zero addend of sign +
    if p.operand_fmt:
        no("operand_fmt", "operand conversion is not compiled")
    if p.block_interleave != 0:
        no("block_interleave", "only contiguous blocks")
    if p.reduction != "chain":
        no("reduction", "only chained blocks")
    if p.product_exponent != "raw":
        no("product_exponent", "only raw product exponents e(a)+e(b)")
    if p.zero_exponent is not None:
        no("zero_exponent", "zeros never join the alignment here")
    if p.product_inf is not None:
        no("product_inf", "products never overflow here")
    if p.product_groups != 1:
        no("product_groups", "one window per block only")
    if p.scale_fmt:  # the other scale_* fields are read only with a scale format
        no("scale_fmt", "block scaling is not compiled")
    # sum_frac_bits, late_align and c_drop are read only with c_mode "after_sum", refused below
    if p.c_mode not in ("aligned", "after_instr"):
        no("c_mode", "only aligned and after_instr")
    if p.extra_bits == "exact":
        no("extra_bits", "an exact (Kulisch) window does not fit int64")
    if p.align not in ("trunc", "floor"):
        no("align", "only sign-magnitude truncation and two's-complement floor")
    if p.carry_bits != "unbounded":
        no("carry_bits", "only unbounded carries")
    # overflow ("wrap"/"saturate") only acts with bounded carries, which are refused above.
    for key in ("block_round", "c_round", "out_round"):
        if getattr(p, key) not in _ROUND_CODE:
            no(key, "unknown rounding")
    if not 1 <= p.block_frac_bits <= 23:
        no("block_frac_bits", "outside fp32's 1..23")
    if p.overflow_result not in ("ieee", "inf"):
        no("overflow_result", "unknown rule")
    if p.zero_sign not in ("ieee", "positive", "plus"):
        no("zero_sign", "unknown rule")
    if p.out_fmt != p.acc_fmt and p.c_mode == "after_instr":
        no("c_mode", "after_instr with an output conversion between instructions")
    F = p.window_frac_bits
    if F is None:
        no("extra_bits", "exact blocks (no window)")
    elif F < 0 or F > 40:
        no("extra_bits", "window outside 0..40 fraction bits")


def _sum_bits(p: ModelParams, n_terms: int) -> int:
    """Static width of a block sum (as in semantics.block_sum): head + F + 1 + ceil(log2 n) + 1."""
    return 2 + _window(p) + 1 + max(0, (n_terms - 1).bit_length()) + 1


def _window(p: ModelParams) -> int:
    """F of a path the kernel accepted (check_supported refuses exact blocks, which have none)."""
    F = p.window_frac_bits
    if F is None:
        raise TcsmtError("gemm kernel: exact blocks (no window) are not compiled")
    return F


def _decode(g, fmt, bits: np.ndarray, keep_sub: bool):
    """Decode a 2-D array of patterns once (compiled mirror of semantics.decode): the kernel's
    exponent, significand, sign, special-code and packed-word arrays."""
    shape = bits.shape
    e = np.empty(shape, np.int32)
    m = np.empty(shape, np.int32)
    n = np.empty(shape, np.uint8)
    sp = np.empty(shape, np.int8)
    w = np.empty(shape, np.int64)
    g.decode_into(np.ascontiguousarray(bits), fmt.pad_bits, fmt.exp_bits, fmt.frac_bits, fmt.bias,
                  fmt.specials == "fn", keep_sub, e, m, n, sp, w)
    return e, m, n, sp, w


def _config(p: ModelParams, K: int, g) -> np.ndarray:
    """The kernel's int64 configuration vector (slots ``g.CFG_*``) for ``p`` and depth K."""
    fin, fin_b, fout = get_format(p.in_fmt), get_format(p.b_format), get_format(p.out_fmt)
    instr_k = p.instr_k or K
    block_k = p.block_k or instr_k
    if p.out_fmt != p.acc_fmt and -(-K // instr_k) > 1:
        raise TcsmtError("gemm kernel does not support out_fmt != acc_fmt with several instructions "
                         f"(instr_k = {p.instr_k}, K = {K}): the output conversion between instructions is not compiled")
    if _sum_bits(p, min(block_k, K) + 1) > _INT64_SAFE_BITS:
        raise TcsmtError(f"gemm kernel: block sums of {block_k} products with F = {p.window_frac_bits} exceed int64")
    cfg = np.zeros(g.CFG_N, dtype=np.int64)
    cfg[g.CFG_F] = _window(p)
    cfg[g.CFG_F2] = fin.frac_bits + fin_b.frac_bits  # fraction bits of an exact product a*b
    cfg[g.CFG_HAS_FLOOR] = p.align_floor is not None
    cfg[g.CFG_FLOOR] = 0 if p.align_floor is None else int(p.align_floor)
    cfg[g.CFG_BLOCK_K] = block_k
    cfg[g.CFG_INSTR_K] = instr_k
    cfg[g.CFG_AFTER_INSTR] = p.c_mode == "after_instr"
    cfg[g.CFG_BLOCK_FRAC] = p.block_frac_bits
    cfg[g.CFG_BLOCK_ROUND] = _ROUND_CODE[p.block_round]
    cfg[g.CFG_C_ROUND] = _ROUND_CODE[p.c_round]
    cfg[g.CFG_OUT_ROUND] = _ROUND_CODE[p.out_round]
    cfg[g.CFG_SUB_C] = p.subnormal_c
    cfg[g.CFG_SUB_OUT] = p.subnormal_out
    cfg[g.CFG_OVF_INF] = p.overflow_result == "inf"
    cfg[g.CFG_ZERO_SIGN] = {"ieee": 0, "positive": 1, "plus": 2}[p.zero_sign]
    cfg[g.CFG_CONVERT_OUT] = p.out_fmt != p.acc_fmt
    cfg[g.CFG_OUT_EXP_BITS] = fout.exp_bits
    cfg[g.CFG_OUT_FRAC] = fout.frac_bits
    cfg[g.CFG_OUT_BIAS] = fout.bias
    cfg[g.CFG_C0_BITS] = 0  # C = +0
    cfg[g.CFG_TRUNC_ALIGN] = p.align == "trunc"
    return cfg


def _load_numba():
    try:
        from tcsmt.kernels import cpu_numba as gemm_numba
    except ImportError as exc:  # numba missing or broken: the caller falls back to the simulator
        raise TcsmtError(f"gemm kernel needs numba ({exc}); use the numpy simulator") from None
    return gemm_numba


def gemm(params: ModelParams, A_bits: np.ndarray, B_bits: np.ndarray, *, threads: int | None = None) -> np.ndarray:
    """D[i, j] = dot(A[i, :], B[:, j]) + (+0) under ``params``, as out_fmt bit patterns, shape (r, c).

    ``A_bits`` (r, K) holds in_fmt and ``B_bits`` (K, c) b_fmt bit patterns (in_fmt where b_fmt is unset; or exactly
    representable values, as :func:`tcsmt.sim.simulator.to_bits` accepts).
    ``threads`` caps the numba threads (default: all).  Raises TcsmtError for
    parameters outside :func:`check_supported`, bad shapes, or without numba.
    """
    A, Bm = np.asarray(A_bits), np.asarray(B_bits)
    if A.ndim != 2 or Bm.ndim != 2 or A.shape[1] != Bm.shape[0]:
        raise TcsmtError(f"gemm: A must be (r, K) and B (K, c) with the same K; got {A.shape} and {Bm.shape}")
    return _run(params, A, Bm, (A.shape[0], Bm.shape[1]), threads)


def pairs(params: ModelParams, A_bits: np.ndarray, B_bits: np.ndarray, *, C: np.ndarray | None = None,
          threads: int | None = None) -> np.ndarray:
    """D[i] = dot(A[i, :], B[:, i]) + C[i] under ``params``: one output per (row, column) pair, shape (n,).

    As :func:`gemm` (same checks and arithmetic), for A (n, K) and B (K, n) paired column by row.  ``C``
    (n,): patterns of ``params.c_fmt``, which must then be fp32 (TcsmtError otherwise; None: +0).
    """
    A, Bm = np.asarray(A_bits), np.asarray(B_bits)
    if A.ndim != 2 or Bm.ndim != 2 or A.shape[1] != Bm.shape[0] or A.shape[0] != Bm.shape[1]:
        raise TcsmtError(f"pairs: A must be (n, K) and B (K, n); got {A.shape} and {Bm.shape}")
    cvec = np.zeros(A.shape[0], np.int64)
    if C is not None:
        if params.c_fmt != "fp32":
            raise TcsmtError(f"gemm kernel takes C in fp32 only, not {params.c_fmt} (the chain decodes C as fp32)")
        cvec = to_bits(np.asarray(C), get_format("fp32"), "C").astype(np.int64).reshape(-1)
        if cvec.shape != (A.shape[0],):
            raise TcsmtError(f"pairs: C must hold one value per pair ({A.shape[0]}), got shape {np.shape(C)}")
    fin, fin_b = get_format(params.in_fmt), get_format(params.b_format)
    return pairs_of_patterns(params, to_bits(A, fin, "A"), to_bits(Bm, fin_b, "B").T, cvec, threads=threads)


def pairs_of_patterns(params: ModelParams, a_bits: np.ndarray, b_rows: np.ndarray, cvec: np.ndarray, *,
                      threads: int | None = None) -> np.ndarray:
    """:func:`pairs` on patterns already checked: ``a_bits`` (n, K) of in_fmt, ``b_rows`` (n, K) of B's format
    (row i is the column paired with row i of A), ``cvec`` (n,) fp32 C patterns (any integer type); the output
    format's patterns (n,).  The rows run through :func:`tcsmt.kernels.cpu_rows.pairs_rows` (compiled per
    operand type: the first call with a new one compiles for a few seconds, later processes load it from numba's
    cache), in :data:`PAIR_SLICE`-row slices on at most ``threads`` threads (default: numba's thread count; one
    slice: this thread).  No copy of the operands is made where they are C-contiguous."""
    check_supported(params)
    if a_bits.shape[1] == 0:
        raise TcsmtError("K must be at least 1")
    fin, fin_b, fout = get_format(params.in_fmt), get_format(params.b_format), get_format(params.out_fmt)
    g = _load_numba()
    from tcsmt.kernels import cpu_rows

    kernel: Any = cpu_rows.pairs_rows  # a numba dispatcher: its types are numba's, not its Python signature's
    cfg = _config(params, a_bits.shape[1], g)
    # two compiled versions only (16- and 32-bit operands; the output as fp32-wide patterns): 8-bit operands widen
    a_bits = np.ascontiguousarray(a_bits, dtype=np.uint16 if a_bits.dtype.itemsize < 2 else None)
    b_bits = np.ascontiguousarray(b_rows, dtype=np.uint16 if b_rows.dtype.itemsize < 2 else None)
    c_bits = np.ascontiguousarray(cvec, dtype=np.uint32)
    out = np.empty(a_bits.shape[0], dtype=np.uint32)
    n = out.size
    args: tuple[Any, ...] = (a_bits, _fmt_vector(fin), b_bits, _fmt_vector(fin_b), params.subnormal_in, cfg, c_bits, out)
    workers = min(_threads(threads), -(-n // PAIR_SLICE))
    if workers <= 1:
        if n:
            kernel(*args, 0, n)
        return out.astype(fout.dtype, copy=False)
    from concurrent.futures import ThreadPoolExecutor

    cuts = [n * t // workers for t in range(workers + 1)]
    with ThreadPoolExecutor(workers) as pool:  # the kernel releases the GIL
        list(pool.map(lambda t: kernel(*args, cuts[t], cuts[t + 1]), range(workers)))
    return out.astype(fout.dtype, copy=False)


PAIR_SLICE = 1 << 15
"""Rows below which :func:`pairs_of_patterns` adds no thread (a slice takes about 2 ms on one core)."""


def _threads(threads: int | None) -> int:
    """Threads for :func:`pairs_of_patterns`: ``threads`` (at least 1), or numba's thread count
    (``NUMBA_NUM_THREADS``, by default the CPUs), at most the CPUs this process may run on."""
    import numba

    cap = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]  # set from the environment at import; absent from numba's stubs
    want = cap if threads is None else max(1, min(int(threads), cap))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else want
    return max(1, min(want, cpus))


def _fmt_vector(fmt) -> np.ndarray:
    """(pad, exp_bits, frac_bits, bias, fn specials) of a format, as the fused kernel takes them."""
    return np.array([fmt.pad_bits, fmt.exp_bits, fmt.frac_bits, fmt.bias, fmt.specials == "fn"], dtype=np.int64)


def _run(params: ModelParams, A: np.ndarray, Bm: np.ndarray, shape: tuple[int, ...], threads: int | None) -> np.ndarray:
    """Decode A (rows) and B (columns) and run the compiled GEMM (``gemm_core``) into an int64 array of
    ``shape`` on at most ``threads`` numba threads; the output format's patterns."""
    check_supported(params)
    if A.shape[1] == 0:
        raise TcsmtError("K must be at least 1")
    fin, fin_b, fout = get_format(params.in_fmt), get_format(params.b_format), get_format(params.out_fmt)
    g = _load_numba()
    cfg = _config(params, A.shape[1], g)
    import numba
    a_bits = to_bits(A, fin, "A")
    b_bits = to_bits(Bm, fin_b, "B")
    out = np.empty(shape, dtype=np.int64)
    if out.size:
        old = numba.get_num_threads()
        n = old if threads is None else max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]  # set from the environment at import; absent from numba's stubs
        numba.set_num_threads(n)
        try:
            ae, am, an, asp, aw = _decode(g, fin, a_bits, params.subnormal_in)
            be, bm, bn, bsp, bw = _decode(g, fin_b, np.ascontiguousarray(b_bits.T), params.subnormal_in)
            g.gemm_core(ae, am, an, asp, aw, (asp != 0).any(axis=1), be, bm, bn, bsp, bw, (bsp != 0).any(axis=1),
                        cfg, out)
        finally:
            numba.set_num_threads(old)
    return out.astype(fout.dtype)
