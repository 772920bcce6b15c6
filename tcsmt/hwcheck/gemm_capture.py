"""Capture the GEMM calls a PyTorch program makes on the GPU, with a sample of their inputs and outputs.

:class:`GemmCapture` is a ``TorchDispatchMode``: inside ``with GemmCapture() as cap:`` every ``aten.mm``,
``addmm``, ``bmm``, ``baddbmm`` and ``_scaled_mm`` (what ``nn.Linear``, ``torch.matmul`` and autograd's
backward of them call) runs as usual, and the mode records, per call:

* the op, the operands' shapes, strides, dtypes and storage offsets, alpha and beta, the output dtype, the
  ``_scaled_mm`` scales' shapes and ``use_fast_accum``;
* a sample: ``rows`` row indices i of A and ``cols`` column indices j of B (the first, the last and random ones;
  for ``bmm``/``baddbmm`` also ``batches`` batch indices), the rows A[i, :] and columns B[:, j] (the mm
  orientation: A (M, K) @ B (K, N), whatever the strides) as bit patterns, the outputs at every (i, j), and the
  C / bias / scale values that go with them.

Nothing else is touched: the sample is read after the op ran, with the mode off.  The library settings the
calls ran under (torch's BLAS backend, the reduced-precision switches, tf32, the cuBLAS workspace variables) and
the device are recorded once per file.  :meth:`GemmCapture.save` writes one ``.npz`` (the bit patterns) and
one ``.json`` (the call list); ``tcsmt.library.gemm_replay`` replays them on the CPU.

Needs torch and numpy only, so it runs on a bare GPU host (no tcsmt dependencies beyond this file).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

OPS = ("mm", "addmm", "bmm", "baddbmm", "_scaled_mm")
_UINT = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}
_INT_OF_WIDTH = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def bits(torch: Any, t: Any) -> np.ndarray:
    """A tensor's bit patterns as an unsigned numpy array (copied to the host)."""
    size = t.element_size()
    ints = t.detach().contiguous().cpu().view(getattr(torch, _INT_OF_WIDTH[size]))
    return ints.numpy().view(_UINT[size])


def settings(torch: Any) -> dict[str, Any]:
    """The library settings that select cuBLAS plans, as torch and the environment hold them now."""
    m = torch.backends.cuda.matmul
    try:
        blas = str(torch.backends.cuda.preferred_blas_library())
    except Exception:  # an old torch without the switch
        blas = "cublas"
    out: dict[str, Any] = {"preferred_blas_library": blas, "allow_tf32": bool(m.allow_tf32)}
    for name in ("allow_bf16_reduced_precision_reduction", "allow_fp16_reduced_precision_reduction"):
        v = getattr(m, name, True)
        out[name] = v if isinstance(v, bool) else [bool(x) for x in v]
    for var in ("CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE"):
        out[var] = os.environ.get(var, "")
    try:
        out["deterministic_algorithms"] = bool(torch.are_deterministic_algorithms_enabled())
    except Exception:  # an old torch without the switch
        out["deterministic_algorithms"] = False
    return out


def device_info(torch: Any) -> dict[str, Any]:
    p = torch.cuda.get_device_properties(0)
    return {"gpu": torch.cuda.get_device_name(0), "sm_count": p.multi_processor_count, "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cublas": str(torch._C._cuda_getCompiledVersion()) if hasattr(torch._C, "_cuda_getCompiledVersion")
            else None}


def _tensor_meta(t: Any) -> dict[str, Any]:
    return {"shape": list(t.shape), "stride": list(t.stride()), "dtype": str(t.dtype).removeprefix("torch."),
            "offset": int(t.storage_offset()), "align": int(t.data_ptr() % 256)}


def _pick(n: int, k: int, gen: np.random.Generator) -> list[int]:
    """k indices of range(n): 0, n - 1 and random ones (all of them when n <= k)."""
    if n <= k:
        return list(range(n))
    rest = gen.choice(np.arange(1, n - 1), size=k - 2, replace=False) if n > 2 else np.array([], dtype=np.int64)
    return sorted({0, n - 1, *(int(x) for x in rest)})


