"""GPU back end for library GEMM chains: every output of an (r, K) x (K, c) product in one CUDA launch.

:func:`gemm` computes, for every row ``A_bits[i]`` and column ``B_bits[:, j]``, exactly
``tcsmt.sim.simulator.simulate_params(params, A_bits[i], B_bits[:, j], +0)``: the chain of
:func:`tcsmt.arith.semantics.dot` over blocks from :func:`tcsmt.arith.semantics.groups`, each block as
:func:`tcsmt.arith.semantics.block_fma` computes it (:func:`~tcsmt.arith.semantics.block_terms`,
:func:`~tcsmt.arith.semantics.block_sum`, :func:`~tcsmt.arith.semantics.sum_and_round` with
:func:`~tcsmt.arith.semantics.round_to`, :func:`~tcsmt.arith.semantics.apply_flags`), the promotion of
``c_mode = "after_instr"`` as :func:`tcsmt.arith.semantics.add_rounded`, and the output conversion as
:func:`tcsmt.arith.semantics.convert`.  It is a second implementation of those functions, written for
speed in CUDA (``tcsmt/hwcheck/gemm_emulation.cu``, shipped as package data ``tcsmt.hwcheck``, compiled
at run time by NVRTC through CuPy for the GPU in use); the tests (tests/test_gemm_cuda.py) tie the
two together on random and special inputs of every supported path.

The arithmetic is exact integer arithmetic (int32 products and block sums, int64 where C and the
promotion join); no floating-point operation takes part.  Per block of ``block_k`` products:

1. E = max(align_floor, C's exponent, ea + eb of every non-zero product);
2. every product ``sa * sb`` (``|sa| << (F - 2f)`` precomputed, so the product lies on the grid
   2^(ea + eb - F)) is truncated in magnitude onto the grid 2^(E - F) and summed with its sign;
   the host checks that ``block_k`` such terms fit in int32;
3. C (the accumulator) is truncated onto the same grid and added; the sum is rounded toward zero
   to ``block_frac_bits`` fraction bits in fp32's range (an overflow gives inf, a non-zero sum
   that truncates to zero gives +0).

Supported: the chained library paths of the Hopper model (``library = true`` in models/hopper.toml:
``cublas`` fp16/bf16/tf32 -> fp32, fp16 -> fp16, ``scaled_mm_fast`` and ``scaled_mm`` for e4m3,
and e5m2 likewise).  :func:`check_supported` names every other field value with a TcsmtError, on
which the caller falls back to the CPU.  C is +0 (library chains take no C), so no -0 can arise
before the output conversion.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from tcsmt.arith.formats import Format, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.errors import TcsmtError


def _source_path() -> Path:
    """tcsmt/hwcheck/gemm_emulation.cu (package data of ``tcsmt.hwcheck``)."""
    cand = Path(__file__).resolve().parent.parent / "hwcheck" / "gemm_emulation.cu"
    if cand.is_file():
        return cand
    raise TcsmtError("the CUDA source gemm_emulation.cu is missing from this installation (tcsmt.hwcheck package data)")
TILE_M = 64
TILE_N = 64
K_TILE = 32
"""The kernel's tile: 64 x 64 outputs per block of 256 threads, 32 k per shared-memory stage
(TM x TY, TN x TX and KT in the CUDA source); A and B are zero-padded to these multiples, which
changes no output (a zero product is left out of E and adds 0; an all-zero block or run returns
its C unchanged)."""
BLOCK_KS = (1, 2, 4, 8, 16, 32)
"""block_k values the kernel takes (divisors of K_TILE)."""


@dataclass(frozen=True)
class KernelConfig:
    """The compile-time constants of one ModelParams (the -D options of the CUDA source)."""

    block_k: int
    window_frac_bits: int
    block_frac_bits: int
    align_floor: int | None
    instr_k: int
    after_instr: bool
    out_frac_bits: int
    out_exp_bits: int
    sig_shift: int
    """A's significands are shifted left by F - 2f, so that sa * sb lies on the grid 2^(top - F)."""

    def options(self) -> tuple[str, ...]:
        opts = [f"-DBK={self.block_k}", f"-DF_BITS={self.window_frac_bits}", f"-DFB={self.block_frac_bits}",
                f"-DHAS_FLOOR={int(self.align_floor is not None)}", f"-DALIGN_FLOOR=({self.align_floor or 0})",
                f"-DAFTER_INSTR={int(self.after_instr)}", f"-DINSTR_K={self.instr_k}",
                f"-DOUT_FRAC={self.out_frac_bits}", f"-DOUT_EXPB={self.out_exp_bits}"]
        return ("-std=c++17", "-lineinfo", *opts)


