"""The library settings that change which plan cuBLAS runs for a call, as one canonical key.

A plan is recorded under the settings torch ran with; the same call under other settings may run another
kernel, another split-K count or no split-K at all.  The settings that matter (recorded on the H100 and H200
with torch 2.11, cuBLAS 13.1; ``evidence/recordings/README.md``):

* ``blas``: ``torch.backends.cuda.preferred_blas_library()``: ``"cublas"`` (torch's default) or
  ``"cublaslt"``;
* ``reduced``: for bf16 and fp16 calls, ``torch.backends.cuda.matmul.allow_{bf16,fp16}_reduced_precision_reduction``
  as the pair (allow reduced precision, allow split-K); torch's default is (True, True); ``(False, False)`` is
  the split-K switch, which torch accepts only on the cuBLASLt backend.  Other dtypes do not read it;
* ``cublas_workspace``: the environment's ``CUBLAS_WORKSPACE_CONFIG`` (e.g. ``":0:0"``, which inference
  servers use to switch split-K off), ``""`` when unset;
* ``cublaslt_workspace``: the environment's ``CUBLASLT_WORKSPACE_SIZE`` (KiB), ``""`` when unset;
* ``deterministic``: ``torch.use_deterministic_algorithms(True)`` is in force (torch then requires
  ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` or ``:16:8``); ``False`` by default.

:func:`settings_key` writes them as one string, ``"default"`` when every one is torch's default, else the
non-default ones joined by ``,`` in the order above (``"blas=cublaslt,reduced=off"``).  The key is part of a
call's identity (:class:`tcsmt.library.plans.Call`): a plan recorded under one key is never used for another.
"""
from __future__ import annotations

import os
from typing import Any

from tcsmt.errors import TcsmtError

BLAS_LIBRARIES = ("cublas", "cublaslt")
REDUCED_DTYPES = ("bfloat16", "float16")
DEFAULT = "default"
_REDUCED_NAMES = {"off": (False, False), "no_split_k": (True, False), "no_reduced_precision": (False, True)}


def _flag_pair(value: Any, what: str) -> tuple[bool, bool]:
    """torch's reduced-precision setting as (allow reduced precision, allow split-K)."""
    if isinstance(value, bool):
        return (value, True)
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, bool) for v in value):
        return (bool(value[0]), bool(value[1]))
    raise TcsmtError(f"{what} must be a bool or a pair of bools (allow reduced precision, allow split-K), not {value!r}")


def settings_key(a_dtype: str, *, blas: str = "cublas", reduced: Any = (True, True), cublas_workspace: str = "",
                 cublaslt_workspace: str = "", deterministic: bool = False) -> str:
    """The canonical settings key of a call on inputs of torch dtype ``a_dtype`` (see the module docstring)."""
    if blas not in BLAS_LIBRARIES:
        raise TcsmtError(f"blas must be one of {', '.join(BLAS_LIBRARIES)}, not {blas!r}")
    for name, v in (("cublas_workspace", cublas_workspace), ("cublaslt_workspace", cublaslt_workspace)):
        if not isinstance(v, str) or any(c in v for c in ",=\n"):
            raise TcsmtError(f"{name} must be the environment variable's text, not {v!r}")
    parts = []
    if blas != "cublas":
        parts.append(f"blas={blas}")
    if a_dtype in REDUCED_DTYPES:
        pair = _flag_pair(reduced, "reduced")
        if pair != (True, True):
            parts.append("reduced=" + {v: k for k, v in _REDUCED_NAMES.items()}[pair])
    if cublas_workspace:
        parts.append(f"CUBLAS_WORKSPACE_CONFIG={cublas_workspace}")
    if cublaslt_workspace:
        parts.append(f"CUBLASLT_WORKSPACE_SIZE={cublaslt_workspace}")
    if not isinstance(deterministic, bool):
        raise TcsmtError(f"deterministic must be a bool, not {deterministic!r}")
    if deterministic:
        parts.append("deterministic=on")
    return ",".join(parts) or DEFAULT


