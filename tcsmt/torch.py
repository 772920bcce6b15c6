"""The torch facade: ``mm``, ``matmul``, ``addmm``, ``linear``, ``bmm``, ``scaled_mm`` with torch's own arguments.

Each takes torch tensors (CPU or CUDA), emulates what the GPU's library returns
for that call under its recorded plan (:mod:`tcsmt.library`), and returns a
tensor of torch's output dtype on the input's device.  Tensors travel as bit
patterns (``Tensor.view`` of a same-width integer dtype): no value is converted
on the way.  torch is optional: without it these functions raise TcsmtError.
Extra keywords: ``gpu`` (default ``"h100"``) and ``plan`` (a Plan to use instead
of the recorded one).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.library import api as _lib
from tcsmt.library.plans import Plan
from tcsmt.library.tensors import bits_tensor, dtype_name, import_torch, tensor_bits

__all__ = ["addmm", "bmm", "linear", "matmul", "mm", "scaled_mm"]


def _tensors(**named: Any) -> None:
    """Each argument must be a torch.Tensor (None is left to the function): a TcsmtError naming it otherwise."""
    torch = import_torch()
    for what, x in named.items():
        if x is not None and not isinstance(x, torch.Tensor):
            raise TcsmtError(f"{what} must be a torch.Tensor, not {type(x).__name__}")


def _out_dtype(x: Any) -> str | None:
    return None if x is None else str(x).removeprefix("torch.")


def _tf32(torch, dtype: str) -> bool:
    return dtype == "float32" and bool(torch.backends.cuda.matmul.allow_tf32)


def _same_dtype(a: Any, b: Any) -> str:
    da, db = dtype_name(a), dtype_name(b)
    if da != db:
        raise TcsmtError(f"torch refuses this call: expected mat1 and mat2 to have the same dtype, but got: {da} != {db}")
    return da


def _back(bits: np.ndarray, like: Any, out_dtype: str | None, dtype: str) -> Any:
    return bits_tensor(bits, out_dtype or dtype, like.device)


def mm(input: Any, mat2: Any, *, out_dtype: Any = None, gpu: str = "h100", plan: Plan | None = None) -> Any:
    """``torch.mm(input, mat2, out_dtype=...)`` as the GPU's library computes it."""
    torch = import_torch()
    _tensors(input=input, mat2=mat2)
    dt = _same_dtype(input, mat2)
    od = _out_dtype(out_dtype)
    out = _lib.mm(tensor_bits(input), tensor_bits(mat2), dtype=dt, out_dtype=od, tf32=_tf32(torch, dt), gpu=gpu,
                  plan=plan)
    return _back(out, input, od, dt)


def bmm(input: Any, mat2: Any, *, out_dtype: Any = None, gpu: str = "h100", plan: Plan | None = None) -> Any:
    """``torch.bmm(input, mat2)``: (b, M, K) x (b, K, N)."""
    _tensors(input=input, mat2=mat2)
    dt = _same_dtype(input, mat2)
    od = _out_dtype(out_dtype)
    out = _lib.bmm(tensor_bits(input), tensor_bits(mat2), dtype=dt, out_dtype=od, gpu=gpu, plan=plan)
    return _back(out, input, od, dt)


def matmul(input: Any, other: Any, *, gpu: str = "h100", plan: Plan | None = None) -> Any:
    """``torch.matmul`` for 2-D @ 2-D (mm), 3-D @ 3-D (bmm) and N-D @ 2-D (rows folded into one mm, as torch does)."""
    _tensors(input=input, other=other)
    if input.dim() == 2 and other.dim() == 2:
        return mm(input, other, gpu=gpu, plan=plan)
    if input.dim() == 3 and other.dim() == 3:
        return bmm(input, other, gpu=gpu, plan=plan)
    if input.dim() >= 3 and other.dim() == 2:
        lead = tuple(input.shape[:-1])
        out = mm(input.reshape(-1, input.shape[-1]), other, gpu=gpu, plan=plan)
        return out.reshape(*lead, other.shape[-1])
    raise TcsmtError(f"matmul of {input.dim()}-D and {other.dim()}-D tensors is not modelled "
                     "(2-D @ 2-D, 3-D @ 3-D and N-D @ 2-D are)")


def addmm(input: Any, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1, out_dtype: Any = None,
          gpu: str = "h100", plan: Plan | None = None) -> Any:
    """``torch.addmm(input, mat1, mat2, beta=, alpha=)``: beta*input + alpha*(mat1 @ mat2); ``input`` broadcasts
    to (M, N) as torch's does ((1, N), (M, 1), a scalar; a 1-D (N,) input is the bias epilogue)."""
    _tensors(input=input, mat1=mat1, mat2=mat2)
    dt = _same_dtype(mat1, mat2)
    od = _out_dtype(out_dtype)
    out = _lib.addmm(tensor_bits(input), tensor_bits(mat1), tensor_bits(mat2), dtype=dt, beta=beta, alpha=alpha,
                     out_dtype=od, gpu=gpu, plan=plan)
    return _back(out, mat1, od, dt)


def linear(input: Any, weight: Any, bias: Any = None, *, gpu: str = "h100", plan: Plan | None = None) -> Any:
    """``torch.nn.functional.linear(input, weight, bias)``: input @ weight.T + bias (leading dims folded)."""
    _tensors(input=input, weight=weight, bias=bias)
    dt = _same_dtype(input, weight)
    lead = tuple(input.shape[:-1])
    x = tensor_bits(input).reshape(-1, input.shape[-1])
    out = _lib.linear(x, tensor_bits(weight), None if bias is None else tensor_bits(bias), dtype=dt, gpu=gpu,
                      plan=plan)
    return _back(out, input, None, dt).reshape(*lead, weight.shape[0])


def scaled_mm(mat_a: Any, mat_b: Any, scale_a: Any, scale_b: Any, bias: Any = None, scale_result: Any = None,
              out_dtype: Any = None, use_fast_accum: bool = False, *, gpu: str = "h100",
              plan: Plan | None = None) -> Any:
    """``torch._scaled_mm(mat_a, mat_b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)``."""
    _tensors(mat_a=mat_a, mat_b=mat_b, scale_a=scale_a, scale_b=scale_b, bias=bias)
    if scale_result is not None:
        raise TcsmtError("scale_result (fp8 output scaling) is not modelled")
    if scale_a is None or scale_b is None:
        raise TcsmtError("torch refuses this call: _scaled_mm needs scale_a and scale_b")
    od = _out_dtype(out_dtype)
    da, db = dtype_name(mat_a), dtype_name(mat_b)
    out = _lib.scaled_mm(tensor_bits(mat_a), tensor_bits(mat_b), tensor_bits(scale_a), tensor_bits(scale_b),
                         a_dtype=da, b_dtype=db, out_dtype=od, bias=None if bias is None else tensor_bits(bias),
                         use_fast_accum=use_fast_accum, gpu=gpu, plan=plan)
    return _back(out, mat_a, od, da)
