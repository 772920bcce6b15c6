"""Calls PyTorch itself refuses, refused here first with torch's reason (one-line TcsmtError).

The messages quote or paraphrase what torch 2.11 raises for the same call
(``RuntimeError`` from ``at::mm`` / ``at::_scaled_mm``), prefixed ``torch
refuses this call:`` so the user knows the GPU would not run it either.
"""
from __future__ import annotations

import dataclasses
import math
import numbers

from tcsmt.errors import TcsmtError
from tcsmt.io.limits import LIBRARY_BATCH, LIBRARY_DIM, as_flag, as_size, shown
from tcsmt.library.plans import FP8, OPS, SCALES, Call, torch_dtype
from tcsmt.library.settings import DEFAULT

_HALF = ("float16", "bfloat16")


def _dim(v: object, name: str, limit: int = LIBRARY_DIM) -> int:
    """A size of the call: a positive Python or numpy integer up to its limit."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or int(v) < 1:
        raise TcsmtError(f"{name} must be a positive integer, not {shown(v)}")
    return as_size(v, name, limit, why="the largest library call tcsmt models")


def _torch_refuses(msg: str) -> TcsmtError:
    return TcsmtError(f"torch refuses this call: {msg}")


def make_call(op: str, M: int, N: int, K: int, *, a_dtype: str, b_dtype: str | None = None,
              out_dtype: str | None = None, batch: int = 1, alpha: float = 1.0, beta: float = 0.0,
              bias: bool = False, tf32: bool = False, scale: str | None = None, fast_accum: bool = False,
              a_t: bool = False, b_t: bool = False, settings: str = DEFAULT) -> Call:
    """Check one call's arguments and return it as a :class:`Call` (defaults filled as torch fills them).
    ``a_t``/``b_t``: the operand layouts of ``mm``/``addmm``/``bmm`` (:class:`Call`); ``settings``: a key of
    :func:`tcsmt.library.settings.settings_key`."""
    call = _make_call(op, M, N, K, a_dtype=a_dtype, b_dtype=b_dtype, out_dtype=out_dtype, batch=batch, alpha=alpha,
                      beta=beta, bias=bias, tf32=tf32, scale=scale, fast_accum=fast_accum)
    a_t, b_t = as_flag(a_t, "a_t"), as_flag(b_t, "b_t")
    if (a_t or b_t) and op in ("linear", "scaled_mm"):
        raise TcsmtError(f"{op} takes the (N, K) weight as it is: its layout is the op's (a_t and b_t apply to "
                         "mm, addmm and bmm)")
    if not isinstance(settings, str) or not settings:
        raise TcsmtError(f"settings must be a key of tcsmt.library.settings.settings_key, not {settings!r}")
    return dataclasses.replace(call, a_t=a_t, b_t=b_t, settings=settings)


def _make_call(op: str, M: int, N: int, K: int, *, a_dtype: str, b_dtype: str | None = None,
               out_dtype: str | None = None, batch: int = 1, alpha: float = 1.0, beta: float = 0.0,
               bias: bool = False, tf32: bool = False, scale: str | None = None, fast_accum: bool = False) -> Call:
    if not isinstance(op, str) or op not in OPS:
        raise TcsmtError(f"unknown op {shown(op)} (known: {', '.join(OPS)})")
    M, N, K = (_dim(v, name) for name, v in (("M", M), ("N", N), ("K", K)))
    batch = _dim(batch, "batch", LIBRARY_BATCH)
    bias, tf32, fast_accum = as_flag(bias, "bias"), as_flag(tf32, "tf32"), as_flag(fast_accum, "fast_accum")
    if op != "bmm" and batch != 1:
        raise TcsmtError(f"batch = {batch} needs op bmm ({op} multiplies one pair of matrices)")
    a = torch_dtype(a_dtype, "a_dtype")
    if a is None:
        raise TcsmtError("a_dtype is required: a dtype as torch names it, such as 'bfloat16'")
    b = torch_dtype(b_dtype, "b_dtype") or a
    if scale not in SCALES:
        raise TcsmtError(f"unknown scale {scale!r} (known: None, 'tensor', 'row')")
    for name, v in (("alpha", alpha), ("beta", beta)):
        if isinstance(v, (bool, str, bytes)) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
            raise TcsmtError(f"{name} must be a finite number, not {shown(v)}")
    alpha, beta = float(alpha), float(beta)
    if op == "scaled_mm":
        if a not in FP8 or b not in FP8:
            raise _torch_refuses(f"_scaled_mm takes float8 matrices, got {a} and {b}")
        if a == b == "float8_e5m2":
            raise _torch_refuses("multiplication of two Float8_e5m2 matrices is not supported")
        if scale is None:
            raise _torch_refuses("_scaled_mm needs scale_a and scale_b (scale='tensor' or 'row')")
        if K % 16 or N % 16:
            raise _torch_refuses(f"_scaled_mm needs K and N divisible by 16 (mat1 {M}x{K}, mat2 {K}x{N})")
        if tf32:
            raise TcsmtError("tf32 applies to float32 matrices, not to _scaled_mm")
        out = torch_dtype(out_dtype, "out_dtype") or a
        if out in FP8:
            raise TcsmtError(f"no model for _scaled_mm with {out} output (the library paths give fp32, bf16 or fp16)")
        if alpha != 1.0 or beta != 0.0:
            raise _torch_refuses("_scaled_mm takes no alpha or beta")
        return Call(op, M, N, K, a, b, out, batch, alpha, beta, bias, False, scale, bool(fast_accum))
    if scale is not None:
        raise TcsmtError(f"scale applies to scaled_mm only, not to {op}")
    if fast_accum:
        raise TcsmtError(f"fast_accum (use_fast_accum) applies to scaled_mm only, not to {op}")
    if a != b:
        raise _torch_refuses(f"expected mat1 and mat2 to have the same dtype, but got: {a} != {b}")
    if a in FP8:
        raise _torch_refuses(f"{op} is not implemented for {a} (use _scaled_mm)")
    out = torch_dtype(out_dtype, "out_dtype") or a
    if out != a and not (a in _HALF and out == "float32"):
        raise _torch_refuses(f"out_dtype must be the input dtype or float32 for float16/bfloat16 inputs "
                             f"({a} -> {out})")
    if tf32 and a != "float32":
        raise TcsmtError(f"tf32 applies to float32 matrices, not to {a}")
    if bias and op not in ("addmm", "linear"):
        raise TcsmtError(f"{op} takes no bias (addmm, linear and scaled_mm do)")
    if (alpha != 1.0 or beta != 0.0) and op != "addmm":
        raise _torch_refuses(f"{op} takes no alpha or beta (addmm does)")
    return Call(op, M, N, K, a, b, out, batch, alpha, beta, bool(bias), bool(tf32), None, False)
