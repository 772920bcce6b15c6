"""torch tensors as bit patterns: the one place where tcsmt reads and makes torch tensors.

Tensors travel as bit patterns (``Tensor.view`` of a same-width integer dtype): no value is converted on
the way; CUDA tensors stay on their GPU where CuPy runs there (:func:`tensor_patterns`, DLPack).  torch is optional: without it these functions raise TcsmtError.  Used by the library API
(:mod:`tcsmt.library.api`) and the torch facade (:mod:`tcsmt.torch`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.library.plans import TORCH_DTYPES

_INT_OF_WIDTH = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}
_NP_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

def import_torch():
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install
        raise TcsmtError(f"tcsmt.torch needs PyTorch (pip install torch): {type(exc).__name__}: {exc}") from None
    return torch


def dtype_name(t: Any) -> str:
    """torch's name of a tensor's dtype (``"bfloat16"``); TcsmtError for dtypes no plan takes."""
    if not hasattr(t, "dtype") or type(t).__module__.split(".")[0] != "torch":
        raise TcsmtError(f"expected a torch.Tensor, got {type(t).__name__}")
    name = str(t.dtype).removeprefix("torch.")
    if name not in TORCH_DTYPES:
        raise TcsmtError(f"unsupported dtype {t.dtype} (known: {', '.join(TORCH_DTYPES)})")
    return name


def tensor_bits(t: Any) -> np.ndarray:
    """The bit patterns of a tensor as an unsigned numpy array of the same shape (copied to the host)."""
    torch = import_torch()
    if not isinstance(t, torch.Tensor):
        raise TcsmtError(f"expected a torch.Tensor, got {type(t).__name__}")
    dtype_name(t)
    size = t.element_size()
    ints = t.detach().contiguous().cpu().view(getattr(torch, _INT_OF_WIDTH[size]))
    return ints.numpy().view(_NP_UINT[size])


def tensor_patterns(t: Any) -> Any:
    """The bit patterns of a tensor where it lives: for a CUDA tensor, where CuPy runs on a GPU, a CuPy
    array of unsigned patterns sharing the tensor's memory (DLPack, no copy; a non-contiguous tensor is
    made contiguous on its GPU first); otherwise :func:`tensor_bits` (a numpy array on the host)."""
    torch = import_torch()
    if isinstance(t, torch.Tensor) and t.is_cuda:
        from tcsmt.kernels import cuda

        if cuda.available():
            import cupy

            dtype_name(t)
            size = t.element_size()
            ints = t.detach().contiguous().view(getattr(torch, _INT_OF_WIDTH[size]))
            return cupy.from_dlpack(ints).view(_NP_UINT[size])
    return tensor_bits(t)


def bits_tensor(bits: Any, dtype: str, device: Any = "cpu") -> Any:
    """A tensor of torch dtype ``dtype`` on ``device`` holding exactly the patterns ``bits`` (a numpy array;
    or a CuPy array, handed to torch through DLPack on its own GPU)."""
    torch = import_torch()
    if type(bits).__module__.split(".")[0] == "cupy":
        import cupy

        arr = cupy.ascontiguousarray(bits)
        ints = torch.from_dlpack(arr.view(np.dtype(_INT_OF_WIDTH[arr.dtype.itemsize])))
        return ints.view(getattr(torch, dtype))
    arr = np.ascontiguousarray(bits)
    ints = torch.from_numpy(arr.view(np.dtype(_INT_OF_WIDTH[arr.dtype.itemsize])))
    return ints.view(getattr(torch, dtype)).to(device)
