"""The torch facade: ``mm``, ``matmul``, ``addmm``, ``linear``, ``bmm``, ``baddbmm``, ``scaled_mm`` with torch's own
arguments.

Each takes torch tensors (CPU or CUDA), emulates what the GPU's library returns
for that call under its recorded plan (:mod:`tcsmt.library`), and returns a
tensor of torch's output dtype on the input's device.  Tensors travel as bit
patterns (``Tensor.view`` of a same-width integer dtype): no value is converted
on the way.  CUDA tensors are computed on their GPU where CuPy runs there (the
compiled CUDA kernels of :mod:`tcsmt.kernels.cuda`, shared through DLPack: no
copy to the host); elsewhere on the CPU.  torch is optional: without it these
functions raise TcsmtError.
Extra keywords: ``gpu``, ``plan`` (a Plan to use instead of the recorded one) and ``record``.

``gpu="auto"`` (the default): for CUDA tensors, the plans recorded on the GPU they live on, under the running
GPU's name, SM count and torch version (a recording made under others is not used, and the refusal says so);
for CPU tensors, the H100's (``"h100"``; name another with ``gpu=``).  Every call is looked up under torch's
current settings (:func:`tcsmt.library.settings.settings_from_torch`: the preferred BLAS library, the
reduced-precision/split-K switch, the workspace variables, deterministic algorithms) and the operands' layouts
(a transposed view, as autograd passes ``grad_out.t()``, is another call; 2-D and 3-D operands alike).  An operand
in another layout is refused, except a recorded layout variant (:mod:`tcsmt.library.layouts`: a batch-1
attention query, a batch-broadcast matrix) at a ``bmm`` the GPU's recordings show planned as its row-major twin.

``record=FOLDER`` (default: ``$TCSMT_RECORD``, else off), for CUDA tensors with ``gpu="auto"``: a call that no
catalog usable under the running GPU's stamp holds is recorded on the spot on the tensors' GPU (CUDA graph
capture: nothing runs; :mod:`tcsmt.library.record_missing`) into FOLDER's on-the-spot catalog, then answered from
it like any recorded call, or refused with the reason the conversion gives.  Calls a catalog holds, answered or
refused, are not recorded again.  With CPU tensors or a named ``gpu`` an explicit ``record`` is refused.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.library import api as _lib
from tcsmt.library.checks import make_call
from tcsmt.library.layouts import DESCRIBED, VARIANTS, covered, describe, operand_layout
from tcsmt.library.lookup import RECORD_ENV, Target, gpu_short_name
from tcsmt.library.plans import C_STEPS, Plan
from tcsmt.library.settings import settings_from_torch
from tcsmt.library.tensors import bits_tensor, dtype_name, import_torch
from tcsmt.library.tensors import tensor_patterns as tensor_bits  # CUDA tensors' patterns stay on their GPU

__all__ = ["addmm", "baddbmm", "bmm", "linear", "matmul", "mm", "scaled_mm"]


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


def _layout(t: Any, what: str) -> str:
    """The layout of a 2-D or 3-D operand (:func:`tcsmt.library.layouts.operand_layout`); TcsmtError for one that
    is not modelled."""
    lay = operand_layout(tuple(t.shape), tuple(t.stride())) if t.dim() in (2, 3) else "n"
    if not lay:
        raise TcsmtError(f"operand layout not modelled: {what} has {describe(tuple(t.shape), tuple(t.stride()))} "
                         "(row-major or the transposed view of one are; pass plan=... to use a plan anyway)")
    return lay


def _target(gpu: str, a: Any, b: Any | None = None, *, layouts: bool = True,
            record: Any = None) -> tuple[Target, list[tuple[str, str]]]:
    """:func:`target`, and the operands in a layout variant (name, variant), keyed as their row-major twins."""
    torch = import_torch()
    settings = settings_from_torch(torch, dtype_name(a))
    la = _layout(a, "A") if layouts else "n"
    lb = _layout(b, "B") if layouts and b is not None else "n"
    variants = [(name, v) for name, v in (("A", la), ("B", lb)) if v in VARIANTS]
    a_t, b_t = VARIANTS.get(la, la) == "t", VARIANTS.get(lb, lb) == "t"
    name = str(gpu).lower()
    if name != "auto" or not a.is_cuda:
        if record is not None:
            raise TcsmtError("record= records on the GPU the tensors live on: it needs CUDA tensors and gpu='auto'")
        return Target(name if name != "auto" else "h100", None, settings, a_t, b_t), variants
    folder = os.fspath(record) if record is not None else (os.environ.get(RECORD_ENV) or None)
    props = torch.cuda.get_device_properties(a.device)
    stamp = {"gpu_name": props.name, "sm_count": props.multi_processor_count, "torch": torch.__version__}
    return Target(gpu_short_name(props.name), stamp, settings, a_t, b_t, record=folder,
                  device_index=a.device.index if a.device.index is not None else torch.cuda.current_device()), variants


def target(gpu: str, a: Any, b: Any | None = None, *, layouts: bool = True, record: Any = None) -> Target:
    """The :class:`Target` of a call on tensors ``a`` (and ``b``): the GPU (``"auto"``: see the module docstring),
    the running GPU's stamp for CUDA tensors, torch's settings, (``layouts``) the operands' layouts, and the folder
    ``record`` (see the module docstring); an operand whose layout is not modelled is refused, and so is a layout
    variant (only :func:`bmm` answers those)."""
    tgt, variants = _target(gpu, a, b, layouts=layouts, record=record)
    if variants:
        name, v = variants[0]
        raise TcsmtError(f"operand layout not modelled: {name} is {DESCRIBED[v]} (answered at a recorded bmm only)")
    return tgt


def _back(bits: np.ndarray, like: Any, out_dtype: str | None, dtype: str) -> Any:
    return bits_tensor(bits, out_dtype or dtype, like.device)


def mm(input: Any, mat2: Any, *, out_dtype: Any = None, gpu: str = "auto", plan: Plan | None = None,
          record: Any = None) -> Any:
    """``torch.mm(input, mat2, out_dtype=...)`` as the GPU's library computes it."""
    torch = import_torch()
    _tensors(input=input, mat2=mat2)
    dt = _same_dtype(input, mat2)
    od = _out_dtype(out_dtype)
    out = _lib.mm(tensor_bits(input), tensor_bits(mat2), dtype=dt, out_dtype=od, tf32=_tf32(torch, dt),
                  gpu=target(gpu, input, mat2, record=record), plan=plan)
    return _back(out, input, od, dt)


