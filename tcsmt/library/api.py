"""Library GEMMs as users call them: ``plan`` (what cuBLAS does for one call) and ``run`` (its outputs).

``plan(op, M, N, K, *, gpu, a_dtype, ...)`` returns the recorded :class:`Plan`
of the call (printable, with provenance); ``run(plan, A_rows, B_cols, ...)``
computes the (r, c) outputs of the full call at some rows of A and columns of
B, bit for bit, without computing the others.  The numpy functions ``mm``,
``addmm``, ``linear``, ``bmm`` and ``scaled_mm`` take whole matrices of bit
patterns (dtype names as torch spells them) for users without torch;
:mod:`tcsmt.torch` takes torch tensors.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tcsmt.arith.formats import FP32, get_format
from tcsmt.errors import TcsmtError
from tcsmt.library.checks import make_call
from tcsmt.library.evaluate import array_module, checked_bits, evaluate, evaluate_pairs, fmt_of, inputs_to_chain, to_fp32
from tcsmt.library.lookup import Answer, Target
from tcsmt.library.plans import C_STEPS, Call, Plan
from tcsmt.library.record_missing import answer_for

__all__ = ["Answer", "Call", "Plan", "Target", "addmm", "bmm", "explain", "linear", "mm", "plan", "run", "run_pairs", "scaled_mm"]


def plan(op: str, M: int, N: int, K: int, *, gpu: str | Target = "h100", a_dtype: str, b_dtype: str | None = None,
         out_dtype: str | None = None, batch: int = 1, alpha: float = 1.0, beta: float = 0.0, bias: bool = False,
         tf32: bool = False, scale: str | None = None, fast_accum: bool = False, a_t: bool | None = None,
         b_t: bool | None = None, settings: str | None = None) -> Plan:
    """The recorded plan of one call on ``gpu`` (TcsmtError for calls torch refuses or no recording covers).

    ``gpu`` is a plan name (``"h100"``, ``"h200"``) or a :class:`Target` (the running GPU's stamp, settings and
    layouts; the torch facade makes it).  ``a_t``/``b_t``: operand layouts of mm/addmm/bmm (A a transposed view of
    a (K, M) tensor, B of an (N, K) tensor); ``settings``: a key of :func:`tcsmt.library.settings.settings_key`
    (default: torch's defaults).  Explicit arguments win over the Target's."""
    return explain(op, M, N, K, gpu=gpu, a_dtype=a_dtype, b_dtype=b_dtype, out_dtype=out_dtype, batch=batch,
                   alpha=alpha, beta=beta, bias=bias, tf32=tf32, scale=scale, fast_accum=fast_accum, a_t=a_t, b_t=b_t,
                   settings=settings).plan


def explain(op: str, M: int, N: int, K: int, *, gpu: str | Target = "h100", a_dtype: str, b_dtype: str | None = None,
            out_dtype: str | None = None, batch: int = 1, alpha: float = 1.0, beta: float = 0.0, bias: bool = False,
            tf32: bool = False, scale: str | None = None, fast_accum: bool = False, a_t: bool | None = None,
            b_t: bool | None = None, settings: str | None = None) -> Answer:
    """:func:`plan` with its provenance: whether it was recorded in a table or a catalog, and the recordings."""
    t = gpu if isinstance(gpu, Target) else Target(str(gpu).lower())
    call = make_call(op, M, N, K, a_dtype=a_dtype, b_dtype=b_dtype, out_dtype=out_dtype, batch=batch, alpha=alpha,
                     beta=beta, bias=bias, tf32=tf32, scale=scale, fast_accum=fast_accum,
                     a_t=t.a_t if a_t is None else a_t, b_t=t.b_t if b_t is None else b_t,
                     settings=t.settings if settings is None else settings)
    return answer_for(call, t)


_plan_of = plan  # the facades' ``plan`` argument shadows the function


def _fits(given: Plan | None, op: str, M: int, N: int, K: int, *, gpu: str | Target, **kw: Any) -> Plan:
    """The plan of a facade call: the recorded one, or ``given``, which must fit this call (the same dtypes,
    tf32/scale/fast_accum flags and K: a float16 plan must not read bfloat16 patterns; the op may differ, as
    bmm runs an mm plan per batch).  Every argument is checked as :func:`plan` checks it."""
    if given is None:
        return _plan_of(op, M, N, K, gpu=gpu, **kw)
    if not isinstance(given, Plan):
        raise TcsmtError(f"plan must be a Plan (from tcsmt.library.plan), not {type(given).__name__}")
    call = make_call(op, M, N, K, **kw)
    theirs = given.call
    for name in ("a_dtype", "b_dtype", "out_dtype", "tf32", "scale", "fast_accum", "K"):
        if getattr(theirs, name) != getattr(call, name):
            raise TcsmtError(f"the plan is for {theirs.label()}, not for this call ({call.label()}): its {name} "
                             f"is {getattr(theirs, name)}, the call's {getattr(call, name)}")
    return given


def _is_torch(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _bits(x: Any, fmt, what: str, dtype: str) -> np.ndarray:
    """Checked patterns of ``fmt``; a torch tensor must have torch dtype ``dtype`` (its bits are taken as they are;
    a CUDA tensor's stay on its GPU where CuPy runs: :func:`tcsmt.library.tensors.tensor_patterns`)."""
    if _is_torch(x):
        from tcsmt.library.tensors import dtype_name, tensor_patterns

        if dtype_name(x) != dtype:
            raise TcsmtError(f"{what} is a {x.dtype} tensor; the plan takes {dtype}")
        x = tensor_patterns(x)
    return checked_bits(x, fmt, what)


def _matrix(x: Any, fmt, what: str, dtype: str) -> np.ndarray:
    b = _bits(x, fmt, what, dtype)
    if b.ndim != 2:
        raise TcsmtError(f"{what} must be a 2-D array, got shape {b.shape}")
    return b


def _scale(x: Any, n: int, kind: str, what: str) -> np.ndarray:
    if x is None:
        raise TcsmtError(f"the plan scales its outputs: pass {what}")
    s = _bits(x, FP32, what, "float32").astype(np.int64)
    if kind == "tensor" and s.size != 1:
        raise TcsmtError(f"{what} of a per-tensor scaled call must hold one value, got shape {s.shape}")
    if kind == "row" and s.size != n:
        raise TcsmtError(f"{what} of a row-wise scaled call must hold {n} values (one per row/column given), "
                         f"got shape {s.shape}")
    return s.reshape(-1)


def run(plan: Plan, A_rows, B_cols, *, C=None, bias=None, scale_a=None, scale_b=None, rows=None, cols=None):
    """Outputs (r, c) of the plan's call at rows A_rows (r, K) of A and columns B_cols (K, c) of B.

    Inputs are numpy arrays of the dtype's bit patterns (or of exactly
    representable float values) or torch tensors; C (r, c), bias (c,), scale_a
    and scale_b (one value, or r / c values row-wise) are the slices that go
    with those rows and columns.  ``rows``, ``cols``: the call's indices of the
    rows and columns given (a segment-K plan, whose outputs differ by tile,
    needs them unless A_rows holds all M rows and B_cols all N columns).
    Returns the output dtype's bit patterns as a numpy array, or a torch tensor
    of the output dtype on A_rows' device.
    """
    A, B, kw = _checked(plan, A_rows, B_cols, C, bias, scale_a, scale_b, paired=False)
    out = evaluate(plan, A, B, **kw, rows=rows, cols=cols)
    if _is_torch(A_rows):
        from tcsmt.library.tensors import bits_tensor

        return bits_tensor(out, plan.call.out_dtype, A_rows.device)
    return out


def run_pairs(plan: Plan, A_rows, B_cols, *, C=None, bias=None, scale_a=None, scale_b=None, rows=None,
              cols=None) -> np.ndarray:
    """Outputs (n,) of the plan's call at n (row, column) pairs: row i of A_rows (n, K) with column i of
    B_cols (K, n); C, bias and row-wise scales hold one value per pair (n,), per-tensor scales one value;
    ``rows``, ``cols`` (n,): each pair's output indices in the call (a segment-K plan needs them).

    The arithmetic of :func:`run` (which computes every row with every column), for scattered outputs
    such as a validation file's samples; numpy bit patterns in and out.
    """
    A, B, kw = _checked(plan, A_rows, B_cols, C, bias, scale_a, scale_b, paired=True)
    return evaluate_pairs(plan, A, B, **kw, rows=rows, cols=cols)


def _checked(plan: Plan, A_rows, B_cols, C, bias, scale_a, scale_b, *, paired: bool):
    """Checked input patterns (converted to the chain's format) and the epilogue operands as fp32 patterns."""
    if not isinstance(plan, Plan):
        raise TcsmtError(f"run needs a Plan (from tcsmt.library.plan), not {type(plan).__name__}")
    call = plan.call
    fin = fmt_of(call.a_dtype) if plan.in_round else get_format(plan.chain.in_fmt)  # in_round: fp32 -> tf32 below
    fin_b = fmt_of(call.b_dtype) if plan.in_round else get_format(plan.chain.b_format)  # B's own format (mixed fp8)
    A = inputs_to_chain(plan, _matrix(A_rows, fin, "A_rows", call.a_dtype))
    B = inputs_to_chain(plan, _matrix(B_cols, fin_b, "B_cols", call.b_dtype))
    r, K = A.shape
    if K != call.K or B.shape[0] != call.K:
        raise TcsmtError(f"the plan is for K = {call.K}: A_rows must be (r, {call.K}) and B_cols ({call.K}, c); "
                         f"got {A.shape} and {B.shape}")
    c = B.shape[1]
    if paired:
        if r != c:
            raise TcsmtError(f"run_pairs pairs row i with column i: A_rows (n, K) and B_cols (K, n), got {r} rows "
                             f"and {c} columns")
    elif not (1 <= r <= call.M and 1 <= c <= call.N):
        raise TcsmtError(f"the call is {call.M}x{call.N}x{call.K}: 1..{call.M} rows and 1..{call.N} columns fit, "
                         f"got {r} rows and {c} columns")
    shape = (r,) if paired else (r, c)
    steps = set(plan.epilogue)
    uses_c = bool(steps & C_STEPS)
    c32 = b32 = sa = sb = None
    if uses_c and C is None and bias is not None and call.op == "addmm" and call.bias:
        bb = _bits(bias, fmt_of(call.out_dtype), "bias", call.out_dtype).reshape(-1)
        C = bb if paired else array_module(bb).broadcast_to(bb.reshape(1, -1), (r, c))
        bias = None  # torch's addmm with a 1-D input and beta != 1 expands it to C (the plan's epilogue says so)
    if uses_c:
        if C is None:
            raise TcsmtError("the plan's epilogue adds beta*C: pass C (the slice of the call's input that goes with "
                             "the outputs asked for)")
        cb = _bits(C, fmt_of(call.out_dtype), "C", call.out_dtype)
        if cb.shape != shape:
            raise TcsmtError(f"C must have shape {shape}, got {cb.shape}")
        c32 = to_fp32(cb, fmt_of(call.out_dtype))
    elif C is not None:
        raise TcsmtError("C given, but the plan's epilogue does not use C (beta = 0)")
    if "bias" in steps:
        if bias is None:
            raise TcsmtError("the plan adds a bias: pass bias (the c values of the columns given)")
        bdt = call.a_dtype if call.op in ("addmm", "linear") else call.out_dtype
        bfmt = fmt_of(bdt)
        bb = _bits(bias, bfmt, "bias", bdt).reshape(-1)
        if bb.size != c:
            raise TcsmtError(f"bias must hold {c} values (one per column given), got {bb.size}")
        b32 = to_fp32(bb, bfmt)
    elif bias is not None:
        raise TcsmtError("bias given, but the plan adds none (plan(..., bias=True) for a call with a bias)")
    if steps & {"scale", "scale_b_then_a"}:
        if call.scale is None:
            raise TcsmtError("the plan scales its outputs, but its call has no scale ('tensor' or 'row')")
        sa = _scale(scale_a, r, call.scale, "scale_a")
        sb = _scale(scale_b, c, call.scale, "scale_b")
    elif scale_a is not None or scale_b is not None:
        raise TcsmtError("scales given, but the plan scales nothing")
    return A, B, {"C": c32, "bias": b32, "scale_a": sa, "scale_b": sb}


# ------------------------------------------------------- numpy facade
def _dims(x: np.ndarray, n: int, what: str) -> tuple[int, ...]:
    shape = np.shape(x)
    if len(shape) != n:
        raise TcsmtError(f"{what} must be {n}-D, got shape {shape}")
    return shape


def _mismatch(a: tuple, b: tuple) -> TcsmtError:
    return TcsmtError("torch refuses this call: mat1 and mat2 shapes cannot be multiplied "
                      f"({a[0]}x{a[1]} and {b[0]}x{b[1]})")


def mm(A, B, *, dtype: str, out_dtype: str | None = None, tf32: bool = False, gpu: str | Target = "h100",
       plan: Plan | None = None) -> np.ndarray:
    """``torch.mm(A, B, out_dtype=...)`` on bit patterns: A (M, K), B (K, N) of torch dtype ``dtype``."""
    (M, K), (K2, N) = _dims(A, 2, "A"), _dims(B, 2, "B")
    if K != K2:
        raise _mismatch((M, K), (K2, N))
    p = _fits(plan, "mm", M, N, K, gpu=gpu, a_dtype=dtype, out_dtype=out_dtype, tf32=tf32)
    return run(p, A, B)


def _addmm_input(input, M: int, N: int):
    """(input, is_bias) of ``addmm`` as torch reads it: a 1-D input of N values is a bias (the library's bias
    epilogue); any other shape that broadcasts to (M, N) (a scalar, (1, N), (M, 1), (1,)) is expanded to C."""
    shape = tuple(np.shape(input))
    if shape == (N,):
        return input, True
    try:
        fits = np.broadcast_shapes(shape, (M, N)) == (M, N)
    except ValueError:
        fits = False
    if not fits:
        raise TcsmtError(f"torch refuses this call: input of shape {shape} does not broadcast to ({M}, {N})")
    if shape == (M, N):
        return input, False
    if _is_torch(input):
        return input.expand(M, N), False
    return np.broadcast_to(np.asarray(input), (M, N)), False


def addmm(input, A, B, *, dtype: str, beta: float = 1.0, alpha: float = 1.0, out_dtype: str | None = None,
          gpu: str | Target = "h100", plan: Plan | None = None) -> np.ndarray:
    """``torch.addmm(input, A, B, beta=, alpha=)``: input (M, N) is C (or any shape torch broadcasts to it);
    a 1-D input (N,) is a bias."""
    (M, K), (K2, N) = _dims(A, 2, "A"), _dims(B, 2, "B")
    if K != K2:
        raise _mismatch((M, K), (K2, N))
    input, is_bias = _addmm_input(input, M, N)
    p = _fits(plan, "addmm", M, N, K, gpu=gpu, a_dtype=dtype, out_dtype=out_dtype, alpha=alpha, beta=beta,
              bias=is_bias)
    if is_bias:  # a 1-D input: added by the bias epilogue, expanded to C (beta != 1), or ignored (beta = 0)
        takes = "bias" in p.epilogue or bool(C_STEPS & set(p.epilogue))
        return run(p, A, B, bias=input if takes else None)
    return run(p, A, B, C=input)


def linear(x, weight, bias=None, *, dtype: str, gpu: str | Target = "h100", plan: Plan | None = None) -> np.ndarray:
    """``torch.nn.functional.linear(x, weight, bias)``: x (M, K), weight (N, K), bias (N,): x @ weight.T + bias."""
    (M, K), (N, K2) = _dims(x, 2, "x"), _dims(weight, 2, "weight")
    if K != K2:
        raise _mismatch((M, K), (K2, N))
    p = _fits(plan, "linear", M, N, K, gpu=gpu, a_dtype=dtype, bias=bias is not None)
    wt = weight.t() if _is_torch(weight) else (weight.T if hasattr(weight, "T") else np.asarray(weight).T)
    return run(p, x, wt, bias=bias)


def bmm(A, B, *, dtype: str, out_dtype: str | None = None, tf32: bool = False, gpu: str | Target = "h100",
        plan: Plan | None = None) -> np.ndarray:
    """``torch.bmm(A, B)``: A (b, M, K), B (b, K, N) -> (b, M, N); ``tf32``: float32 inputs with
    ``torch.backends.cuda.matmul.allow_tf32`` on."""
    (nb, M, K), (nb2, K2, N) = _dims(A, 3, "A"), _dims(B, 3, "B")
    if nb != nb2:
        raise TcsmtError(f"torch refuses this call: batch1 and batch2 must have the same number of batches ({nb} vs {nb2})")
    if K != K2:
        raise _mismatch((M, K), (K2, N))
    p = _fits(plan, "bmm", M, N, K, gpu=gpu, a_dtype=dtype, out_dtype=out_dtype, batch=nb, tf32=tf32)
    outs = [run(p, A[i], B[i]) for i in range(nb)]
    return (array_module(outs[0]) if outs else np).stack(outs)


def scaled_mm(A, B, scale_a, scale_b, *, a_dtype: str, b_dtype: str | None = None, out_dtype: str | None = None,
              bias=None, use_fast_accum: bool = False, gpu: str | Target = "h100", plan: Plan | None = None) -> np.ndarray:
    """``torch._scaled_mm(A, B, scale_a, scale_b, bias=, out_dtype=, use_fast_accum=)`` on fp8 bit patterns.

    Scales are fp32 (patterns or values): one value each (per tensor), or
    scale_a (M, 1) and scale_b (1, N) (row-wise).
    """
    (M, K), (K2, N) = _dims(A, 2, "A"), _dims(B, 2, "B")
    if K != K2:
        raise _mismatch((M, K), (K2, N))
    if scale_a is None or scale_b is None:
        raise TcsmtError("torch refuses this call: _scaled_mm needs scale_a and scale_b")
    na, nb = int(np.prod(np.shape(scale_a))), int(np.prod(np.shape(scale_b)))
    if na == 1 and nb == 1:
        kind = "tensor"
    elif np.shape(scale_a) in ((M, 1),) and np.shape(scale_b) in ((1, N),):
        kind = "row"
    else:
        raise TcsmtError(f"torch refuses this call: scales must be one value each (per tensor) or of shapes "
                         f"({M}, 1) and (1, {N}) (row-wise); got {np.shape(scale_a)} and {np.shape(scale_b)}")
    p = _fits(plan, "scaled_mm", M, N, K, gpu=gpu, a_dtype=a_dtype, b_dtype=b_dtype, out_dtype=out_dtype,
              bias=bias is not None, scale=kind, fast_accum=use_fast_accum)
    return run(p, A, B, bias=bias, scale_a=scale_a, scale_b=scale_b)
