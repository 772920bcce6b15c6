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


@lru_cache(maxsize=1)
def available() -> bool:
    """Whether CuPy runs here on a CUDA GPU (looked up once): the device paths of :mod:`tcsmt.library` use it."""
    try:
        _cupy()
    except TcsmtError:
        return False
    return True


@lru_cache(maxsize=16)
def _module(cfg: KernelConfig):
    cp = _cupy()
    return cp.RawModule(code=_source_path().read_text(), options=cfg.options())


@lru_cache(maxsize=1)
def _finish_module():
    """The source compiled with its default constants: the finish and conversion kernels read none of them."""
    cp = _cupy()
    return cp.RawModule(code=_source_path().read_text(), options=("-std=c++17",))


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


# ------------------------------------------------------------------------------ library finish
REDUCE_CODES = {"fp32_forward": 0, "pairwise": 1, "out_rounded": 2, "out_chain": 3, "out_chain_acc_add": 4}
"""The reductions of :func:`tcsmt.arith.semantics.reduce_partials` as the CUDA source numbers them."""
STEP_CODES = {"scale": 1, "alpha": 2, "beta_c": 3, "alpha_beta_c": 4, "bias": 5, "scale_b_then_a": 6,
              "out_round_c": 7}
"""The epilogue steps of :data:`tcsmt.library.plans.EPILOGUE_STEPS` as the CUDA source numbers them."""
MAX_PARTS = 64
"""Split-K partials a pairwise reduction may have (the tree's local array in the CUDA source)."""
ROUND_CODES = {"rz": 0, "rne": 1, "rna": 2}


def format_args(fmt: Format) -> tuple[int, int, int, int, int, int]:
    """(exp_bits, frac_bits, pad_bits, NaN, +inf, -inf) of an IEEE format the finish kernels take."""
    if fmt.specials != "ieee" or not fmt.has_inf or fmt.storage_bits > 32 or fmt.exp_bits > 8:
        raise TcsmtError(f"the GPU finish kernels take IEEE formats of at most 32 bits with infinities, not {fmt.name}")
    return (fmt.exp_bits, fmt.frac_bits, fmt.pad_bits, fmt.nan_pattern(), fmt.inf_pattern(False),
            fmt.inf_pattern(True))


def finish_arguments(parts, out_fmt: Format, reduce: str, steps, *, C=None, bias=None, scale_a=None,
                     scale_b=None, alpha: int = 0, beta: int = 0, xp=np) -> tuple[list, int, int]:
    """The flat arguments of the ``finish_outputs`` kernel (CUDA source) for S partials of shape (r, c),
    and (r, c); ``xp`` the array module (CuPy, or NumPy for the host build in the tests)."""
    from tcsmt.arith.formats import FP32

    S = len(parts)
    if S < 1 or (reduce == "pairwise" and S > MAX_PARTS):
        raise TcsmtError(f"the GPU finish kernel takes 1 split-K partial or more ({MAX_PARTS} at most for a "
                         f"pairwise reduction), not {S}")
    if reduce not in REDUCE_CODES:
        raise TcsmtError(f"the GPU finish kernel does not implement the reduction {reduce!r}")
    unknown = [s for s in steps if s not in STEP_CODES]
    if unknown or len(steps) > 7:
        raise TcsmtError(f"the GPU finish kernel does not implement the epilogue {tuple(steps)!r}")
    r, c = parts[0].shape
    n = r * c
    P = xp.ascontiguousarray(xp.stack([xp.asarray(q).reshape(r, c) for q in parts]).astype(xp.uint32))
    dummy = xp.zeros(1, dtype=xp.uint32)

    def u32(x, size):
        if x is None:
            return dummy
        a = xp.ascontiguousarray(xp.broadcast_to(xp.asarray(x).astype(xp.uint32), size))
        return a.reshape(-1)

    code = 0
    for t, step in enumerate(steps):
        code |= STEP_CODES[step] << (4 * t)
    sa = None if scale_a is None else xp.asarray(scale_a).reshape(-1)
    sb = None if scale_b is None else xp.asarray(scale_b).reshape(-1)
    oe, of, _, onan, opinf, oninf = format_args(out_fmt)
    _, _, _, fnan, fpinf, fninf = format_args(FP32)
    args = [P, np.int32(S), np.int64(n), np.int32(max(c, 1)), np.int32(REDUCE_CODES[reduce]), np.int32(oe),
            np.int32(of), np.uint32(onan), np.uint32(opinf), np.uint32(oninf), np.uint32(fnan), np.uint32(fpinf),
            np.uint32(fninf), u32(C, (r, c)), u32(bias, (c,)), u32(sa, sa.shape if sa is not None else (1,)),
            np.int32(1 if sa is None else sa.size), u32(sb, sb.shape if sb is not None else (1,)),
            np.int32(1 if sb is None else sb.size), np.uint32(alpha & 0xFFFFFFFF), np.uint32(beta & 0xFFFFFFFF),
            np.int32(code), np.int32(len(steps))]
    return args, r, c


