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


def param_info_functions(cu: Any) -> dict[str, Any]:
    """The driver's ``cuFuncGetParamInfo`` / ``cuKernelGetParamInfo`` (None where the driver lacks one), typed."""
    out = {"func": getattr(cu, "cuFuncGetParamInfo", None), "kern": getattr(cu, "cuKernelGetParamInfo", None)}
    sz = ctypes.c_size_t
    for f in out.values():
        if f is not None:
            f.argtypes = [ctypes.c_void_p, sz, ctypes.POINTER(sz), ctypes.POINTER(sz)]
    return out


def gemv_dealing(info: Any, handle: int | None, kernel_params: int | None) -> list[int] | None:
    """[tile, stride] of a ``gemvx`` launch (:data:`GEMV_PARAMS`) from its function or kernel ``handle`` (``info``
    the matching param-info function) and the node's ``kernelParams`` pointer; None where its parameters are not the
    one 152-byte struct (another cuBLAS; the driver cannot say)."""
    if info is None or not handle or not kernel_params:
        return None
    off, size = ctypes.c_size_t(0), ctypes.c_size_t(0)
    if info(ctypes.c_void_p(handle), 0, ctypes.byref(off), ctypes.byref(size)) != 0 or size.value != GEMV_PARAMS_BYTES:
        return None
    if info(ctypes.c_void_p(handle), 1, ctypes.byref(off), ctypes.byref(size)) == 0:
        return None  # a second parameter: not the struct this reads
    raw = ctypes.string_at(ctypes.cast(kernel_params, ctypes.POINTER(ctypes.c_void_p))[0], GEMV_PARAMS_BYTES)
    return [int.from_bytes(raw[a:a + 4], "little", signed=True) for a in GEMV_DEALING_AT]
