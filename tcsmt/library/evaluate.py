"""Evaluate a library GEMM plan on some rows of A and columns of B (bit patterns in, bit patterns out).

For the (r, c) outputs asked for, in order:

0. where the plan has ``in_round`` (float32 inputs of a tf32 call), A and B
   converted to the chain's input format with that rounding
   (:func:`inputs_to_chain`; :func:`tcsmt.library.run` does this step);
1. each split-K slice's K-chain (a ``segment_k`` plan: the chains of each output's tile,
   :mod:`tcsmt.library.segment_k_eval`, at the call's output indices ``rows`` and ``cols``) (the plan's ``chain`` ModelParams, C = +0) on the
   slice's k's (with the plan's ``k_tile``: the residue-first zero products
   inserted, :func:`slice_operands`): fp32 partials; an empty slice gives +0.  With
   the plan's ``segment``, a chain from +0 per segment of the slice and the segment
   sums added serially in fp32 (:func:`segment_sum`).  The compiled kernels
   (``tcsmt.kernels.cuda.gemm`` on a CUDA GPU, ``tcsmt.kernels.cpu.gemm`` on the CPU) run it where
   present and supported; otherwise the numpy
   simulator, on tiles of rows x columns small enough that no more than
   :data:`MAX_ELEMENTS` products are held at once;
2. the partials reduced (:func:`tcsmt.arith.semantics.reduce_partials`);
3. the epilogue steps in fp32 (:data:`tcsmt.library.plans.EPILOGUE_STEPS`);
4. RNE to the output format.

Inputs that are CuPy arrays stay on their GPU (:func:`evaluate` returns a CuPy array): the chains run in
``tcsmt.kernels.cuda.gemm`` (a chain it does not implement runs on the CPU, its operands copied), steps 2-4 in
``tcsmt.kernels.cuda.finish`` and step 0 in ``tcsmt.kernels.cuda.convert``, each a second implementation of
the numpy steps here (:func:`finish_numpy`, :func:`inputs_to_chain`), tied to them bit for bit by
tests/test_gemm_cuda_host.py (the same CUDA source compiled for the host) and the device benchmark.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType

import numpy as np

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import FP32, FP64, Format, get_format
from tcsmt.arith.params import ModelParams, validate
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.errors import TcsmtError
from tcsmt.library.plans import TORCH_DTYPES, Plan
from tcsmt.library.segment_k_eval import check_problem, grid_partials, output_indices, pair_partials
from tcsmt.sim.simulator import simulate_params, to_bits

_gemm_kernel: ModuleType | None = importlib.import_module("tcsmt.kernels.cpu")
"""The compiled CPU kernel (numba, imported lazily inside it: without numba its calls raise TcsmtError and the
numpy simulator does the work)."""

_B = NumpyBackend()
IEEE32 = validate(ModelParams(in_fmt="fp32", out_fmt="fp32", name="IEEE 754 binary32 arithmetic"))
"""IEEE conventions for the library's own fp32 steps: +0 for exact cancellation, overflow to inf with RNE."""
MAX_ELEMENTS = 1 << 20
"""Products the numpy path holds at once (rows x columns x slice length of one tile)."""
MAX_OUTPUTS = 1 << 18
"""Outputs whose partials, reduction and epilogue are computed at once (rows x columns of one row block)."""
DEVICE_MAX_OUTPUTS = 1 << 26
"""The same on the GPU (partials and decoded operands of one row block stay in GPU memory)."""


def array_module(x) -> ModuleType:
    """CuPy for a CuPy array, NumPy for anything else."""
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def _on_device(x) -> bool:
    return array_module(x) is not np


def fmt_of(torch_name: str) -> Format:
    return get_format(TORCH_DTYPES[torch_name])