def finish(parts, out_fmt: Format, reduce: str, steps, *, C=None, bias=None, scale_a=None, scale_b=None,
           alpha: int = 0, beta: int = 0):
    """The (r, c) output patterns (CuPy, ``out_fmt``'s dtype) of a library call from its split-K partials:
    what :func:`tcsmt.library.evaluate.evaluate` does after the K-chains, on the GPU.

    ``parts``: S CuPy arrays (r, c) of fp32 partial patterns; ``reduce`` a scheme of
    :func:`tcsmt.arith.semantics.reduce_partials`; ``steps`` the plan's epilogue; C (r, c) and bias (c,)
    fp32 patterns; scale_a and scale_b fp32 patterns (one value, or r / c values); alpha and beta the fp32
    patterns of the call's scalars.  Every step is one IEEE operation computed exactly on integers and
    rounded once (``finish_one`` in the CUDA source; tests/test_gemm_cuda_host.py ties it to the numpy
    path).
    """
    cp = _cupy()
    args, r, c = finish_arguments(parts, out_fmt, reduce, steps, C=C, bias=bias, scale_a=scale_a,
                                  scale_b=scale_b, alpha=alpha, beta=beta, xp=cp)
    out = cp.empty((r, c), dtype=cp.uint32)
    n = r * c
    if n:
        _finish_module().get_function("finish_outputs")(((n + 255) // 256,), (256,), (*args, out))
    return out.astype(out_fmt.dtype)


def convert_arguments(src: Format, dst: Format, mode: str) -> list:
    """The format and mode arguments of the ``convert_patterns`` kernel (CUDA source)."""
    if mode not in ROUND_CODES:
        raise TcsmtError(f"the GPU conversion kernel rounds with {', '.join(ROUND_CODES)}, not {mode!r}")
    se, sf, sp, snan, spinf, sninf = format_args(src)
    de, df, dp, dnan, dpinf, dninf = format_args(dst)
    return [np.int32(se), np.int32(sf), np.int32(sp), np.uint32(snan), np.uint32(spinf), np.uint32(sninf),
            np.int32(de), np.int32(df), np.int32(dp), np.uint32(dnan), np.uint32(dpinf), np.uint32(dninf),
            np.int32(ROUND_CODES[mode])]


def convert(bits, src: Format, dst: Format, mode: str):
    """``tcsmt.arith.semantics.convert(bits, src, dst, mode)`` on a CuPy array of patterns, on the GPU
    (``convert_patterns`` in the CUDA source): dst's dtype, the same shape."""
    cp = _cupy()
    args = convert_arguments(src, dst, mode)
    if src == dst:
        return cp.asarray(bits).astype(dst.dtype)
    a = cp.ascontiguousarray(cp.asarray(bits).astype(cp.uint32))
    out = cp.empty(a.shape, dtype=cp.uint32)
    if a.size:
        _finish_module().get_function("convert_patterns")(((a.size + 255) // 256,), (256,),
                                                         (a.reshape(-1), np.int64(a.size), *args, out.reshape(-1)))
    return out.astype(dst.dtype)