def _require(ok: bool, field: str, value: Any, supported: str) -> None:
    if not ok:
        raise TcsmtError(f"the GPU GEMM kernel does not implement {field} = {value!r} (it implements {supported})")


def check_supported(p: ModelParams) -> KernelConfig:
    """The kernel configuration for ``p``, or TcsmtError naming the first field value it does not implement.

    Checked field by field against what ``tcsmt/hwcheck/gemm_emulation.cu`` computes.
    """
    if not isinstance(p, ModelParams):
        raise TcsmtError(f"gemm needs ModelParams (from tcsmt.resolve), not {type(p).__name__}")
    fin = get_format(p.in_fmt)
    _require(fin.storage_bits <= 32 and fin.exp_bits <= 8 and fin.frac_bits <= 10, "in_fmt", p.in_fmt,
             "formats of at most 8 exponent and 10 fraction bits: fp16, bf16, tf32, e4m3, e5m2")
    _require(p.operand_fmt == "", "operand_fmt", p.operand_fmt, "'' (no operand conversion)")
    _require(p.b_fmt in ("", p.in_fmt), "b_fmt", p.b_fmt, "A's format (one input format)")
    _require(p.zero_exponent is None, "zero_exponent", p.zero_exponent, "None (zeros stay out of the alignment)")
    _require(p.product_inf is None, "product_inf", p.product_inf, "None (products never overflow)")
    _require(p.product_groups == 1, "product_groups", p.product_groups, "1 (one window per block)")
    _require(p.acc_fmt == "fp32", "acc_fmt", p.acc_fmt, "'fp32'")
    fout = get_format(p.out_fmt)
    _require(fout.specials == "ieee" and fout.pad_bits == 0 and fout.exp_bits <= 8 and fout.storage_bits in (16, 32),
             "out_fmt", p.out_fmt, "fp32, fp16 or bf16")
    _require(p.reduction == "chain", "reduction", p.reduction, "'chain'")
    _require(p.product_exponent == "raw", "product_exponent", p.product_exponent, "'raw'")
    _require(p.c_mode in ("aligned", "after_instr"), "c_mode", p.c_mode, "'aligned' or 'after_instr'")
    _require(p.block_k in BLOCK_KS, "block_k", p.block_k, f"one of {BLOCK_KS}")
    _require(p.block_interleave == 0 or p.block_interleave == p.block_k, "block_interleave", p.block_interleave,
             "0 (contiguous blocks)")
    if p.c_mode == "after_instr":
        _require(p.instr_k > 0 and p.instr_k % p.block_k == 0, "instr_k", p.instr_k,
                 "a multiple of block_k with c_mode 'after_instr'")
        _require(p.c_round == "rne", "c_round", p.c_round, "'rne'")
        _require(p.out_fmt == p.acc_fmt, "out_fmt", p.out_fmt, "the accumulator format with c_mode 'after_instr'")
    else:
        _require(p.instr_k == 0 or p.out_fmt == p.acc_fmt, "instr_k", p.instr_k,
                 "0 (one chain over K) when the output format differs from the accumulator's")
    _require(p.extra_bits != "exact", "extra_bits", p.extra_bits, "an integer (a finite window)")
    F = p.window_frac_bits
    assert F is not None
    c0 = F - 2 * fin.frac_bits
    _require(0 <= c0 and F <= 31, "extra_bits", p.extra_bits,
             f"windows of {2 * fin.frac_bits}..31 fraction bits for {fin.name}")
    # step 2's int32 sum: block_k products, each below (2^(f+1) - 1)^2 * 2^c0
    bound = p.block_k * ((((1 << (fin.frac_bits + 1)) - 1) ** 2) << c0)
    _require(bound < 1 << 31, "block_k", p.block_k, f"blocks whose sum fits in int32 ({bound} >= 2^31)")
    _require(p.align == "trunc", "align", p.align, "'trunc'")
    _require(not p.b_fmt, "b_fmt", p.b_fmt, "'' (one input format)")
    _require(p.zero_exponent is None, "zero_exponent", p.zero_exponent, "None (zeros outside the maximum)")
    _require(p.product_inf is None, "product_inf", p.product_inf, "None (products never overflow)")
    _require(p.carry_bits == "unbounded", "carry_bits", p.carry_bits, "'unbounded'")
    _require(p.block_round == "rz", "block_round", p.block_round, "'rz'")
    _require(p.out_fmt == p.acc_fmt or p.out_round == "rne", "out_round", p.out_round, "'rne'")
    for key in ("subnormal_in", "subnormal_c", "subnormal_out"):
        _require(getattr(p, key) is True, key, getattr(p, key), "True (subnormals kept)")
    _require(p.overflow_result == "inf", "overflow_result", p.overflow_result, "'inf'")
    # With C = +0, RZ blocks and no flushing, no -0 arises: an exact cancellation is +0 under RZ, and a sum of
    # zeros includes C's +0; so "positive" and "plus" (every zero +0) give the same bits here.
    _require(p.zero_sign in ("positive", "plus"), "zero_sign", p.zero_sign, "'positive' or 'plus'")
    return KernelConfig(block_k=p.block_k, window_frac_bits=F, block_frac_bits=p.block_frac_bits,
                        align_floor=p.align_floor, instr_k=p.instr_k, after_instr=p.c_mode == "after_instr",
                        out_frac_bits=fout.frac_bits, out_exp_bits=fout.exp_bits, sig_shift=c0)


