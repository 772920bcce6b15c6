"""Library GEMM paths: the cuBLAS calls a PyTorch user makes, run on tiles of bit patterns.

One tile ``t`` is one GEMM ``D[t] = A[t] @ B[t]^T`` with ``A[t]`` of shape
(m, K) and ``B[t]`` of shape (n, K); the library picks the kernel (on Hopper,
``wgmma`` tiles chained over K) and these calls take no C.  The calls:

``mm_out_fp32``           ``torch.mm(A, B.T, out_dtype=torch.float32)`` (fp16/bf16 in, fp32 out)
``mm``                    ``torch.mm(A, B.T)`` (fp16 in, fp16 out)
``mm_tf32``               ``torch.mm(A, B.T)`` on fp32 tensors holding tf32 values, with
                          ``torch.backends.cuda.matmul.allow_tf32 = True``
``scaled_mm``             ``torch._scaled_mm(A, B.T, scale_a=1, scale_b=1, out_dtype=torch.float32)``
                          (fp8 in; cuBLAS without fast accumulation)
``scaled_mm_fast_accum``  the same with ``use_fast_accum=True``

Bit patterns travel as same-width signed integers and are reinterpreted
(``Tensor.view(dtype)``), so no value is ever converted on the way.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.paths import PathSpec

_INT_OF_WIDTH = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}
_TORCH_FLOAT = {"fp16": "float16", "bf16": "bfloat16", "tf32": "float32", "fp32": "float32", "fp64": "float64",
                "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}
CALLS = ("mm_out_fp32", "mm", "mm_tf32", "scaled_mm", "scaled_mm_fast_accum")


def import_torch():
    """The torch module if it has CUDA, else a TcsmtError saying why not."""
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install
        raise TcsmtError(f"library GEMM paths need PyTorch with CUDA ({type(exc).__name__}: {exc})") from None
    if not torch.cuda.is_available():
        raise TcsmtError("library GEMM paths need PyTorch with CUDA; torch.cuda.is_available() is False")
    return torch


def unsupported(spec: PathSpec) -> str | None:
    """None when this PyTorch can make the call of ``spec``, else why not."""
    try:
        torch = import_torch()
    except TcsmtError as exc:
        return str(exc)
    if spec.kernel.startswith("scaled_mm") and not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no torch._scaled_mm"
    if not hasattr(torch, _TORCH_FLOAT[spec.in_fmt]):
        return f"torch {torch.__version__} has no {_TORCH_FLOAT[spec.in_fmt]} dtype"
    return None


def info() -> dict[str, Any]:
    """PyTorch, its CUDA and cuBLAS versions, and the matmul settings that change results."""
    try:
        torch = import_torch()
    except TcsmtError as exc:
        return {"torch": None, "why": str(exc)}
    out: dict[str, Any] = {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
                           "allow_fp16_reduced_precision_reduction":
                               bool(torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction),
                           "allow_bf16_reduced_precision_reduction":
                               bool(torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction)}
    try:
        from importlib import metadata

        names = [d.metadata["Name"] for d in metadata.distributions() if "cublas" in (d.metadata["Name"] or "").lower()]
        out["cublas_packages"] = {n: metadata.version(n) for n in sorted(set(names))}
    except Exception:  # information only
        pass
    return out


def _to_torch(torch, bits, fmt_name: str, device):
    """A torch tensor on ``device`` of format ``fmt_name`` holding exactly the bit patterns ``bits``."""
    if isinstance(bits, np.ndarray):
        ints = torch.from_numpy(np.ascontiguousarray(bits).view(_INT_OF_WIDTH[bits.dtype.itemsize]))
    else:  # a CuPy array: shared through DLPack, no copy to the host
        ints = torch.from_dlpack(bits.view(_INT_OF_WIDTH[bits.dtype.itemsize]))
    return ints.to(device).view(getattr(torch, _TORCH_FLOAT[fmt_name]))


def _gemm(torch, call: str, A, B):
    """One library call D = A @ B.T with A (m, K), B (n, K)."""
    if call == "mm_out_fp32":
        try:
            return torch.mm(A, B.t(), out_dtype=torch.float32)
        except TypeError:
            raise TcsmtError(f"torch {torch.__version__}: torch.mm takes no out_dtype (fp16/bf16 -> fp32 "
                             "GEMMs need a newer PyTorch)") from None
    if call == "mm":
        return torch.mm(A, B.t())
    if call == "mm_tf32":
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return torch.mm(A, B.t())
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
    if call in ("scaled_mm", "scaled_mm_fast_accum"):
        one = torch.ones((), dtype=torch.float32, device=A.device)
        out = torch._scaled_mm(A, B.t(), scale_a=one, scale_b=one, out_dtype=torch.float32,
                               use_fast_accum=call == "scaled_mm_fast_accum")
        return out[0] if isinstance(out, tuple) else out
    raise TcsmtError(f"unknown library call {call!r} (known: {', '.join(CALLS)})")


def run_tiles(spec: PathSpec, a, b, ordinal: int = 0) -> np.ndarray:
    """d (T, m, n) output bit patterns of one library GEMM per tile (a (T, m, K), b (T, n, K); C is +0).

    ``a`` and ``b`` are NumPy or CuPy arrays of the input format's patterns;
    the result is a NumPy array of the output format's patterns.
    """
    torch = import_torch()
    device = torch.device("cuda", ordinal)
    out_int = getattr(torch, _INT_OF_WIDTH[spec.fout.dtype.itemsize])
    tiles = []
    try:
        for t in range(a.shape[0]):
            A = _to_torch(torch, a[t], spec.in_fmt, device)
            B = _to_torch(torch, b[t], spec.in_fmt, device)
            D = _gemm(torch, spec.kernel, A, B)
            if D.dtype != getattr(torch, _TORCH_FLOAT[spec.out_fmt]):
                raise TcsmtError(f"{spec.kernel} returned {D.dtype}, not the path's {spec.out_fmt}")
            tiles.append(D.contiguous().view(out_int).cpu().numpy())
    except TcsmtError:
        raise
    except Exception as exc:  # cuBLAS refusing a shape or type shows up as RuntimeError
        msg = " ".join(str(exc).split())[:400]
        raise TcsmtError(f"library call {spec.kernel} for {spec.label} failed: {type(exc).__name__}: {msg}") from None
    return np.stack(tiles).view(spec.fout.dtype)
