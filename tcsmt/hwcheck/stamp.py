"""What a plan recording is stamped with, read from the running process: the GPU (name, SM count, capability), the
driver, torch, CUDA, cuBLAS and cuBLASLt versions, and the library settings torch runs with.

:func:`running_stamp` is the stamp a catalog must carry to answer under this process
(:func:`tcsmt.library.lookup.answer` with ``stamp``); :func:`device_info` is a recording's ``device`` header.
Standard library at import; torch is passed in (:func:`import_torch`).
"""
from __future__ import annotations

import ctypes
import datetime
import os
import platform
import re
import subprocess
import warnings
from collections.abc import Sequence
from functools import cache
from typing import Any

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.lt_trace import lib_path

STAMP_FIELDS = ("gpu_name", "sm_count", "driver", "torch", "cuda", "cublas", "cublaslt")
"""What a recording, and the catalog made from it, is stamped with (``device`` of the header; ``gpu_name`` is its
``gpu``).  A catalog is applied under a running stamp only where they agree (:func:`tcsmt.library.lookup.answer`)."""
ENV_KEYS = ("CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE", "TORCH_BLAS_PREFER_CUBLASLT",
            "TORCH_CUBLASLT_UNIFIED_WORKSPACE", "DISABLE_ADDMM_CUDA_LT", "CUBLAS_LOGINFO_DBG", "CUBLASLT_LOG_LEVEL")
UNKEYED_ENV = ("TORCH_CUBLASLT_UNIFIED_WORKSPACE", "DISABLE_ADDMM_CUDA_LT")
"""Environment variables that change which plan torch runs and that no settings key holds: recording under them
is refused (a catalog would file their plans under torch's defaults)."""
REDUCED_ATTRS = {"bfloat16": "allow_bf16_reduced_precision_reduction",
                 "float16": "allow_fp16_reduced_precision_reduction"}


def import_torch() -> Any:
    """torch, where it has a CUDA device; else one TcsmtError saying why not."""
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install
        raise TcsmtError(f"recording plans needs PyTorch with CUDA ({type(exc).__name__}: {exc})") from None
    if not torch.cuda.is_available():
        raise TcsmtError("recording plans needs a CUDA GPU: torch.cuda.is_available() is False")
    return torch


# ------------------------------------------------------------------------------------------------ settings
def read_setting(torch: Any) -> dict[str, Any]:
    """The library settings torch runs with now: ``blas`` (preferred_blas_library), ``reduced`` per 16-bit dtype
    (the (allow reduced precision, allow split-K) pair), ``fp16_accumulation`` and the environment (:data:`ENV_KEYS`)."""
    try:
        lib = str(torch.backends.cuda.preferred_blas_library()).lower()
    except Exception:  # an old torch without the switch: cuBLAS
        lib = "cublas"
    reduced = {}
    for dt, attr in REDUCED_ATTRS.items():
        v = getattr(torch.backends.cuda.matmul, attr, True)
        reduced[dt] = [bool(v), True] if isinstance(v, bool) else [bool(x) for x in v]
    return {"blas": "cublaslt" if "lt" in lib.rsplit(".", 1)[-1] else "cublas", "reduced": reduced,
            "fp16_accumulation": bool(getattr(torch.backends.cuda.matmul, "allow_fp16_accumulation", False)),
            "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ}}


def apply_setting(torch: Any, blas: str, reduced: Sequence[bool]) -> dict[str, Any]:
    """Set the BLAS library and both 16-bit reduced-precision pairs; what torch said (exceptions, warnings)."""
    said: dict[str, Any] = {}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            torch.backends.cuda.preferred_blas_library(blas)
        except Exception as exc:
            said["preferred_blas_library"] = f"{type(exc).__name__}: {exc}"
        for attr in REDUCED_ATTRS.values():
            try:
                setattr(torch.backends.cuda.matmul, attr, tuple(bool(x) for x in reduced))
            except Exception as exc:
                said[attr] = f"{type(exc).__name__}: {exc}"
    if w:
        said["warnings"] = [str(x.message) for x in w]
    return said


# ------------------------------------------------------------------------------------------------ the device
def _driver() -> str | None:
    try:
        with open("/proc/driver/nvidia/version") as f:
            m = re.search(r"\s(\d+\.\d+(?:\.\d+)?)\s", f.readline())
        if m:
            return m.group(1)
    except OSError:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.split("\n")[0].strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _library_versions(torch: Any) -> dict[str, Any]:
    """cuBLAS and cuBLASLt versions (``"130100"`` for 13.1.0) of the libraries torch loaded, and their paths."""
    torch.mm(torch.ones(8, 8, device="cuda"), torch.ones(8, 8, device="cuda"))  # loads both
    d: dict[str, Any] = {}
    for frag, key in (("libcublasLt.so", "cublaslt"), ("libcublas.so", "cublas")):
        path = lib_path(frag)
        d[key + "_path"] = path
        if not path:
            continue
        try:
            lib = ctypes.CDLL(path)
            if key == "cublaslt":
                lib.cublasLtGetVersion.restype = ctypes.c_size_t
                d["cublaslt"] = str(lib.cublasLtGetVersion())
            else:
                parts = []
                for prop in (0, 1, 2):
                    v = ctypes.c_int()
                    lib.cublasGetProperty(prop, ctypes.byref(v))
                    parts.append(v.value)
                d["cublas"] = str(parts[0] * 10000 + parts[1] * 100 + parts[2])
                d["cublas_version"] = ".".join(map(str, parts))
        except (OSError, AttributeError) as exc:
            d[key + "_error"] = repr(exc)
    return d


@cache
def _device_info(torch: Any, index: int) -> dict[str, Any]:
    with torch.cuda.device(index):
        p = torch.cuda.get_device_properties(index)
        d = {"gpu": torch.cuda.get_device_name(index), "sm_count": p.multi_processor_count,
             "capability": list(torch.cuda.get_device_capability(index)), "memory_bytes": p.total_memory,
             "torch": torch.__version__, "cuda": torch.version.cuda, "driver": _driver(),
             "python": platform.python_version(), **_library_versions(torch)}
    return d


def device_info(torch: Any, index: int | None = None) -> dict[str, Any]:
    """The header's ``device``: GPU name, SM count, capability, memory, torch, CUDA, driver, cuBLAS, cuBLASLt
    (cached per device), the date and the matmul settings now."""
    index = torch.cuda.current_device() if index is None else int(index)
    d = dict(_device_info(torch, index))
    d["date_utc"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    d["matmul_settings"] = read_setting(torch)
    return d


def running_stamp(torch: Any | None = None, index: int | None = None) -> dict[str, Any]:
    """The stamp (:data:`STAMP_FIELDS`) of the GPU ``index`` (default: the current one) as this process runs it;
    pass it to :func:`tcsmt.library.lookup.answer` so that only catalogs recorded under it answer."""
    torch = torch if torch is not None else import_torch()
    d = device_info(torch, index)
    return {"gpu_name": d["gpu"], **{k: d.get(k) for k in STAMP_FIELDS[1:]}}