def bmm(input: Any, mat2: Any, *, out_dtype: Any = None, gpu: str = "auto", plan: Plan | None = None,
          record: Any = None) -> Any:
    """``torch.bmm(input, mat2)``: (b, M, K) x (b, K, N)."""
    torch = import_torch()
    _tensors(input=input, mat2=mat2)
    dt = _same_dtype(input, mat2)
    od = _out_dtype(out_dtype)
    tgt, variants = _target(gpu, input, mat2, record=record)
    tf32 = _tf32(torch, dt)
    if variants and plan is None and input.dim() == 3 and mat2.dim() == 3:
        (nb, M, K), N = input.shape, mat2.shape[2]
        call = make_call("bmm", M, N, K, batch=nb, a_dtype=dt, out_dtype=od or dt, tf32=tf32, a_t=tgt.a_t,
                         b_t=tgt.b_t, settings=tgt.settings)
        for name, v in variants:
            if covered(v, call, tgt.gpu) is None:
                raise TcsmtError(f"operand layout not modelled: {name} is {DESCRIBED[v]}; no recording of {tgt.gpu} "
                                 f"shows it planned as the row-major layout at {call.label()}")
    out = _lib.bmm(tensor_bits(input), tensor_bits(mat2), dtype=dt, out_dtype=od, tf32=tf32, gpu=tgt, plan=plan)
    return _back(out, input, od, dt)