def _cupy():
    try:
        import cupy
    except ImportError as exc:
        raise TcsmtError("the GPU GEMM kernel needs CuPy (pip install 'tcsmt[cuda13]')") from exc
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise TcsmtError("the GPU GEMM kernel needs a CUDA GPU; none was found")
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        raise TcsmtError(f"the GPU GEMM kernel needs a CUDA GPU: {exc}") from exc
    return cupy


@lru_cache(maxsize=16)
def _module(cfg: KernelConfig):
    cp = _cupy()
    return cp.RawModule(code=_source_path().read_text(), options=cfg.options())


def _checked_bits(x, fmt: Format, what: str, xp):
    a = xp.asarray(x)
    if a.ndim != 2:
        raise TcsmtError(f"{what} must be a 2-D array of {fmt.name} bit patterns, not {a.ndim}-D")
    if a.dtype.kind not in "ui":
        raise TcsmtError(f"{what} must hold {fmt.name} bit patterns as integers, not {a.dtype}")
    if a.size and (int(a.min()) < 0 or int(a.max()) >= 1 << fmt.storage_bits):
        raise TcsmtError(f"{what} holds values that are not {fmt.storage_bits}-bit {fmt.name} patterns")
    if fmt.pad_bits and a.size and bool(xp.any((a.astype(xp.uint32) & ((1 << fmt.pad_bits) - 1)) != 0)):
        raise TcsmtError(f"{what} holds {fmt.name} patterns with non-zero low {fmt.pad_bits} bits")
    return a.astype(xp.uint32)


