"""The plan recorder a user runs on their CUDA GPU: which cuBLAS plan torch runs for each call.

:func:`record_calls` makes each call (views of flat device buffers, the operand layouts the call names) under CUDA
graph capture, so nothing executes, and reads the kernels of the captured graph through the driver API
(:mod:`tcsmt.hwcheck.plan_capture`) and cuBLASLt's own trace of the call (numSplitsK, reductionScheme, algo:
:mod:`tcsmt.hwcheck.lt_trace`); where
capture fails (an old driver without the graph API it reads, a call that cannot be captured) the calls run instead,
under ``torch.profiler``.  The result is a recording in the device recorder's format (``tools/device/
record_plans.py``: a header with the GPU, its SM count, the driver, torch, CUDA, cuBLAS and cuBLASLt versions and
the setting (:mod:`tcsmt.hwcheck.stamp`); interned kernel names, trace summaries and plans; one task listing the
calls with a row per call),
which :mod:`tcsmt.library.catalog_build` turns into a plan catalog.  Standard library at import; torch (with CUDA)
when a function needs it.  ``tcsmt record`` (:mod:`tcsmt.cli.record_cmd`) is the command.

A call is a dict of :data:`FIELDS`: the plan tables' call fields and the operand layouts (``a_t``: A is the
transposed view of a contiguous (K, M) tensor; ``b_t``: B is the transposed view of a contiguous (N, K) tensor,
which ``linear`` and ``scaled_mm`` always take).  A setting is ``{"name", "blas", "reduced": [allow reduced
precision, allow split-K], "env": {...}}``; the environment variables act when the process starts, so a setting
records only the values this process runs with.
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck import plan_capture as PC
from tcsmt.hwcheck.lt_trace import LtTrace, lib_path, parse_lt
from tcsmt.hwcheck.stamp import UNKEYED_ENV, apply_setting, device_info, read_setting

FORMAT = "tcsmt cuBLAS plan recordings, v1"
FIELDS = ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta", "tf32", "scale",
          "fast_accum", "a_t", "b_t")
DEFAULTS: dict[str, Any] = {"batch": 1, "bias": False, "alpha": 1.0, "beta": 0.0, "tf32": False, "scale": None,
                            "fast_accum": False, "a_t": False, "b_t": False}
SIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}
PLAN_FIELDS = ["kernels", "blocks", "clusters", "grid_z", "other_nodes", "split_k", "reduction_scheme", "lt",
               "torch_error", "capture_error", "gemv_dealing", "segment_k_launch"]
"""A plan's fields; ``gemv_dealing``: per kernel, [tile, stride] of a ``gemvx`` launch's parameters
(:data:`tcsmt.hwcheck.gemv_launch.GEMV_PARAMS`), else None (recordings made before 2026-11-27 lack the field);
``segment_k_launch``: per kernel, the words of a ``segment_k_on`` launch (problem, segments, swizzle, raster, grid,
cluster: :func:`tcsmt.hwcheck.segment_k_launch.segment_k_launch`), else None (recordings made before 2026-11-27 (late night) lack
the field, and the catalogs refuse their ``segment_k_on`` calls)."""
METHOD_TEXT = {
    "capture": ("Each call is made under CUDA stream capture (torch.cuda.CUDAGraph(keep_graph=True), one memory pool "
                "per batch, capture_error_mode thread_local, on a side stream whose cuBLAS/cuBLASLt workspaces were "
                "made by executed warm-up calls), so nothing executes; a 4-byte cuMemsetD32Async of the call's index "
                "on a marker buffer precedes each call. The captured graph is read with the driver API (ctypes on "
                "libcuda: cuGraphGetNodes, cuGraphGetEdges_v2, cuGraphNodeGetType, cuGraphKernelNodeGetParams_v2 -> "
                "cuFuncGetName, demangled, shortened like the profiler's names); cuBLASLt's trace "
                "(cublasLtLoggerSetCallback, level 2) is read per call: numSplitsK (1 where an algo is traced "
                "without it), reductionScheme, algo. Operands are views of zeroed flat buffers (offset 0)."),
    "executed": ("Each call runs on the GPU under torch.profiler (kernels matched to record_function labels by "
                 "correlation id); operands are views of zeroed flat buffers; cuBLASLt's trace as in capture."),
}


def norm_call(c: dict[str, Any]) -> dict[str, Any]:
    d = {k: c.get(k, DEFAULTS.get(k)) for k in FIELDS}
    d["b_dtype"] = d["b_dtype"] or d["a_dtype"]
    d["out_dtype"] = d["out_dtype"] or d["a_dtype"]
    return d


def call_bytes(c: dict[str, Any]) -> tuple[int, int, int]:
    """Bytes of A, B and the output (and of C, which has the output's shape)."""
    bt, M, N, K = c["batch"], c["M"], c["N"], c["K"]
    return bt * M * K * SIZE[c["a_dtype"]], bt * K * N * SIZE[c["b_dtype"]], bt * M * N * SIZE[c["out_dtype"]]


class Buffers:
    """Flat zeroed uint8 device buffers for A, B and C/bias (and fp32 scales), grown on demand; a call's operands
    are views of them at offset 0."""

    def __init__(self, torch: Any):
        self.torch = torch
        self.bufs: dict[str, Any] = {}
        self.scales = torch.ones(1, device="cuda", dtype=torch.float32)
        self.one = torch.ones((), device="cuda", dtype=torch.float32)

    def ensure(self, calls: Sequence[dict[str, Any]]) -> None:
        t = self.torch
        need = {"A": 1 << 16, "B": 1 << 16, "C": 1 << 16}
        for c in calls:
            a, b, o = call_bytes(c)
            need["A"], need["B"], need["C"] = max(need["A"], a), max(need["B"], b), max(need["C"], o)
        for k, n in need.items():
            cur = self.bufs.get(k)
            if cur is None or cur.numel() < n:
                self.bufs.pop(k, None)
                del cur
                t.cuda.empty_cache()
                self.bufs[k] = t.zeros(n, dtype=t.uint8, device="cuda")
        rows = max([max(c["M"], c["N"]) for c in calls] + [1])
        if self.scales.numel() < rows:
            self.scales = t.ones(rows, device="cuda", dtype=t.float32)

    def view(self, slot: str, dtype: str, shape: tuple[int, ...]) -> Any:
        n = 1
        for s in shape:
            n *= s
        return self.bufs[slot][: n * SIZE[dtype]].view(getattr(self.torch, dtype)).view(*shape)


def make_fn(torch: Any, c: dict[str, Any], bufs: Buffers) -> Callable[[], Any]:
    """A zero-argument function that makes the call's torch call on views of the buffers (no kernel launched
    before the call itself)."""
    F = torch.nn.functional
    op, M, N, K, bt = c["op"], c["M"], c["N"], c["K"], c["batch"]
    a_dt, b_dt, o_dt = c["a_dtype"], c["b_dtype"], c["out_dtype"]
    out_kw = {} if o_dt == a_dt or op == "scaled_mm" else {"out_dtype": getattr(torch, o_dt)}
    tf32 = bool(c["tf32"])
    mm = torch.backends.cuda.matmul
    W = None
    if op == "bmm":
        A = bufs.view("A", a_dt, (bt, K, M)).transpose(1, 2) if c["a_t"] else bufs.view("A", a_dt, (bt, M, K))
        B = bufs.view("B", b_dt, (bt, N, K)).transpose(1, 2) if c["b_t"] else bufs.view("B", b_dt, (bt, K, N))
    else:
        A = bufs.view("A", a_dt, (K, M)).t() if c["a_t"] else bufs.view("A", a_dt, (M, K))
        if op in ("linear", "scaled_mm") or c["b_t"]:
            W = bufs.view("B", b_dt, (N, K))
            B = W.t()
        else:
            B = bufs.view("B", b_dt, (K, N))
    if op == "linear":
        bias = bufs.view("C", a_dt, (N,)) if c["bias"] else None

        def fn() -> Any:
            mm.allow_tf32 = tf32
            return F.linear(A, W, bias)
    elif op == "mm":
        def fn() -> Any:
            mm.allow_tf32 = tf32
            return torch.mm(A, B, **out_kw)
    elif op == "bmm":
        def fn() -> Any:
            mm.allow_tf32 = tf32
            return torch.bmm(A, B, **out_kw)
    elif op == "addmm":
        C = bufs.view("C", o_dt, (N,)) if c["bias"] else bufs.view("C", o_dt, (M, N))
        alpha, beta = c["alpha"], c["beta"]

        def fn() -> Any:
            mm.allow_tf32 = tf32
            return torch.addmm(C, A, B, beta=beta, alpha=alpha, **out_kw)
    elif op == "scaled_mm":
        if c["scale"] == "row":
            sa, sb = bufs.scales[:M].view(M, 1), bufs.scales[:N].view(1, N)
        else:
            sa = sb = bufs.one
        sbias = bufs.view("C", o_dt, (N,)) if c["bias"] else None
        odt, fast = getattr(torch, o_dt), bool(c["fast_accum"])

        def fn() -> Any:
            r = torch._scaled_mm(A, B, scale_a=sa, scale_b=sb, bias=sbias, out_dtype=odt, use_fast_accum=fast)
            return r[0] if isinstance(r, tuple) else r
    else:
        raise TcsmtError(f"the recorder makes no {op!r} call (ops: linear, mm, bmm, addmm, scaled_mm)")
    return fn


# ------------------------------------------------------------------------------------------------ recording
class Interner:
    def __init__(self) -> None:
        self.items: list[Any] = []
        self.index: dict[Any, int] = {}

    def __call__(self, x: Any) -> int:
        key = repr(x) if isinstance(x, (list, dict)) else x
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.items)
            self.items.append(x)
        return i