def gemm_mode(on_gemm: Any) -> Any:
    """A ``TorchDispatchMode`` that runs every op and then calls ``on_gemm(name, args, kwargs, out)`` for the
    default overload of each GEMM op of :data:`OPS` (the capture here, the facade check of
    ``examples/model_replay.py``)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            name = func.overloadpacket.__name__
            if name in OPS and func.__name__.endswith("default"):
                on_gemm(name, args, kwargs, out)
            return out

    return _Mode()


class GemmCapture:
    """``with GemmCapture(rows=4, cols=4) as cap: model(x)``; then ``cap.save(path, phase_info)``.

    ``phase``: a label stored with each call (set it between steps: ``cap.phase = "decode 1"``);
    ``limit``: stop sampling after this many calls (later calls are counted, not sampled)."""

    def __init__(self, rows: int = 4, cols: int = 4, batches: int = 2, seed: int = 0, limit: int | None = None):
        import torch

        self.torch = torch
        self.rows, self.cols, self.batches, self.limit = rows, cols, batches, limit
        self.gen = np.random.default_rng(seed)
        self.calls: list[dict[str, Any]] = []
        self.arrays: dict[str, np.ndarray] = {}
        self.skipped: dict[str, int] = {}
        self.phase = ""
        self.settings = settings(torch)
        self._mode = gemm_mode(self._record)

    def __enter__(self) -> GemmCapture:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)

    # ---------------------------------------------------------------- recording
    def _record(self, name: str, args: tuple, kwargs: dict, out: Any) -> None:
        if self.limit is not None and len(self.calls) >= self.limit:
            self.skipped[name] = self.skipped.get(name, 0) + 1
            return
        torch = self.torch
        n = len(self.calls)
        rec: dict[str, Any] = {"n": n, "op": name, "phase": self.phase, "out": _tensor_meta(out)}
        if name in ("mm", "bmm"):
            A, B = args[0], args[1]
            C = None
        elif name in ("addmm", "baddbmm"):
            C, A, B = args[0], args[1], args[2]
            rec["beta"] = float(kwargs.get("beta", args[3] if len(args) > 3 else 1))
            rec["alpha"] = float(kwargs.get("alpha", args[4] if len(args) > 4 else 1))
            rec["C"] = _tensor_meta(C)
        else:  # _scaled_mm(mat1, mat2, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum)
            A, B = args[0], args[1]
            names = ("scale_a", "scale_b", "bias", "scale_result", "out_dtype", "use_fast_accum")
            extra = dict(zip(names, args[2:]))
            extra.update(kwargs)
            C = extra.get("bias")
            rec["scale_a"] = _tensor_meta(extra["scale_a"])
            rec["scale_b"] = _tensor_meta(extra["scale_b"])
            rec["bias"] = None if C is None else _tensor_meta(C)
            rec["scale_result"] = extra.get("scale_result") is not None
            rec["use_fast_accum"] = bool(extra.get("use_fast_accum", False))
        rec["A"], rec["B"] = _tensor_meta(A), _tensor_meta(B)
        batched = A.dim() == 3
        M = A.shape[-2]
        N = B.shape[-1]
        i_idx, j_idx = _pick(M, self.rows, self.gen), _pick(N, self.cols, self.gen)
        b_idx = _pick(A.shape[0], self.batches, self.gen) if batched else [None]
        rec["sample"] = {"rows": i_idx, "cols": j_idx, "batches": b_idx}
        dev = A.device
        it = torch.tensor(i_idx, device=dev)
        jt = torch.tensor(j_idx, device=dev)
        a_parts, b_parts, o_parts, c_parts = [], [], [], []
        for b in b_idx:
            Ab, Bb, Ob = (A[b], B[b], out[b]) if batched else (A, B, out)
            a_parts.append(bits(torch, Ab.index_select(0, it)))              # (r, K)
            b_parts.append(bits(torch, Bb.index_select(1, jt)))              # (K, c)
            o_parts.append(bits(torch, Ob.index_select(0, it).index_select(1, jt)))
            if C is not None and name in ("addmm", "baddbmm"):
                Cb = C[b] if (batched and C.dim() == 3) else C
                Cx = Cb.expand(Ob.shape) if Cb.dim() < 2 or Cb.shape != Ob.shape else Cb
                c_parts.append(bits(torch, Cx.index_select(0, it).index_select(1, jt)))
        key = f"c{n}_"
        self.arrays[key + "A"] = np.stack(a_parts)
        self.arrays[key + "B"] = np.stack(b_parts)
        self.arrays[key + "out"] = np.stack(o_parts)
        if c_parts:
            self.arrays[key + "C"] = np.stack(c_parts)
        if name == "_scaled_mm":
            for s in ("scale_a", "scale_b"):
                t = extra[s]
                self.arrays[key + s] = bits(torch, t.reshape(-1)[it] if t.numel() > 1 and s == "scale_a" else
                                            t.reshape(-1)[jt] if t.numel() > 1 else t.reshape(-1))
            if C is not None:
                self.arrays[key + "bias"] = bits(torch, C.reshape(-1)[jt])
        self.calls.append(rec)

    # ---------------------------------------------------------------- saving
    def save(self, path: str | Path, info: dict[str, Any] | None = None) -> tuple[Path, Path]:
        """Write ``path.npz`` (the sampled bit patterns) and ``path.json`` (the calls, settings, device)."""
        base = Path(path)
        npz, js = base.with_suffix(".npz"), base.with_suffix(".json")
        np.savez_compressed(npz, **self.arrays)  # type: ignore[arg-type]  # numpy's stub takes the names for flags
        doc = {"tool": "tcsmt.hwcheck.gemm_capture", "device": device_info(self.torch), "settings": self.settings,
               "info": info or {}, "calls": self.calls, "not_sampled": self.skipped, "arrays": npz.name}
        js.write_text(json.dumps(doc, indent=0) + "\n")
        return npz, js