def parse_settings_key(key: str) -> dict[str, Any]:
    """The keyword arguments of :func:`settings_key` that a key names (``"default"``: none); TcsmtError where the
    text is not a key.  (For a call on ``a_dtype``, ``settings_key(a_dtype, **parse_settings_key(key))`` gives the
    key back when it is that dtype's canonical one.)"""
    out: dict[str, Any] = {}
    if key == DEFAULT:
        return out
    for part in str(key).split(","):
        name, sep, value = part.partition("=")
        if not sep or not value:
            raise TcsmtError(f"settings {key!r}: {part!r} is not NAME=VALUE (e.g. blas=cublaslt,reduced=off)")
        field = {"blas": "blas", "reduced": "reduced", "CUBLAS_WORKSPACE_CONFIG": "cublas_workspace",
                 "CUBLASLT_WORKSPACE_SIZE": "cublaslt_workspace", "deterministic": "deterministic"}.get(name)
        if field is None:
            raise TcsmtError(f"settings {key!r}: unknown setting {name!r} (blas, reduced, CUBLAS_WORKSPACE_CONFIG, "
                             "CUBLASLT_WORKSPACE_SIZE, deterministic)")
        if field in out:
            raise TcsmtError(f"settings {key!r}: {name} given twice")
        if field == "reduced":
            if value not in _REDUCED_NAMES:
                raise TcsmtError(f"settings {key!r}: reduced={value} is not one of {', '.join(_REDUCED_NAMES)}")
            out[field] = _REDUCED_NAMES[value]
        elif field == "blas" and value not in BLAS_LIBRARIES:
            raise TcsmtError(f"settings {key!r}: blas must be one of {', '.join(BLAS_LIBRARIES)}, not {value!r}")
        elif field == "deterministic":
            if value != "on":
                raise TcsmtError(f"settings {key!r}: deterministic=on is the only value (leave it out for off)")
            out[field] = True
        else:
            out[field] = value
    return out


def settings_from_torch(torch: Any, a_dtype: str) -> str:
    """The settings key of a call torch would make now, read from torch and the environment."""
    try:
        lib = str(torch.backends.cuda.preferred_blas_library())
    except Exception:  # an old torch without the switch: cuBLAS
        lib = "cublas"
    m = torch.backends.cuda.matmul
    return settings_from_values(a_dtype, {
        "preferred_blas_library": lib,
        "allow_bf16_reduced_precision_reduction": getattr(m, "allow_bf16_reduced_precision_reduction", True),
        "allow_fp16_reduced_precision_reduction": getattr(m, "allow_fp16_reduced_precision_reduction", True),
        "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""),
        "CUBLASLT_WORKSPACE_SIZE": os.environ.get("CUBLASLT_WORKSPACE_SIZE", ""),
        "deterministic_algorithms": _deterministic(torch)})


def _deterministic(torch: Any) -> bool:
    try:
        return bool(torch.are_deterministic_algorithms_enabled())
    except Exception:  # an old torch without the switch
        return False


def settings_from_values(a_dtype: str, values: dict[str, Any]) -> str:
    """The settings key from the values as torch and the environment hold them (``preferred_blas_library``'s text,
    the ``allow_{bf16,fp16}_reduced_precision_reduction`` values, the two workspace variables,
    ``deterministic_algorithms``), e.g. as ``tcsmt.hwcheck.gemm_capture.settings`` recorded them."""
    lib = str(values.get("preferred_blas_library", "cublas")).lower()
    blas = "cublaslt" if "lt" in lib.rsplit(".", 1)[-1] else "cublas"
    reduced: Any = (True, True)
    if a_dtype in REDUCED_DTYPES:
        name = "allow_bf16_reduced_precision_reduction" if a_dtype == "bfloat16" else \
            "allow_fp16_reduced_precision_reduction"
        reduced = values.get(name, True)
        if not isinstance(reduced, bool):
            reduced = tuple(bool(x) for x in reduced)
    return settings_key(a_dtype, blas=blas, reduced=reduced,
                        cublas_workspace=str(values.get("CUBLAS_WORKSPACE_CONFIG") or ""),
                        cublaslt_workspace=str(values.get("CUBLASLT_WORKSPACE_SIZE") or ""),
                        deterministic=bool(values.get("deterministic_algorithms", False)))