def _chain_numpy(p: ModelParams, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    r, K = A.shape
    c = B.shape[1]
    out = np.empty((r, c), dtype=np.uint32)
    per_pair = max(K, 1)
    cols = max(1, min(c, MAX_ELEMENTS // per_pair))
    rows = max(1, min(r, MAX_ELEMENTS // (per_pair * cols)))
    Bt = np.ascontiguousarray(B.T)
    for j0 in range(0, c, cols):
        j1 = min(c, j0 + cols)
        for i0 in range(0, r, rows):
            i1 = min(r, i0 + rows)
            a = np.repeat(A[i0:i1], j1 - j0, axis=0)
            b = np.tile(Bt[j0:j1], (i1 - i0, 1))
            d = simulate_params(p, a, b, np.zeros(len(a), dtype=np.uint32))
            out[i0:i1, j0:j1] = d.reshape(i1 - i0, j1 - j0)
    return out


def chain_gemm(p: ModelParams, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """(r, c) fp32 patterns of the K-chain ``p`` for every row of A (r, K) and column of B (K, c); K = 0 gives +0."""
    if A.shape[1] == 0:
        return np.zeros((A.shape[0], B.shape[1]), dtype=np.uint32)
    for kernel in _compiled_kernels():
        try:
            return np.asarray(kernel(p, A, B)).astype(np.uint32)
        except TcsmtError:
            pass  # a ModelParams (or a machine) the kernel does not support: the next one computes it
    return _chain_numpy(p, A, B)


_GPU_GEMM: list | None = None


def _compiled_kernels() -> list:
    """The compiled K-chain kernels to try, fastest first: the GPU kernel (``tcsmt.kernels.cuda``, where
    CuPy finds a CUDA GPU; looked up once), then the CPU kernel (``tcsmt.kernels.cpu``, where present)."""
    global _GPU_GEMM
    if _GPU_GEMM is None:
        _GPU_GEMM = []
        try:
            from tcsmt.kernels import cuda as gemm_cuda

            gemm_cuda._cupy()  # TcsmtError without CuPy or a GPU
            _GPU_GEMM.append(gemm_cuda.gemm)
        except TcsmtError:
            pass
    return _GPU_GEMM + ([_gemm_kernel.gemm] if _gemm_kernel is not None else [])


def inputs_to_chain(plan: Plan, bits: np.ndarray) -> np.ndarray:
    """Input patterns of the call's format (fp32 for tf32 calls) converted to the chain's input format with the
    plan's ``in_round`` (RNE / RNA / RZ at the chain format's fraction bits); unchanged without ``in_round``.
    A CuPy array is converted on its GPU (``tcsmt.kernels.cuda.convert``)."""
    if not plan.in_round:
        return bits
    src, dst = fmt_of(plan.call.a_dtype), get_format(plan.chain.in_fmt)
    if _on_device(bits):
        from tcsmt.kernels import cuda

        return cuda.convert(bits, src, dst, plan.in_round)
    out = np.asarray(sem.convert(_B, np.asarray(bits).astype(np.int64), src, dst, plan.in_round))
    return out.astype(dst.dtype).reshape(np.shape(bits))


def to_fp32(bits: np.ndarray, fmt: Format) -> np.ndarray:
    """Exact conversion to fp32 patterns (every fp16/bf16/fp32 value fits); int64.  A CuPy array is
    converted on its GPU (``tcsmt.kernels.cuda.convert``)."""
    if _on_device(bits):
        from tcsmt.kernels import cuda

        return cuda.convert(bits, fmt, FP32, "rne").astype(np.int64)
    return np.asarray(sem.convert(_B, bits, fmt, FP32, "rne")).astype(np.int64)


def _const32(x: float) -> int:
    """fp32 pattern of a host scalar: float(x) rounded to fp32 with RNE (as a C++ float conversion)."""
    b = np.array([np.float64(x)]).view(np.uint64)
    return int(np.asarray(sem.convert(_B, b, FP64, FP32, "rne"))[0])


def slice_operands(plan: Plan, A: np.ndarray, B: np.ndarray, ks: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """A (r, L) and B (L, c) of one slice's k's, with the plan's residue-first zero products: where
    ``k_tile`` is set and L mod k_tile = m is not 0, k_tile - m zero products (+0 patterns) follow the first m."""
    xp = array_module(A)
    if ks and ks[-1] - ks[0] == len(ks) - 1:  # consecutive k's (every slice rule but "interleaved"): views
        a, b = A[:, ks[0]:ks[-1] + 1], B[ks[0]:ks[-1] + 1, :]
    else:
        idx = xp.asarray(ks, dtype=xp.int64)
        a, b = A[:, idx], B[idx, :]
    m = len(ks) % plan.k_tile if plan.k_tile else 0
    if m:
        pad = plan.k_tile - m
        a = xp.concatenate([a[:, :m], xp.zeros((a.shape[0], pad), a.dtype), a[:, m:]], axis=1)
        b = xp.concatenate([b[:m], xp.zeros((pad, b.shape[1]), b.dtype), b[m:]], axis=0)
    return a, b

def segment_operands(plan: Plan, A: np.ndarray, B: np.ndarray,
                     ks: list[int]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The operands of each chain of one slice (k's ``ks``): (A (r, L), B (L, c)) of every segment of
    :meth:`tcsmt.library.plans.Plan.segments` in order, each as :func:`slice_operands` makes them (a plan without
    ``segment`` has one: the whole slice).  Each segment's chain starts from +0 (or the caller's initial value);
    the callers add the segment sums by :func:`segment_sum`."""
    for seg in plan.segments(ks):
        yield slice_operands(plan, A, B, seg)


def epilogue(plan: Plan, y: np.ndarray, *, C=None, bias=None, scale_a=None, scale_b=None,
             paired: bool = False) -> np.ndarray:
    """Apply the plan's epilogue steps to fp32 patterns y (r, c); operands are already fp32 patterns.

    ``paired``: y is (n, 1), one output per (row, column) pair, and the per-column operands (bias,
    row-wise scale_b) hold one value per pair, as the per-row ones do."""
    r, c = y.shape
    acc = y.astype(np.int64)

    def per_col(x):
        return x.reshape(-1, 1) if paired else x.reshape(1, -1)

    for step in plan.epilogue:
        if step == "scale":
            sa = np.broadcast_to(scale_a.reshape(-1, 1) if scale_a.size > 1 else scale_a.reshape(1, 1), (r, c))
            sb = np.broadcast_to(per_col(scale_b) if scale_b.size > 1 else scale_b.reshape(1, 1), (r, c))
            s = sem.mul_rounded(_B, IEEE32, np.ascontiguousarray(sa), np.ascontiguousarray(sb), FP32, "rne")
            acc = sem.fma_rounded(_B, IEEE32, acc, s, FP32, 0, FP32, FP32, "rne")
        elif step == "scale_b_then_a":
            sa = np.broadcast_to(scale_a.reshape(-1, 1) if scale_a.size > 1 else scale_a.reshape(1, 1), (r, c))
            sb = np.broadcast_to(per_col(scale_b) if scale_b.size > 1 else scale_b.reshape(1, 1), (r, c))
            acc = sem.mul_rounded(_B, IEEE32, acc, np.ascontiguousarray(sb), FP32, "rne")
            acc = sem.mul_rounded(_B, IEEE32, np.asarray(acc).astype(np.int64), np.ascontiguousarray(sa), FP32, "rne")
        elif step == "alpha":
            acc = sem.mul_rounded(_B, IEEE32, _const32(plan.call.alpha), acc, FP32, "rne")
        elif step == "beta_c":
            acc = sem.fma_rounded(_B, IEEE32, _const32(plan.call.beta), C, FP32, acc, FP32, FP32, "rne")
        elif step == "alpha_beta_c":
            bc = sem.mul_rounded(_B, IEEE32, _const32(plan.call.beta), C, FP32, "rne")
            acc = sem.fma_rounded(_B, IEEE32, _const32(plan.call.alpha), acc, FP32, bc, FP32, FP32, "rne")
        elif step == "out_round_c":
            acc = sem.add_rounded(_B, IEEE32, sem.round_through(_B, acc, FP32, fmt_of(plan.call.out_dtype), "rne"),
                                  FP32, C, FP32, FP32, "rne")
        elif step == "bias":
            acc = sem.add_rounded(_B, IEEE32, acc, FP32, np.broadcast_to(per_col(bias), (r, c)), FP32,
                                  FP32, "rne")
        else:
            raise TcsmtError(f"unknown epilogue step {step!r}")
        acc = np.asarray(acc).astype(np.int64)
    return acc


def evaluate(plan: Plan, A_bits: np.ndarray, B_bits: np.ndarray, *, C=None, bias=None, scale_a=None,
             scale_b=None, rows=None, cols=None) -> np.ndarray:
    """The (r, c) output patterns of the plan's call at rows A_bits (r, K) and columns B_bits (K, c).

    Inputs are already checked patterns (see :mod:`tcsmt.library`); C, bias and
    the scales are fp32 patterns (int64 arrays) of shapes (r, c), (c,), and
    (1,) or (r,) / (c,).  ``rows``, ``cols``: the call's indices of the rows and
    columns given, which a ``segment_k`` plan needs unless all are given.
    """
    r, c = A_bits.shape[0], B_bits.shape[1]
    device = _on_device(A_bits)
    xp = array_module(A_bits)
    if plan.segment_k is not None:
        check_problem(plan.segment_k, plan.call.M, plan.call.N, plan.call.K)
        rows, cols = output_indices(rows, r, plan.call.M, "rows"), output_indices(cols, c, plan.call.N, "cols")
        if device:  # the tile classes on the host (the CPU kernels), the result back on the GPU
            def host(x):
                return None if x is None else xp.asnumpy(x)
            return xp.asarray(evaluate(plan, host(A_bits), host(B_bits), C=host(C), bias=host(bias),
                                       scale_a=host(scale_a), scale_b=host(scale_b), rows=rows, cols=cols))
    rows_at, rows = rows, max(1, (DEVICE_MAX_OUTPUTS if device else MAX_OUTPUTS) // max(c, 1))
    if r > rows:  # row blocks: memory stays bounded by MAX_OUTPUTS outputs (and MAX_ELEMENTS products)
        row_scaled = scale_a is not None and scale_a.size > 1
        return xp.concatenate([
            evaluate(plan, A_bits[i:i + rows], B_bits, C=None if C is None else C[i:i + rows], bias=bias,
                     scale_a=scale_a[i:i + rows] if row_scaled else scale_a, scale_b=scale_b,
                     rows=None if plan.segment_k is None else rows_at[i:i + rows], cols=cols)
            for i in range(0, r, rows)])
    if device:
        return _evaluate_device(plan, A_bits, B_bits, C=C, bias=bias, scale_a=scale_a, scale_b=scale_b)
    if plan.segment_k is not None:
        parts = [grid_partials(plan.segment_k, plan.chain, A_bits, B_bits, rows_at, cols, chain_gemm)]
        return finish_numpy(plan, parts, C=C, bias=bias, scale_a=scale_a, scale_b=scale_b)
    parts = []
    for ks in plan.slice_ranges():
        runs = []
        for a, b in segment_operands(plan, A_bits, B_bits, ks):
            runs.append(chain_gemm(plan.chain, a, b).astype(np.int64))
        parts.append(segment_sum(runs))
    return finish_numpy(plan, parts, C=C, bias=bias, scale_a=scale_a, scale_b=scale_b)


def segment_sum(runs: list[np.ndarray]) -> np.ndarray:
    """One slice's partial from its segment sums (fp32 patterns, int64, one array per segment of
    :meth:`tcsmt.library.plans.Plan.segments`): r = S0, r = RN32(r + S_j) for j = 1, 2, ... (exact sums rounded once
    with RNE, IEEE conventions); one segment is returned as it is."""
    if len(runs) == 1:
        return runs[0]
    shape = runs[0].shape
    red, _fmt = sem.reduce_partials(_B, IEEE32, [r.reshape(-1) for r in runs], FP32, FP32, "fp32_forward")
    return np.asarray(red).astype(np.int64).reshape(shape)


def finish_numpy(plan: Plan, parts: list[np.ndarray], *, C=None, bias=None, scale_a=None,
                 scale_b=None) -> np.ndarray:
    """Steps 2-4 on numpy arrays: the (r, c) output patterns from the S partials (r, c) (fp32 patterns) of
    the plan's slices; C, bias and scales as :func:`evaluate` takes them."""
    r, c = parts[0].shape
    out_fmt = fmt_of(plan.call.out_dtype)
    flat = [np.asarray(q).astype(np.int64).reshape(-1) for q in parts]
    red, red_fmt = sem.reduce_partials(_B, IEEE32, flat, FP32, out_fmt, plan.reduce)
    y = np.asarray(red).astype(np.int64).reshape(r, c)
    if red_fmt != FP32:
        y = to_fp32(y, red_fmt)
    y = epilogue(plan, y, C=C, bias=bias, scale_a=scale_a, scale_b=scale_b)
    if out_fmt != FP32:
        y = np.asarray(sem.convert(_B, y, FP32, out_fmt, "rne"))
    return np.asarray(y).astype(out_fmt.dtype).reshape(r, c)


def _evaluate_device(plan: Plan, A_bits, B_bits, *, C=None, bias=None, scale_a=None, scale_b=None):
    """:func:`evaluate` on CuPy arrays, on their GPU: the chains in ``tcsmt.kernels.cuda.gemm`` (a chain it
    does not implement on the CPU, its operands copied there and back), steps 2-4 in
    ``tcsmt.kernels.cuda.finish``; returns a CuPy array."""
    from tcsmt.kernels import cuda

    cp = cuda._cupy()
    with cp.cuda.Device(A_bits.device.id):
        parts = []
        for ks in plan.slice_ranges():
            runs = []
            for a, b in segment_operands(plan, A_bits, B_bits, ks):
                if a.shape[1] == 0:
                    runs.append(cp.zeros((a.shape[0], b.shape[1]), dtype=cp.uint32))
                    continue
                try:
                    runs.append(cuda.gemm(plan.chain, a, b))
                except TcsmtError:  # a chain the GPU kernel does not implement: the CPU computes it
                    runs.append(cp.asarray(chain_gemm(plan.chain, cp.asnumpy(a), cp.asnumpy(b))))
            # a slice's segment sums added serially in fp32: the finish kernel's fp32_forward with no epilogue
            parts.append(runs[0] if len(runs) == 1 else cuda.finish(runs, FP32, "fp32_forward", ()))
        try:
            return cuda.finish(parts, fmt_of(plan.call.out_dtype), plan.reduce, plan.epilogue, C=C, bias=bias,
                               scale_a=scale_a, scale_b=scale_b, alpha=_const32(plan.call.alpha),
                               beta=_const32(plan.call.beta))
        except TcsmtError:  # a finish the GPU kernel does not implement: the numpy steps on the host
            def host(x):
                return None if x is None else cp.asnumpy(x)

            return cp.asarray(finish_numpy(plan, [cp.asnumpy(q) for q in parts], C=host(C), bias=host(bias),
                                           scale_a=host(scale_a), scale_b=host(scale_b)))


def chain_pairs(p: ModelParams, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """(n,) fp32 patterns of the K-chain ``p`` for row i of A (n, K) with column i of B (K, n); K = 0 gives +0."""
    n = A.shape[0]
    if A.shape[1] == 0:
        return np.zeros(n, dtype=np.uint32)
    if _gemm_kernel is not None:
        try:
            return np.asarray(_gemm_kernel.pairs(p, A, B)).astype(np.uint32)
        except TcsmtError:
            pass  # a ModelParams the kernel does not support: the simulator computes it
    return np.asarray(simulate_params(p, A, np.ascontiguousarray(B.T), np.zeros(n, dtype=np.uint32))).astype(np.uint32)


def evaluate_pairs(plan: Plan, A_bits: np.ndarray, B_bits: np.ndarray, *, C=None, bias=None, scale_a=None,
                   scale_b=None, rows=None, cols=None) -> np.ndarray:
    """The (n,) output patterns of the plan's call at the pairs (row i of A_bits (n, K), column i of B_bits
    (K, n)): the arithmetic of :func:`evaluate`, one output per pair.  C, bias and the scales are fp32
    patterns (int64) of shapes (n,), or (1,) for per-tensor scales; ``rows``, ``cols``: each pair's output
    indices in the call (a ``segment_k`` plan needs them)."""
    n = A_bits.shape[0]
    parts = []
    if plan.segment_k is not None:
        if rows is None or cols is None:
            raise TcsmtError("a segment-K plan computes each output by its tile: pass rows= and cols= (each pair's "
                             "output indices in the call)")
        check_problem(plan.segment_k, plan.call.M, plan.call.N, plan.call.K)
        rows, cols = output_indices(rows, n, plan.call.M, "rows"), output_indices(cols, n, plan.call.N, "cols")
        parts.append(pair_partials(plan.segment_k, plan.chain, A_bits, B_bits, rows, cols, chain_pairs))
    for ks in plan.slice_ranges() if plan.segment_k is None else ():
        runs = []
        for a, b in segment_operands(plan, A_bits, B_bits, ks):
            runs.append(chain_pairs(plan.chain, a, b).astype(np.int64))
        parts.append(segment_sum(runs))
    out_fmt = fmt_of(plan.call.out_dtype)
    red, red_fmt = sem.reduce_partials(_B, IEEE32, parts, FP32, out_fmt, plan.reduce)
    y = np.asarray(red).astype(np.int64).reshape(n, 1)
    if red_fmt != FP32:
        y = to_fp32(y, red_fmt)
    y = epilogue(plan, y, C=None if C is None else np.asarray(C).reshape(n, 1), bias=bias, scale_a=scale_a,
                 scale_b=scale_b, paired=True)
    if out_fmt != FP32:
        y = np.asarray(sem.convert(_B, y, FP32, out_fmt, "rne"))
    return np.asarray(y).astype(out_fmt.dtype).reshape(n)


def checked_bits(x, fmt: Format, what: str) -> np.ndarray:
    """Bit patterns of ``fmt`` from a numpy array (patterns or exactly representable values).

    A CuPy array of unsigned patterns of the format's width, in a format without pad bits, stays on its
    GPU (every such pattern is one of the format); any other CuPy array is checked on the host and copied
    back."""
    if _on_device(x):
        xp = array_module(x)
        if x.dtype.kind == "u" and x.dtype.itemsize == fmt.dtype.itemsize and not fmt.pad_bits:
            return x.view(fmt.dtype)
        return xp.asarray(to_bits(xp.asnumpy(x), fmt, what))
    return to_bits(x, fmt, what)  # (masked arrays are refused there unless nothing is masked)
