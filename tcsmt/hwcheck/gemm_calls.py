"""The GEMM calls a torch program makes, forward and backward, seen through a ``TorchDispatchMode``.

The mode sees the aten ops below autograd and autocast, with the operands torch hands to cuBLAS: ``mm``,
``addmm``, ``bmm``, ``baddbmm``, ``_scaled_mm`` (``F.linear`` and ``torch.matmul`` reach it as ``mm``/``addmm``/
``bmm`` on the flattened operands; autograd's input and weight gradients likewise).  :func:`gemm_calls` turns one
op with its operands (shape, strides, dtype, alignment: :class:`Operand`) into the recorder's calls
(:data:`tcsmt.hwcheck.record.FIELDS`): op, M, N, K, batch, dtypes, the layouts ``a_t``/``b_t``, bias, alpha,
beta, scale kind, fast accumulation; or into the reason it has none.  A call is taken only where the recorder
would make exactly the same torch call: every operand a contiguous tensor or the transposed view of one (the
strides compared exactly), starting on a 256-byte boundary, as the recorder's views of fresh buffers are; every
other call is counted under its reason, never guessed.  ``mm(x, W.t())`` and ``addmm(bias, x, W.t())`` are also
taken as the ``linear`` call that makes them (torch's ``at::linear``), so that both keys are recorded.

:func:`collector` makes the mode (torch needed); :func:`run_program` runs a script or module under it.
Standard library at import.
"""
from __future__ import annotations

import json
import runpy
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.stamp import read_setting

ALIGN = 256
"""The alignment (bytes) the recorder's operands have and a seen operand must have (cuBLASLt reads the operands'
alignment, up to 256 bytes, when it picks a kernel)."""
MODELLED = ("mm", "addmm", "bmm", "_scaled_mm", "linear")
NOT_MODELLED = ("baddbmm", "addbmm", "_addmm_activation", "addmv", "mv", "_int_mm", "_scaled_mm_v2", "_grouped_mm",
                "_scaled_grouped_mm", "matmul")
"""GEMM-like aten ops that are counted, with the reason, but not recorded (no plan model; ``matmul`` seen whole
hides the GEMMs it runs)."""
FLOATS = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