def _decode(cp, mod, bits, fmt: Format, sig_shift: int, transpose: bool, out_rows: int, out_cols: int):
    """Decoded (sig, exp) pairs as an int32 (out_rows, out_cols, 2) array (zero padding) and the classes."""
    rows, cols = bits.shape
    dec = cp.empty((out_rows, out_cols, 2), dtype=cp.int32)
    dec[..., 0] = 0
    dec[..., 1] = -1024  # ZERO_EXP
    cls = cp.zeros((out_rows, out_cols), dtype=cp.uint8)
    n = rows * cols
    if n:
        bias = (1 << (fmt.exp_bits - 1)) - 1
        kern = mod.get_function("decode_operands")
        kern(((n + 255) // 256,), (256,),
             (cp.ascontiguousarray(bits), np.int32(n), np.int32(rows), np.int32(cols), np.int32(int(transpose)),
              np.int32(fmt.exp_bits), np.int32(fmt.frac_bits), np.int32(fmt.pad_bits), np.int32(bias),
              np.int32(int(fmt.specials == "fn")), np.int32(sig_shift), dec, cls, np.int32(out_rows),
              np.int32(out_cols)))
    return dec, cls


def _round_up(n: int, m: int) -> int:
    return max(m, -(-n // m) * m)


def gemm(params: ModelParams, A_bits, B_bits):
    """The (r, c) output patterns of the chain ``params`` (C = +0) for every row of ``A_bits`` (r, K)
    and column of ``B_bits`` (K, c), bit patterns of ``params.in_fmt``.

    CuPy arrays in give a CuPy array out; NumPy arrays in (copied to the GPU) give a NumPy array.
    The output dtype is the output format's (uint32 for fp32, uint16 for fp16/bf16).
    TcsmtError for a ModelParams field value the kernel does not implement (:func:`check_supported`),
    for bad inputs, or without CuPy or a GPU.
    """
    cfg = check_supported(params)
    cp = _cupy()
    on_host = not (isinstance(A_bits, cp.ndarray) or isinstance(B_bits, cp.ndarray))
    fin, fout = get_format(params.in_fmt), get_format(params.out_fmt)
    A = _checked_bits(A_bits, fin, "A_bits", cp)
    B = _checked_bits(B_bits, fin, "B_bits", cp)
    r, K = A.shape
    if B.shape[0] != K:
        raise TcsmtError(f"A_bits is (r, K) = {A.shape} and B_bits (K, c) = {B.shape}: their K differ")
    c = B.shape[1]
    out = cp.zeros((r, c), dtype=cp.uint32)
    if r and c and K:
        mod = _module(cfg)
        Mp, Np, Kp = _round_up(r, TILE_M), _round_up(c, TILE_N), _round_up(K, K_TILE)
        Ad, Acls = _decode(cp, mod, A, fin, cfg.sig_shift, True, Kp, Mp)
        Bd, Bcls = _decode(cp, mod, B, fin, 0, False, Kp, Np)
        mod.get_function("gemm_chain")((Np // TILE_N, Mp // TILE_M), (16, 16),
                                       (Ad, Bd, np.int32(r), np.int32(c), np.int32(Mp), np.int32(Np), np.int32(Kp),
                                        out, np.int32(c)))
        row_special = (Acls != 0).any(axis=0).astype(cp.uint8)
        col_special = (Bcls != 0).any(axis=0).astype(cp.uint8)
        if bool(row_special.any()) or bool(col_special.any()):
            mod.get_function("gemm_specials")(((c + 127) // 128, r), (128,),
                                              (Ad, Bd, Acls, Bcls, row_special, col_special, np.int32(r), np.int32(c),
                                               np.int32(Mp), np.int32(Np), np.int32(Kp), out, np.int32(c)))
    res = out.astype(fout.dtype)
    return cp.asnumpy(res) if on_host else res
