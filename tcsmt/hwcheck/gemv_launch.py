"""How a captured ``gemvx`` launch deals k's to its threads: two words of its parameters, read through the driver.

Standard library only (ctypes on ``libcuda.so.1``, passed in), for :class:`tcsmt.hwcheck.plan_capture.GraphReader`.
"""
from __future__ import annotations

import ctypes
from typing import Any

GEMV_PARAMS = "cublasGemvParamsEx<int,"
"""The launch-parameter struct of cuBLAS's ``internal::gemvx::kernel`` (every variant the H100 and the H200 ran, the
int and long index types alike: one 152-byte parameter).  Its two int32 words at bytes 140 and 144 say how the
kernel deals k's to its L threads (``tools/device/gemv_params.py``, ``evidence/library/h100_gemv_params.json.gz``):
``tile`` = min(64, ceil(K/L)) always; ``stride`` = 1 (thread t takes tiles of ``tile`` consecutive k's, tile q to
thread q mod L) or L (k to thread k mod L, one by one).  cuBLAS picks the stride per call shape on the host."""
GEMV_DEALING_AT = (140, 144)
GEMV_PARAMS_BYTES = 152
MAX_PARAMS = 64
"""Parameters read per kernel at most."""


def param_info_functions(cu: Any) -> dict[str, Any]:
    """The driver's ``cuFuncGetParamInfo`` / ``cuKernelGetParamInfo`` (None where the driver lacks one), typed."""
    out = {"func": getattr(cu, "cuFuncGetParamInfo", None), "kern": getattr(cu, "cuKernelGetParamInfo", None)}
    sz = ctypes.c_size_t
    for f in out.values():
        if f is not None:
            f.argtypes = [ctypes.c_void_p, sz, ctypes.POINTER(sz), ctypes.POINTER(sz)]
    return out


def kernel_params(info: Any, handle: int | None, kernel_params: int | None) -> list[tuple[int, int, bytes]] | None:
    """(offset, size, bytes) of each parameter of a captured kernel node, from its function or kernel ``handle``
    (``info`` the matching param-info function of :func:`param_info_functions`) and the node's ``kernelParams``
    pointer; None where the driver cannot say."""
    if info is None or not handle or not kernel_params:
        return None
    args = ctypes.cast(kernel_params, ctypes.POINTER(ctypes.c_void_p))
    out = []
    off, size = ctypes.c_size_t(0), ctypes.c_size_t(0)
    for i in range(MAX_PARAMS):
        if info(ctypes.c_void_p(handle), i, ctypes.byref(off), ctypes.byref(size)) != 0:
            break
        out.append((off.value, size.value, ctypes.string_at(args[i], size.value)))
    return out


def gemv_dealing(info: Any, handle: int | None, kernel_params_ptr: int | None) -> list[int] | None:
    """[tile, stride] of a ``gemvx`` launch (:data:`GEMV_PARAMS`; arguments as :func:`kernel_params`'s); None where
    its parameters are not the one 152-byte struct (another cuBLAS; the driver cannot say)."""
    params = kernel_params(info, handle, kernel_params_ptr)
    if not params or len(params) != 1 or params[0][1] != GEMV_PARAMS_BYTES:
        return None
    raw = params[0][2]
    return [int.from_bytes(raw[a:a + 4], "little", signed=True) for a in GEMV_DEALING_AT]