@dataclass(frozen=True)
class Operand:
    """What a GEMM call's plan may depend on in one tensor operand."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str
    misalign: int = 0
    """Bytes past a 256-byte boundary where its data starts (0: aligned)."""

    def __str__(self) -> str:
        return f"{self.dtype} {list(self.shape)} strides {list(self.stride)}"

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, s = [], 1
    for n in reversed(shape):
        out.append(s)
        s *= max(n, 1)
    return tuple(reversed(out))


def _layout(t: Operand, what: str, rows: int, cols: int, batch: int | None = None) -> bool:
    """False where ``t`` is a contiguous (rows, cols) tensor, True where it is the transposed view of a contiguous
    (cols, rows) one (batched: (batch, ...)); else TcsmtError naming its strides."""
    lead = (batch,) if batch is not None else ()
    want = (*lead, rows, cols)
    if tuple(t.shape) != want:
        raise TcsmtError(f"{what} {t}: shape {list(want)} expected")
    plain = _contiguous(want)
    tr = _contiguous((*lead, cols, rows))
    trans = (*tr[:-2], tr[-1], tr[-2])
    if t.stride == plain:
        return False
    if t.stride == trans:
        return True
    raise TcsmtError(f"{what} {t}: neither contiguous (strides {list(plain)}) nor the transposed view of a contiguous "
                     f"tensor (strides {list(trans)})")


def _aligned(*named: tuple[str, Operand | None]) -> None:
    for what, t in named:
        if t is not None and t.misalign:
            raise TcsmtError(f"{what} starts {t.misalign} bytes past a {ALIGN}-byte boundary (the recorder's operands "
                             "are aligned)")


def _dtype(x: Any) -> str:
    return str(x).removeprefix("torch.")


def _out(args: dict[str, Any], M: int, N: int, batch: int | None = None) -> None:
    """An ``out=`` tensor must be what the functional op allocates: contiguous and aligned."""
    out = args.get("out")
    if isinstance(out, Operand):
        if _layout(out, "out", M, N, batch):
            raise TcsmtError(f"out {out}: a transposed output is not modelled")
        _aligned(("out", out))


def _mm_like(op: str, args: dict[str, Any], A: Operand, B: Operand, batch: int | None) -> dict[str, Any]:
    if A.dtype != B.dtype:
        raise TcsmtError(f"A in {A.dtype}, B in {B.dtype}: mixed dtypes are _scaled_mm's only")
    if batch is None:
        if len(A.shape) != 2 or len(B.shape) != 2:
            raise TcsmtError(f"{op} of {len(A.shape)}-D and {len(B.shape)}-D operands")
        (M, K), N = A.shape, B.shape[1]
    else:
        if len(A.shape) != 3 or len(B.shape) != 3:
            raise TcsmtError(f"{op} of {len(A.shape)}-D and {len(B.shape)}-D operands")
        (_, M, K), N = A.shape, B.shape[2]
    a_t = _layout(A, "A", M, K, batch)
    b_t = _layout(B, "B", K, N, batch)
    _aligned(("A", A), ("B", B))
    _out(args, M, N, batch)
    out = _dtype(args["out_dtype"]) if args.get("out_dtype") is not None else A.dtype
    return {"op": op, "M": M, "N": N, "K": K, "batch": batch or 1, "a_dtype": A.dtype, "b_dtype": B.dtype,
            "out_dtype": out, "a_t": a_t, "b_t": b_t}


def _scaled(args: dict[str, Any]) -> dict[str, Any]:
    A, B, sa, sb = (args.get(k) for k in ("self", "mat2", "scale_a", "scale_b"))
    if not all(isinstance(x, Operand) for x in (A, B, sa, sb)):
        raise TcsmtError("_scaled_mm without tensor operands and scales")
    assert isinstance(A, Operand) and isinstance(B, Operand) and isinstance(sa, Operand) and isinstance(sb, Operand)
    (M, K), N = A.shape, B.shape[1]
    if _layout(A, "A", M, K):
        raise TcsmtError(f"A {A}: _scaled_mm takes a row-major A")
    if not _layout(B, "B", K, N):
        raise TcsmtError(f"B {B}: _scaled_mm takes a column-major B (the transposed view of an (N, K) weight)")
    if sa.dtype != "float32" or sb.dtype != "float32":
        raise TcsmtError(f"scales in {sa.dtype} and {sb.dtype}: float32 scales are modelled")
    if sa.numel == 1 and sb.numel == 1:
        scale = "tensor"
    elif sa.shape == (M, 1) and sb.shape == (1, N) and sa.stride == (1, 1) and sb.stride == (N, 1):
        scale = "row"
    else:
        raise TcsmtError(f"scales {sa} and {sb}: per-tensor or row-wise ((M, 1) and (1, N)) scales are modelled")
    if args.get("scale_result") is not None:
        raise TcsmtError("_scaled_mm with scale_result is not modelled")
    bias = args.get("bias")
    if isinstance(bias, Operand) and (bias.shape != (N,) or bias.stride != (1,)):
        raise TcsmtError(f"bias {bias}: a contiguous (N,) bias is modelled")
    _aligned(("A", A), ("B", B), ("bias", bias if isinstance(bias, Operand) else None))
    _out(args, M, N)
    out = _dtype(args["out_dtype"]) if args.get("out_dtype") is not None else A.dtype
    return {"op": "scaled_mm", "M": M, "N": N, "K": K, "a_dtype": A.dtype, "b_dtype": B.dtype, "out_dtype": out,
            "scale": scale, "fast_accum": bool(args.get("use_fast_accum", False)), "bias": isinstance(bias, Operand),
            "b_t": True}


def gemm_calls(op: str, overload: str, args: dict[str, Any], *, tf32: bool = False) -> list[dict[str, Any]]:
    """The recorder's calls (usually one) of one aten GEMM op, with its arguments by schema name (tensors as
    :class:`Operand`, dtypes by name); TcsmtError with the reason where it has none.  ``tf32``: torch's
    ``allow_tf32`` at the call (float32 calls)."""
    if op in NOT_MODELLED:
        if op == "matmul":
            raise TcsmtError("aten.matmul seen whole: the GEMMs it runs are hidden from the mode")
        raise TcsmtError(f"{op}: tcsmt has no plan model for it (ops: mm, addmm, linear, bmm, _scaled_mm)")
    if op not in MODELLED:
        raise TcsmtError(f"{op} is not a GEMM op this recorder knows")
    if overload not in ("default", "dtype", "out", "dtype_out"):
        raise TcsmtError(f"{op}.{overload}: not a modelled overload")
    if op == "_scaled_mm":
        return [_scaled(args)]
    if op == "linear":
        x, W, bias = args.get("input"), args.get("weight"), args.get("bias")
        if not isinstance(x, Operand) or not isinstance(W, Operand):
            raise TcsmtError("linear without tensor operands")
        K = x.shape[-1]
        M = x.numel // max(K, 1)
        if x.stride != _contiguous(x.shape) or W.stride != _contiguous(W.shape) or len(W.shape) != 2:
            raise TcsmtError(f"linear of {x} and {W}: contiguous input and weight are modelled")
        if isinstance(bias, Operand) and bias.stride != (1,):
            raise TcsmtError(f"bias {bias}: a contiguous (N,) bias is modelled")
        _aligned(("input", x), ("weight", W), ("bias", bias if isinstance(bias, Operand) else None))
        call: dict[str, Any] = {"op": "linear", "M": M, "N": W.shape[0], "K": K, "a_dtype": x.dtype, "b_dtype": W.dtype,
                "out_dtype": x.dtype, "bias": isinstance(bias, Operand), "b_t": True}
        return [_tf32(call, tf32)]
    if op in ("mm", "bmm"):
        A, B = args.get("self"), args.get("mat2")
        if not isinstance(A, Operand) or not isinstance(B, Operand):
            raise TcsmtError(f"{op} without tensor operands")
        call = _tf32(_mm_like(op, args, A, B, A.shape[0] if op == "bmm" else None), tf32)
        if op == "mm" and overload == "default" and not call["a_t"] and call["b_t"]:
            return [call, {**call, "op": "linear", "b_t": True}]  # at::linear(x, W) is mm(x, W.t())
        return [call]
    # addmm
    C, A, B = args.get("self"), args.get("mat1"), args.get("mat2")
    if not all(isinstance(x, Operand) for x in (C, A, B)):
        raise TcsmtError("addmm without tensor operands")
    assert isinstance(C, Operand) and isinstance(A, Operand) and isinstance(B, Operand)
    call = _mm_like("addmm", args, A, B, None)
    rows, cols = int(call["M"]), int(call["N"])
    if C.shape == (cols,) and C.stride == (1,):
        bias = True
    elif C.shape == (rows, cols) and C.stride == (cols, 1):
        bias = False
    else:
        raise TcsmtError(f"addmm's input {C}: a bias (N,) or a contiguous (M, N) matrix are modelled")
    if C.dtype != call["out_dtype"]:
        raise TcsmtError(f"addmm's input in {C.dtype}, output in {call['out_dtype']}: not modelled")
    _aligned(("C", C))
    alpha, beta = float(args.get("alpha", 1)), float(args.get("beta", 1))
    call = _tf32({**call, "bias": bias, "alpha": alpha, "beta": beta}, tf32)
    if bias and alpha == 1.0 and beta == 1.0 and overload == "default" and not call["a_t"] and call["b_t"]:
        lin = {k: v for k, v in call.items() if k not in ("alpha", "beta")}
        return [call, {**lin, "op": "linear"}]  # at::linear(x, W, b) is addmm(b, x, W.t())
    return [call]


def _tf32(call: dict[str, Any], tf32: bool) -> dict[str, Any]:
    return {**call, "tf32": bool(tf32) and call["a_dtype"] == "float32"}


# ------------------------------------------------------------------------------------------------ the mode
@dataclass
class Collected:
    """What a program's GEMMs were: ``calls`` (key -> {call, setting, count, aten, device}) and ``skipped``
    (reason -> {count, example})."""

    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, dict[str, Any]] = field(default_factory=dict)
    seen: int = 0

    def skip(self, why: str, example: str) -> None:
        s = self.skipped.setdefault(why, {"count": 0, "example": example})
        s["count"] += 1

    def add(self, call: dict[str, Any], setting: dict[str, Any], aten: str, device: str) -> None:
        key = json.dumps([call, setting], sort_keys=True)
        e = self.calls.setdefault(key, {"call": call, "setting": setting, "count": 0, "aten": aten, "device": device})
        e["count"] += 1


def operand(torch: Any, t: Any) -> Operand:
    """A tensor as an :class:`Operand` (alignment from its address on a GPU, else from its storage offset)."""
    misalign = None
    if t.device.type == "cuda":
        try:
            misalign = int(t.data_ptr()) % ALIGN
        except Exception:  # a fake tensor has no address
            misalign = None
    if misalign is None:
        misalign = (int(t.storage_offset()) * int(t.element_size())) % ALIGN
    return Operand(tuple(int(s) for s in t.shape), tuple(int(s) for s in t.stride()), _dtype(t.dtype), misalign)


def _setting(torch: Any, dtype: str) -> dict[str, Any]:
    """The call's library settings (the process environment aside): BLAS library and, for 16-bit inputs, the
    reduced-precision pair; TcsmtError where fp16 accumulation is on (not modelled)."""
    s = read_setting(torch)
    if dtype == "float16" and s["fp16_accumulation"]:
        raise TcsmtError("torch.backends.cuda.matmul.allow_fp16_accumulation is on: fp16 accumulation is not modelled")
    return {"blas": s["blas"], "reduced": s["reduced"].get(dtype, [True, True])}


def note(torch: Any, found: Collected, func: Any, args: tuple, kwargs: dict[str, Any]) -> None:
    """Count one aten op the mode saw: its calls, or the reason it has none."""
    schema = func._schema
    op = schema.name.split("::")[-1]
    overload = getattr(func, "_overloadname", "default") or "default"
    bound: dict[str, Any] = {}
    for i, a in enumerate(schema.arguments):
        if i < len(args):
            v = args[i]
        elif a.name in kwargs:
            v = kwargs[a.name]
        elif a.has_default_value():
            v = a.default_value
        else:
            continue
        if isinstance(v, torch.Tensor):
            v = operand(torch, v)
        elif isinstance(v, torch.dtype):
            v = _dtype(v)
        bound[a.name] = v
    found.seen += 1
    tensors = [v for v in bound.values() if isinstance(v, Operand)]
    aten = f"aten.{op}.{overload}"
    example = f"{aten}(" + ", ".join(str(t) for t in tensors) + ")"
    device = next((str(a.device.type) for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)), "?")
    try:
        dtype = tensors[0].dtype if tensors else ""
        if op in MODELLED and dtype and dtype not in FLOATS:
            raise TcsmtError(f"{op} on {dtype}: no plan model for that dtype")
        calls = gemm_calls(op, overload, bound, tf32=bool(torch.backends.cuda.matmul.allow_tf32))
        setting = _setting(torch, calls[0]["a_dtype"])
    except TcsmtError as exc:
        found.skip(str(exc), example)
        return
    for c in calls:
        found.add(c, setting, aten, device)


WATCHED = frozenset(MODELLED + NOT_MODELLED)


def collector(torch: Any) -> Any:
    """A TorchDispatchMode whose ``found`` (:class:`Collected`) gathers the GEMM calls made while it is active.
    It never changes what the program computes: every op runs as it would."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class GemmCollector(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.found = Collected()

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            kwargs = kwargs or {}
            if func._schema.name.split("::")[-1] in WATCHED:
                try:
                    note(torch, self.found, func, args, kwargs)
                except Exception as exc:  # never break the program: count it
                    self.found.skip(f"not read ({type(exc).__name__}: {exc})", str(func))
            return func(*args, **kwargs)

    return GemmCollector()


def run_program(kind: str, target: str, argv: list[str]) -> None:
    """Run a Python script (``kind`` = ``"script"``) or module (``"module"``) as ``__main__`` with ``argv`` as its
    arguments; its failure is one TcsmtError."""
    old = sys.argv[:]
    sys.argv = [target, *argv]
    try:
        if kind == "script":
            runpy.run_path(target, run_name="__main__")
        else:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise TcsmtError(f"{kind} {target} exited with status {exc.code}") from None
    except TcsmtError:
        raise
    except Exception as exc:
        raise TcsmtError(f"{kind} {target} raised {type(exc).__name__}: {' '.join(str(exc).split())[:300]} (run it "
                         "alone to see the traceback)") from None
    finally:
        sys.argv = old


def collect(torch: Any, run: Callable[[], None]) -> Collected:
    """The GEMM calls ``run()`` makes, forward and backward (autograd's threads inherit the mode)."""
    mode = collector(torch)
    with mode:
        run()
    return mode.found