def baddbmm(input: Any, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1, out_dtype: Any = None,
            gpu: str = "auto", plan: Plan | None = None,
          record: Any = None) -> Any:
    """``torch.baddbmm(input, batch1, batch2, beta=, alpha=)``: beta*input + alpha*(batch1 @ batch2), (b, M, N).

    With beta = 0 and alpha = 1 torch ignores ``input`` and makes bmm's cuBLAS call (torch's CUDA ``bmm``
    is ``baddbmm`` with those scalars), so bmm's recorded plan applies.  No plan table records other
    scalars: pass ``plan=`` (its epilogue then decides how input, beta and alpha enter; ``input`` is
    broadcast to (b, M, N) as torch does).
    """
    if plan is None:
        if float(beta) != 0.0 or float(alpha) != 1.0:
            raise TcsmtError(f"no recorded cuBLAS plan for baddbmm with beta = {beta}, alpha = {alpha} (only "
                             "beta = 0, alpha = 1, which is bmm's call); pass plan=...")
        return bmm(batch1, batch2, out_dtype=out_dtype, gpu=gpu, record=record)
    _same_dtype(batch1, batch2)
    od = _out_dtype(out_dtype)
    if batch1.dim() != 3 or batch2.dim() != 3:
        raise TcsmtError(f"torch refuses this call: batch1 and batch2 must be 3-D, got {batch1.dim()}-D and "
                         f"{batch2.dim()}-D")
    nb, M, _ = batch1.shape
    N = batch2.shape[2]
    steps = set(plan.epilogue)
    C = input.expand(nb, M, N) if C_STEPS & steps else None
    if od is not None and od != plan.call.out_dtype:
        raise TcsmtError(f"out_dtype {od} differs from the plan's output dtype {plan.call.out_dtype}")
    outs = [_lib.run(plan, batch1[i], batch2[i], C=None if C is None else C[i]) for i in range(nb)]
    return import_torch().stack(outs)


def matmul(input: Any, other: Any, *, gpu: str = "auto", plan: Plan | None = None,
          record: Any = None) -> Any:
    """``torch.matmul`` for 2-D @ 2-D (mm), 3-D @ 3-D (bmm) and N-D @ 2-D (rows folded into one mm, as torch does)."""
    _tensors(input=input, other=other)
    if input.dim() == 2 and other.dim() == 2:
        return mm(input, other, gpu=gpu, plan=plan, record=record)
    if input.dim() == 3 and other.dim() == 3:
        return bmm(input, other, gpu=gpu, plan=plan, record=record)
    if input.dim() >= 3 and other.dim() == 2:
        lead = tuple(input.shape[:-1])
        out = mm(input.reshape(-1, input.shape[-1]), other, gpu=gpu, plan=plan, record=record)
        return out.reshape(*lead, other.shape[-1])
    raise TcsmtError(f"matmul of {input.dim()}-D and {other.dim()}-D tensors is not modelled "
                     "(2-D @ 2-D, 3-D @ 3-D and N-D @ 2-D are)")


def addmm(input: Any, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1, out_dtype: Any = None,
          gpu: str = "auto", plan: Plan | None = None,
          record: Any = None) -> Any:
    """``torch.addmm(input, mat1, mat2, beta=, alpha=)``: beta*input + alpha*(mat1 @ mat2); ``input`` broadcasts
    to (M, N) as torch's does ((1, N), (M, 1), a scalar; a 1-D (N,) input is the bias epilogue)."""
    _tensors(input=input, mat1=mat1, mat2=mat2)
    dt = _same_dtype(mat1, mat2)
    od = _out_dtype(out_dtype)
    out = _lib.addmm(tensor_bits(input), tensor_bits(mat1), tensor_bits(mat2), dtype=dt, beta=beta, alpha=alpha,
                     out_dtype=od, gpu=target(gpu, mat1, mat2, record=record), plan=plan)
    return _back(out, mat1, od, dt)


def linear(input: Any, weight: Any, bias: Any = None, *, gpu: str = "auto", plan: Plan | None = None,
          record: Any = None) -> Any:
    """``torch.nn.functional.linear(input, weight, bias)``: input @ weight.T + bias (leading dims folded)."""
    _tensors(input=input, weight=weight, bias=bias)
    dt = _same_dtype(input, weight)
    lead = tuple(input.shape[:-1])
    x = tensor_bits(input).reshape(-1, input.shape[-1])
    out = _lib.linear(x, tensor_bits(weight), None if bias is None else tensor_bits(bias), dtype=dt,
                      gpu=target(gpu, input, layouts=False, record=record), plan=plan)
    return _back(out, input, None, dt).reshape(*lead, weight.shape[0])


def scaled_mm(mat_a: Any, mat_b: Any, scale_a: Any, scale_b: Any, bias: Any = None, scale_result: Any = None,
              out_dtype: Any = None, use_fast_accum: bool = False, *, gpu: str = "auto",
              plan: Plan | None = None, record: Any = None) -> Any:
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
                         use_fast_accum=use_fast_accum, gpu=target(gpu, mat_a, layouts=False, record=record), plan=plan)
    return _back(out, mat_a, od, da)