def plan_of(r: dict[str, Any], tabs: dict[str, Interner]) -> tuple[list[Any], list[Any], list[int]]:
    """(plan, grids, workspace bytes) of one recorded call (:data:`PLAN_FIELDS`; grids and workspace bytes vary with
    the shape and are kept per row)."""
    S, red, summ, ws = parse_lt(r.get("lt") or [])
    ks = [n for n in r["nodes"] if "name" in n]
    others = [n["type"] for n in r["nodes"] if "name" not in n]
    plan = [[tabs["kernels"](n["name"]) for n in ks], [n["block"] for n in ks], [n["cluster"] for n in ks],
            [(n["grid"] or [0, 0, 0])[2] for n in ks], others, S, red, [tabs["lt"](s) for s in summ],
            tabs["errors"](r["err"]) if r.get("err") else None,
            tabs["errors"](r["capture_err"]) if r.get("capture_err") else None,
            [n.get("gemv_dealing") for n in ks], [n.get("segment_k_launch") for n in ks]]
    return plan, [n["grid"] for n in ks], ws


def record_calls(torch: Any, calls: Sequence[dict[str, Any]], setting: dict[str, Any], *, method: str = "capture",
                 batch: int = 256, name: str = "recorded",
                 progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The recording of ``calls`` (dicts of :data:`FIELDS`) under ``setting`` (``name``, ``blas``, ``reduced``: the
    pair both 16-bit dtypes get; the environment is this process's), made by ``method`` (``capture``, falling
    back to ``executed`` for the calls whose capture fails, or ``executed``).  torch's own settings are restored
    afterwards.  ``progress`` gets a line per batch of calls.  Interrupted (Ctrl-C, SIGTERM as
    KeyboardInterrupt), it returns the recording of the batches it finished, with ``"interrupted": true``."""
    if method not in METHOD_TEXT:
        raise TcsmtError(f"unknown recording method {method!r} (capture, executed)")
    bad = [k for k in UNKEYED_ENV if os.environ.get(k)]
    if bad:
        raise TcsmtError(f"{', '.join(bad)} set: it changes which plan torch runs and no settings key holds it; "
                         "record without it")
    todo = [norm_call(c) for c in calls]
    before = read_setting(torch)
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    fp16_acc = getattr(torch.backends.cuda.matmul, "allow_fp16_accumulation", None)
    if fp16_acc:  # fp16 accumulation is not modelled: the recorded fp16 calls accumulate in fp32
        torch.backends.cuda.matmul.allow_fp16_accumulation = False
    said = apply_setting(torch, setting.get("blas", "cublas"), setting.get("reduced", (True, True)))
    notes: list[str] = []
    results: list[dict[str, Any]] = []
    lt: LtTrace | None = None
    interrupted = False
    info: dict[str, Any] = {}
    cap: PC.Capturer | None = None
    executed = 0
    try:
        info = device_info(torch)
        info["setting_said"] = said
        try:
            lt = LtTrace(lib_path("libcublasLt.so") or "libcublasLt.so")
        except Exception as exc:  # no trace: split-K counts stay unknown, and the catalog says so
            notes.append(f"no cuBLASLt trace ({type(exc).__name__}: {exc}): split_k not recorded")
        bufs = Buffers(torch)
        bufs.ensure(todo)
        if method == "capture":
            try:
                cap = PC.Capturer(torch, lt)
            except Exception as exc:
                notes.append(f"capture unavailable ({type(exc).__name__}: {exc}): every call executed")
        warm = [norm_call({"op": "mm", "M": 64, "N": 64, "K": 64, "a_dtype": "bfloat16"}),
                norm_call({"op": "linear", "M": 64, "N": 64, "K": 64, "a_dtype": "bfloat16", "bias": True})]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.cuda.stream(cap.stream if cap else torch.cuda.current_stream()):
                for c in warm:  # torch's per-(handle, stream) workspaces, made outside capture
                    try:
                        make_fn(torch, c, bufs)()
                    except Exception as exc:
                        notes.append(f"warm-up {c['op']}: {type(exc).__name__}: {exc}")
                torch.cuda.synchronize()
            for i in range(0, len(todo), batch):
                if interrupted:
                    break
                chunk = todo[i:i + batch]
                fns = [_fn_or_refusal(torch, c, bufs) for c in chunk]
                if cap is not None:
                    cap.begin_task(max(call_bytes(c)[2] for c in chunk) + (64 << 20))
                    res = cap.record(fns)
                    cap.end_task()
                    redo = [j for j, r in enumerate(res) if r.get("capture_err")]
                    if redo:  # the fallback: these calls run, under the profiler
                        for j, r in zip(redo, PC.record_executed(torch, [fns[j] for j in redo], lt)):
                            res[j] = r
                        executed += len(redo)
                else:
                    res = PC.record_executed(torch, fns, lt)
                results += res
                if progress is not None:
                    progress(f"recorded {len(results)} of {len(todo)} calls ({setting.get('name', 'default')})")
    except KeyboardInterrupt:
        interrupted = True
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
        if fp16_acc:
            torch.backends.cuda.matmul.allow_fp16_accumulation = fp16_acc
        apply_setting(torch, before["blas"], before["reduced"]["bfloat16"])
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = tuple(before["reduced"]["float16"])
        if lt is not None:
            lt.close()
    used = "capture" if cap is not None else "executed"
    if cap is not None and executed:
        notes.append(f"{executed} of {len(todo)} calls executed under torch.profiler where capture failed")
    method_text = METHOD_TEXT[used] + ("" if used == "executed" or not executed else
                                       " Calls whose capture failed: " + METHOD_TEXT["executed"])
    if interrupted:
        notes.append(f"interrupted: {len(results)} of {len(todo)} calls recorded")
    rec = recording(todo[:len(results)], results, setting, info,
                    used + (f" ({executed} calls executed where capture failed)" if executed else ""), method_text,
                    notes, name)
    if interrupted:
        rec["interrupted"] = True
    return rec


def recording(calls: Sequence[dict[str, Any]], results: Sequence[dict[str, Any]], setting: dict[str, Any],
              device: dict[str, Any], method: str, method_text: str, notes: Sequence[str],
              name: str = "recorded") -> dict[str, Any]:
    """The recording (the device recorder's format, one task listing the calls) of ``calls`` and their ``results``
    (one each: ``nodes``, ``lt`` trace lines, ``err``, ``capture_err``, as :mod:`tcsmt.hwcheck.plan_capture`
    gives them)."""
    if len(calls) != len(results):
        raise TcsmtError(f"{len(calls)} calls but {len(results)} recorded results")
    tabs = {"kernels": Interner(), "lt": Interner(), "errors": Interner()}
    plans = Interner()
    rows: list[list[Any]] = []
    for i, r in enumerate(results):
        p, g, w = plan_of(r, tabs)
        rows.append([i, plans(p), g, w])
    todo = [norm_call(c) for c in calls]
    return {"format": FORMAT, "name": name, "setting": dict(setting), "method": method, "method_text": method_text,
            "notes": list(notes), "fields": list(FIELDS), "plan_fields": PLAN_FIELDS,
            "list_row": ["index", "plan", "grids", "workspace"], "device": device,
            "tables": {"kernels": tabs["kernels"].items, "lt": tabs["lt"].items, "errors": tabs["errors"].items,
                       "plans": plans.items},
            "tasks": [{"kind": "list", "list": name, "id": 0, "n": len(todo),
                       "calls": [[c[k] for k in FIELDS] for c in todo], "rows": rows}]}


def _fn_or_refusal(torch: Any, c: dict[str, Any], bufs: Buffers) -> Callable[[], Any]:
    try:
        return make_fn(torch, c, bufs)
    except Exception as exc:
        msg = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"

        def refused() -> Any:
            raise RuntimeError("making the call: " + msg)
        return refused
