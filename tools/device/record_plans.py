"""Record, at scale, which cuBLAS plan torch runs for each call: kernel names, grids, cuBLASLt's trace (numSplitsK,
reductionScheme, algo), torch's refusals.  A device script: numpy, torch and the standard library only, with its
sibling ``plan_capture.py`` (which imports the package's reader, ``tcsmt/hwcheck/plan_capture.py``, from the checkout
around it) and ``models/library/model_layers.json`` of the same checkout for the model-layer lists; it runs where
tcsmt is not installed, so its options are plain argparse.

    python3 record_plans.py run --out DIR --name NAME --list LIST [--list LIST ...] [--setting SETTING]
                                [--method capture|executed] [--workers W] [--deadline SECONDS] [--compare-exec]
    python3 record_plans.py autograd --out FILE     # which aten ops autograd issues for nn.Linear (dispatch mode)
    python3 record_plans.py lists --list LIST       # count the calls of the lists (no GPU)

``run`` writes ``DIR/NAME.json.gz``, rewritten as tasks finish (a run stopped early keeps what it recorded), with a
provenance header (GPU, SM count, driver, torch, CUDA, cuBLAS and cuBLASLt versions, settings, method, date,
command).  Each setting runs in fresh worker processes (environment variables such as CUBLAS_WORKSPACE_CONFIG act
at process start).  Lists (``--list``, see ``LIST_HELP``) are made here from compact descriptions.

Over 400 lines on purpose: it is shipped to a bare GPU host in a checkout (with ``plan_capture.py``) and run there as
a script (numpy, torch and the standard library only), so the call lists, the worker processes and the merge stay
in one file.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

FIELDS = ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta", "tf32", "scale",
          "fast_accum", "a_t", "b_t")
"""A call: the plan files' call fields (``hwcheck/library_calls.py``) and the operand layouts: ``a_t`` = A is the
transposed view of a contiguous (K, M) tensor (autograd's ``grad_out.t()``), ``b_t`` = B is the transposed view of a
contiguous (N, K) tensor (``weight.t()``; implied by ``linear`` and ``scaled_mm``)."""
DEFAULTS = {"batch": 1, "bias": False, "alpha": 1.0, "beta": 0.0, "tf32": False, "scale": None, "fast_accum": False,
            "a_t": False, "b_t": False}
SIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}
ENV_KEYS = ("CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE", "TORCH_BLAS_PREFER_CUBLASLT",
            "TORCH_CUBLASLT_UNIFIED_WORKSPACE", "DISABLE_ADDMM_CUDA_LT", "CUBLAS_LOGINFO_DBG", "CUBLASLT_LOG_LEVEL")
HEAVY_BYTES = 3 << 30
MAX_T = 16384

# dtype configurations of the model-layer lists: (a, b, out, tf32, op for fp8 or None)
DTYPES = {
    "bf16": ("bfloat16", "bfloat16", "bfloat16", False),
    "fp16": ("float16", "float16", "float16", False),
    "bf16f32": ("bfloat16", "bfloat16", "float32", False),
    "fp16f32": ("float16", "float16", "float32", False),
    "tf32": ("float32", "float32", "float32", True),
    "fp32": ("float32", "float32", "float32", False),
}
FP8 = {  # scaled_mm configurations: (b dtype, out, scale, fast)
    "e4m3_bf16": ("float8_e4m3fn", "bfloat16", "tensor", False),
    "e4m3_bf16_fast": ("float8_e4m3fn", "bfloat16", "tensor", True),
    "e4m3_f32": ("float8_e4m3fn", "float32", "tensor", False),
    "e4m3_f32_fast": ("float8_e4m3fn", "float32", "tensor", True),
    "e4m3_bf16_row": ("float8_e4m3fn", "bfloat16", "row", False),
    "e4m3_bf16_row_fast": ("float8_e4m3fn", "bfloat16", "row", True),
    "e4m3e5m2_bf16": ("float8_e5m2", "bfloat16", "tensor", False),
    "e4m3e5m2_bf16_fast": ("float8_e5m2", "bfloat16", "tensor", True),
}
SETTINGS = {
    "default": {},
    "cublaslt": {"blas": "cublaslt"},
    "nosplitk_lt": {"blas": "cublaslt", "reduced": [False, False]},
    "nosplitk": {"reduced": [False, False]},
    "ws16_8": {"env": {"CUBLAS_WORKSPACE_CONFIG": ":16:8"}},
    "ws0": {"env": {"CUBLAS_WORKSPACE_CONFIG": ":0:0"}},
    "ltws1m": {"env": {"CUBLASLT_WORKSPACE_SIZE": "1024"}},
    "ws4096_8": {"env": {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}},
    "deterministic": {"deterministic": True, "env": {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}},
    "bi_env": {"reduced": [False, True], "env": {"CUBLAS_WORKSPACE_CONFIG": ":16:8", "CUBLASLT_WORKSPACE_SIZE": "1"}},
}
SETTING_HELP = ("default (torch as it starts); cublaslt (preferred_blas_library('cublaslt')); nosplitk "
                "(allow_{bf16,fp16}_reduced_precision_reduction = (False, False)); nosplitk_lt (both); ws16_8 / ws0 "
                "(CUBLAS_WORKSPACE_CONFIG=:16:8 / :0:0); ltws1m (CUBLASLT_WORKSPACE_SIZE=1024 KiB); ws4096_8 "
                "(CUBLAS_WORKSPACE_CONFIG=:4096:8, what torch.use_deterministic_algorithms asks for); deterministic "
                "(torch.use_deterministic_algorithms(True) with :4096:8; torch.utils.deterministic."
                "fill_uninitialized_memory off so that no fill kernel joins the captured call); bi_env (the settings "
                "batch-invariant recipes set on Hopper: CUBLAS_WORKSPACE_CONFIG=:16:8, CUBLASLT_WORKSPACE_SIZE=1, "
                "allow_{bf16,fp16}_reduced_precision_reduction = False)")
LIST_HELP = """
  layers:DTYPES:PRODUCTS:MSPEC[:MODELS]   model layers (model_layers.json, each distinct (N, K, bias) once);
        DTYPES: comma list of bf16, fp16, bf16f32, fp16f32, tf32, fp32 and the scaled_mm names (e4m3_bf16, ...);
        PRODUCTS: comma list of fwd, dgrad, wgrad; MSPEC: all (1..16384), or e.g. 1-512+8x (1..512 then multiples
        of 8), or p2 (powers of two); MODELS: comma list of model names (default: all)
  random:SEED:COUNT                       COUNT random shapes (M, N, K log-uniform in [1, 16384], half of them
        multiples of 8 or 16), each in the 7 main configurations
  file:PATH                               the calls of a JSON(.gz) list of call dicts (the plan files' calls)
  fresh:SEED:COUNT                        non-power-of-two calls over layouts and dtypes, for the capture-vs-executed
        comparison
  attn:DTYPES:MSPEC                       bmm/baddbmm at attention shapes (heads x seq x head_dim), forward and
        backward layouts, seq over MSPEC
  attnfam:DTYPES:PREFILL:DECODE[:BH,..][:D,..]  the attention products eager attention runs: prefill Q K^T
        (S x S x d, K^T a transposed view; also backward's dP = dO V^T), P V (S x d x S; also dQ = dS K) and
        dK = dS^T Q, dV = P^T dO (S x d x S, A a transposed view) at seq over PREFILL, decode q K^T (1 x L x d) and
        p V (1 x d x L) at KV length over DECODE, for batch*heads BH and head dims D (defaults ATTN_BH, 64,128)
  rope:MSPEC                              transformers' rotary-embedding product inv_freq (b, d/2, 1) @ positions
        (b, 1, S) in fp32 (tf32 off and on), S over MSPEC, b in ROPE_BATCH, d/2 in ROPE_HALF
  views:DTYPES:MSPEC[:BH,..]              operand layouts beyond row-major and transposed views, each task beside
        its row-major twin: a query that is a view of (S, heads, d) (batch 1: rows interleaved over the heads,
        row stride heads*d, batch stride d) in Q K^T, and a batch-broadcast (stride 0) inv_freq in the fp32
        rotary product; the tasks carry ``view`` (plan catalogs leave them out)
  extra:DTYPES:MSPEC                      addmm (full C, alpha/beta, bias), matmul 3-D @ 2-D at model-layer shapes
  epilogues:DTYPES:MSPEC                  addmm at alpha = 0.5, beta = 1 and alpha = 1, beta = 2 (C, bias), same shapes
"""


def call(op, M, N, K, a, b=None, out=None, **kw):
    c = {"op": op, "M": M, "N": N, "K": K, "a_dtype": a, "b_dtype": b or a, "out_dtype": out or a}
    for k, v in DEFAULTS.items():
        c[k] = kw.pop(k, v)
    if kw:
        raise ValueError(f"unknown call fields {sorted(kw)}")
    return c


def norm_call(c: dict) -> dict:
    d = {k: c.get(k, DEFAULTS.get(k)) for k in FIELDS}
    d["b_dtype"] = d["b_dtype"] or d["a_dtype"]
    d["out_dtype"] = d["out_dtype"] or d["a_dtype"]
    return d


# ------------------------------------------------------------------------------------------------ lists
def parse_mspec(spec: str) -> list[int]:
    """'all' = 1..16384; 'p2' = powers of two; 'A-B' ranges and 'Sx' (or 'SxHI') multiples of S above the previous
    part (up to HI), joined by '+': '1-512+8x' = 1..512 then 520, 528, ..., 16384."""
    if spec == "all":
        return list(range(1, MAX_T + 1))
    if spec == "p2":
        return [1 << i for i in range(15)]
    ms: list[int] = []
    for part in spec.split("+"):
        if "x" in part:  # 'Sx': multiples of S above the previous part up to 16384; 'SxHI': up to HI
            step_s, hi_s = part.split("x")
            step, hi = int(step_s), int(hi_s or MAX_T)
            start = (ms[-1] // step + 1) * step if ms else step
            ms += list(range(start, hi + 1, step))
        elif "-" in part:
            lo, hi = (int(x) for x in part.split("-"))
            ms += list(range(lo, hi + 1))
        else:
            ms.append(int(part))
    return sorted(set(ms))


def load_layers(models: list[str] | None = None) -> list[dict]:
    with open(os.path.join(HERE, "..", "..", "models", "library", "model_layers.json")) as f:  # the one copy
        data = json.load(f)
    rows = data["layers"]
    if models:
        rows = [r for r in rows if r["model"] in models]
    return rows


def distinct_layers(rows: list[dict]) -> list[tuple[int, int, bool, str]]:
    seen: dict[tuple[int, int, bool, str], None] = {}
    for r in rows:
        seen.setdefault((r["N"], r["K"], bool(r["bias"]), r.get("layout", "linear")), None)
    return list(seen)


def product_template(prod: str, dt: str, N: int, K: int, bias: bool, layout: str = "linear") -> tuple[dict, str]:
    """The call of one training product of a layer (N outputs, K inputs) in a dtype configuration, with the field
    that the token count fills ('M' for fwd/dgrad, 'K' for wgrad).  ``linear``: y = F.linear(x, W, b), W (N, K);
    autograd: dgrad = grad_out.mm(W), wgrad = grad_out.t().mm(x).  ``conv1d`` (GPT-2's Conv1D): y = addmm(b, x, W),
    W (K, N) row-major; autograd: dgrad = grad_out.mm(W.t()), wgrad = x.t().mm(grad_out)."""
    if dt in FP8:
        b8, out, scale, fast = FP8[dt]
        shapes = {"fwd": (None, N, K), "dgrad": (None, K, N), "wgrad": (N, K, None)}[prod]
        M_, N_, K_ = shapes
        c = call("scaled_mm", M_, N_, K_, "float8_e4m3fn", b8, out, scale=scale, fast_accum=fast, b_t=True)
        return c, ("K" if prod == "wgrad" else "M")
    a, b, out, tf32 = DTYPES[dt]
    bias = bias and prod == "fwd"
    if layout == "conv1d":
        if prod == "fwd":
            if out != a:
                return call("mm", None, N, K, a, b, out, tf32=tf32), "M"
            return call("addmm", None, N, K, a, b, out, tf32=tf32, bias=bias, beta=1.0 if bias else 0.0), "M"
        if prod == "dgrad":  # grad_out (T x N) @ W.t() (W stored K x N)
            return call("mm", None, K, N, a, b, out, tf32=tf32, b_t=True), "M"
        if prod == "wgrad":  # x.t() (K x T, a transposed view) @ grad_out (T x N)
            return call("mm", K, N, None, a, b, out, tf32=tf32, a_t=True), "K"
        raise ValueError(prod)
    if prod == "fwd":
        if out != a:  # out_dtype: torch.mm(x, W.t(), out_dtype=...) (linear has no out_dtype)
            return call("mm", None, N, K, a, b, out, tf32=tf32, b_t=True), "M"
        return call("linear", None, N, K, a, b, out, bias=bias, tf32=tf32, b_t=True), "M"
    if prod == "dgrad":  # grad_out (T x N) @ W (N x K), both row-major
        return call("mm", None, K, N, a, b, out, tf32=tf32), "M"
    if prod == "wgrad":  # grad_out.t() (N x T, a transposed view) @ x (T x K)
        return call("mm", N, K, None, a, b, out, tf32=tf32, a_t=True), "K"
    raise ValueError(prod)


def layer_tasks(spec: str) -> list[dict]:
    """One task per distinct (call template, dtype, product) of the model layers: a bias matters only to the
    forward product of a 16-bit or fp32 ``linear`` (dgrad and wgrad do not depend on it, and the out_dtype and
    scaled_mm calls are made without one), so those are recorded once per (N, K)."""
    parts = spec.split(":")
    dts, prods, mspec = parts[1].split(","), parts[2].split(","), parts[3]
    models = parts[4].split(",") if len(parts) > 4 and parts[4] else None
    n = len(parse_mspec(mspec))
    tasks, seen = [], set()
    for (N, K, bias, layout) in distinct_layers(load_layers(models)):
        for dt in dts:
            for prod in prods:
                tmpl, vary = product_template(prod, dt, N, K, bias, layout)
                key = (json.dumps(tmpl, sort_keys=True), dt, prod)
                if key in seen:
                    continue
                seen.add(key)
                tasks.append({"kind": "mrange", "list": spec, "layer": [N, K, tmpl.get("bias", False), layout], "dtype": dt,
                              "product": prod, "call": tmpl, "vary": vary, "ms": mspec, "n": n})
    return tasks


def log_uniform(rng, lo=1, hi=MAX_T):
    return max(lo, min(hi, round(math.exp(rng.uniform(math.log(lo), math.log(hi))))))


RANDOM_CONFIGS = [  # (name, call fields)
    ("bf16_nn", {"op": "mm", "a": "bfloat16"}),
    ("fp16_nn", {"op": "mm", "a": "float16"}),
    ("bf16_linear", {"op": "linear", "a": "bfloat16", "b_t": True}),
    ("bf16_tn", {"op": "mm", "a": "bfloat16", "a_t": True}),
    ("bf16_f32", {"op": "mm", "a": "bfloat16", "out": "float32"}),
    ("tf32", {"op": "mm", "a": "float32", "tf32": True}),
    ("e4m3_bf16", {"op": "scaled_mm", "a": "float8_e4m3fn", "out": "bfloat16", "scale": "tensor", "b_t": True}),
]


def random_calls(seed: int, count: int) -> list[dict]:
    import random
    rng = random.Random(seed)
    calls = []
    for i in range(count):
        M, N, K = (log_uniform(rng) for _ in range(3))
        if i % 2 == 0:  # half of the shapes: multiples of 8 (i % 4 == 0) or 16 (i % 4 == 2)
            g = 8 if i % 4 == 0 else 16
            M, N, K = (max(g, min(MAX_T, round(x / g) * g)) for x in (M, N, K))
        for _name, f in RANDOM_CONFIGS:
            f = dict(f)
            op, a = f.pop("op"), f.pop("a")
            calls.append(call(op, M, N, K, a, None, f.pop("out", None), **f))
    return calls


def fresh_calls(seed: int, count: int) -> list[dict]:
    """Non-power-of-two calls over the layouts and dtypes the campaign records (capture vs executed)."""
    import random
    rng = random.Random(seed)
    kinds = [
        lambda M, N, K: call("linear", M, N, K, "bfloat16", b_t=True, bias=rng.random() < 0.5),
        lambda M, N, K: call("linear", M, N, K, "float16", b_t=True, bias=rng.random() < 0.5),
        lambda M, N, K: call("mm", M, N, K, "bfloat16"),
        lambda M, N, K: call("mm", M, N, K, "float16"),
        lambda M, N, K: call("mm", M, N, K, "bfloat16", a_t=True),
        lambda M, N, K: call("mm", M, N, K, "float16", a_t=True),
        lambda M, N, K: call("mm", M, N, K, "bfloat16", None, "float32", b_t=True),
        lambda M, N, K: call("mm", M, N, K, "float16", b_t=True),
        lambda M, N, K: call("addmm", M, N, K, "float16", beta=1.0, bias=True),
        lambda M, N, K: call("linear", M, N, K, "float32", b_t=True, tf32=True, bias=rng.random() < 0.5),
        lambda M, N, K: call("mm", M, N, K, "float32", tf32=True, a_t=True),
        lambda M, N, K: call("scaled_mm", M, N - N % 16 or 16, K - K % 16 or 16, "float8_e4m3fn", None, "bfloat16",
                             scale="tensor", b_t=True),
        lambda M, N, K: call("scaled_mm", M, N - N % 16 or 16, K - K % 16 or 16, "float8_e4m3fn", None, "float32",
                             scale="row", fast_accum=True, b_t=True),
        lambda M, N, K: call("addmm", M, N, K, "bfloat16", beta=1.0, bias=True),
        lambda M, N, K: call("addmm", M, N, K, "float16", alpha=0.5, beta=1.5),
        lambda M, N, K: call("bmm", M, N, K, "bfloat16", batch=rng.choice([2, 12, 32]), b_t=True),
    ]
    calls = []
    while len(calls) < count:
        M, N, K = (log_uniform(rng, 3, 8192) for _ in range(3))
        if (M & (M - 1)) == 0 or (N & (N - 1)) == 0 or (K & (K - 1)) == 0:
            continue
        if rng.random() < 0.5:  # model-like: multiples of 64 in N and K
            N, K = max(64, N // 64 * 64 + 64 * (N % 64 > 0)), max(64, K // 64 * 64)
            if (N & (N - 1)) == 0 or (K & (K - 1)) == 0:
                continue
        c = kinds[len(calls) % len(kinds)](M, N, K)
        if c["op"] == "bmm" and c["batch"] * max(M * K, K * N, M * N) > 1 << 28:
            continue
        calls.append(c)
    return calls


ATTN = [(12, 64), (16, 64), (32, 128), (64, 128), (40, 128), (32, 96), (16, 256)]  # (batch*heads, head_dim)


def attn_tasks(spec: str) -> list[dict]:
    _, dts, mspec = spec.split(":")
    ms = parse_mspec(mspec)
    tasks = []
    for dt in dts.split(","):
        a = DTYPES[dt][0]
        for (bh, d) in ATTN:
            # forward: scores = Q @ K^T (K^T a transposed view), out = P @ V; backward: dP = dO @ V^T,
            # dS-products dQ = dS @ K, dK = dS^T @ Q, dV = P^T @ dO
            for prod, tmpl in (
                    ("qk", call("bmm", "S", "S", d, a, batch=bh, b_t=True)),
                    ("qk_baddbmm", call("baddbmm", "S", "S", d, a, batch=bh, b_t=True, alpha=0.125, beta=0.0)),
                    ("pv", call("bmm", "S", d, "S", a, batch=bh)),
                    ("dp", call("bmm", "S", "S", d, a, batch=bh, b_t=True)),
                    ("dq", call("bmm", "S", d, "S", a, batch=bh)),
                    ("dk", call("bmm", "S", d, "S", a, batch=bh, a_t=True))):
                if prod == "dp":
                    continue  # the same call as qk
                tasks.append({"kind": "mrange", "list": spec, "layer": [bh, d], "dtype": dt, "product": prod,
                              "call": tmpl, "vary": "S", "ms": mspec, "n": len(ms)})
    return tasks


ATTN_BH = (1, 8, 12, 16, 24, 32, 40, 48, 64, 96, 128, 256)
"""batch x heads of the attention families: LLaMA-3-8B's 32 heads at batch 1, 2, 4, 8 (32, 64, 128, 256) and
common head counts (GPT-2 / BERT 12, 16, 24, 40, 48, 64, 96) at batch 1."""
ATTN_D = (64, 128)
ROPE_BATCH = (1, 2, 4, 8)
ROPE_HALF = (32, 64)  # head_dim / 2 for head dims 64 and 128
VIEW_BH = (8, 12, 16, 24, 32, 40, 48, 64, 96, 128)  # heads of a batch-1 query view


def attnfam_tasks(spec: str) -> list[dict]:
    parts = spec.split(":")
    dts, pre, dec = parts[1].split(","), parts[2], parts[3]
    bhs = [int(x) for x in parts[4].split(",")] if len(parts) > 4 and parts[4] else list(ATTN_BH)
    ds = [int(x) for x in parts[5].split(",")] if len(parts) > 5 and parts[5] else list(ATTN_D)
    tasks = []
    for dt in dts:
        a = DTYPES[dt][0]
        for d in ds:
            for bh in bhs:
                for prod, tmpl, ms in (
                        ("qk", call("bmm", "S", "S", d, a, batch=bh, b_t=True), pre),
                        ("pv", call("bmm", "S", d, "S", a, batch=bh), pre),
                        ("dk", call("bmm", "S", d, "S", a, batch=bh, a_t=True), pre),
                        ("qk_decode", call("bmm", 1, "S", d, a, batch=bh, b_t=True), dec),
                        ("pv_decode", call("bmm", 1, d, "S", a, batch=bh), dec)):
                    tasks.append({"kind": "mrange", "list": spec, "layer": [bh, d], "dtype": dt, "product": prod,
                                  "call": tmpl, "vary": "S", "ms": ms, "n": len(parse_mspec(ms))})
    return tasks


def rope_tasks(spec: str) -> list[dict]:
    ms = spec.split(":")[1]
    tasks = []
    for tf32 in (False, True):
        for half in ROPE_HALF:
            for b in ROPE_BATCH:
                tmpl = call("bmm", half, "S", 1, "float32", batch=b, tf32=tf32)
                tasks.append({"kind": "mrange", "list": spec, "layer": [b, half], "dtype": "tf32" if tf32 else "fp32",
                              "product": "rope", "call": tmpl, "vary": "S", "ms": ms, "n": len(parse_mspec(ms))})
    return tasks


def view_tasks(spec: str) -> list[dict]:
    """Each variant layout's task, then its row-major twin (the same calls, ``view`` absent)."""
    parts = spec.split(":")
    dts, ms = parts[1].split(","), parts[2]
    bhs = [int(x) for x in parts[3].split(",")] if len(parts) > 3 and parts[3] else list(VIEW_BH)
    n = len(parse_mspec(ms))
    tasks = []
    for dt in dts:
        a = DTYPES[dt][0]
        for d in ATTN_D:
            for bh in bhs:
                tmpl = call("bmm", "S", "S", d, a, batch=bh, b_t=True)
                for view in ("a_rows_interleaved", None):
                    t = {"kind": "mrange", "list": spec, "layer": [bh, d], "dtype": dt, "product": "qk",
                         "call": tmpl, "vary": "S", "ms": ms, "n": n}
                    if view:
                        t["view"] = view
                    tasks.append(t)
    for half in ROPE_HALF:
        for b in ROPE_BATCH[1:]:
            tmpl = call("bmm", half, "S", 1, "float32", batch=b)
            for view in ("a_batch_broadcast", None):
                t = {"kind": "mrange", "list": spec, "layer": [b, half], "dtype": "fp32", "product": "rope",
                     "call": tmpl, "vary": "S", "ms": ms, "n": n}
                if view:
                    t["view"] = view
                tasks.append(t)
    return tasks


EXTRA_SHAPES = ((4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (4096, 14336), (3072, 768), (768, 3072))
"""(N, K) of the ``extra`` and ``epilogues`` layers (LLaMA-2 7B, Mistral / LLaMA-3 MLP, GPT-2)."""


def _layer_tasks(spec: str, products) -> list[dict]:
    """Token-count tasks of ``products(a_dtype, N, K)`` ((name, call template) pairs) at :data:`EXTRA_SHAPES`."""
    _, dts, mspec = spec.split(":")
    n = len(parse_mspec(mspec))
    return [{"kind": "mrange", "list": spec, "layer": [N, K], "dtype": dt, "product": prod, "call": tmpl,
             "vary": "M", "ms": mspec, "n": n}
            for dt in dts.split(",") for (N, K) in EXTRA_SHAPES for prod, tmpl in products(DTYPES[dt][0], N, K)]


def extra_tasks(spec: str) -> list[dict]:
    return _layer_tasks(spec, lambda a, N, K: (
        ("addmm_c", call("addmm", None, N, K, a, b_t=True, beta=1.0)),
        ("addmm_ab", call("addmm", None, N, K, a, b_t=True, alpha=0.5, beta=2.0)),
        ("addmm_bias_ab", call("addmm", None, N, K, a, b_t=True, bias=True, alpha=0.5, beta=2.0)),
        ("matmul3d", call("matmul", None, N, K, a, b_t=True, batch=4))))


def epilogue_tasks(spec: str) -> list[dict]:
    """``epilogues:DTYPES:MSPEC``: addmm with each kind of alpha and beta that ``extra`` leaves out (alpha != 1 at
    beta = 1, alpha = 1 at a beta other than 0 and 1), a matrix C and a 1-D bias, at ``extra``'s layer shapes."""
    return _layer_tasks(spec, lambda a, N, K: (
        ("addmm_a", call("addmm", None, N, K, a, b_t=True, alpha=0.5, beta=1.0)),
        ("addmm_bias_a", call("addmm", None, N, K, a, b_t=True, bias=True, alpha=0.5, beta=1.0)),
        ("addmm_b", call("addmm", None, N, K, a, b_t=True, beta=2.0)),
        ("addmm_bias_b", call("addmm", None, N, K, a, b_t=True, bias=True, beta=2.0))))


def list_tasks(name: str, calls: list[dict], chunk: int = 1500) -> list[dict]:
    return [{"kind": "list", "list": name, "calls": [[c.get(k, DEFAULTS.get(k)) for k in FIELDS]
                                                     for c in calls[i:i + chunk]], "first": i,
             "n": len(calls[i:i + chunk])} for i in range(0, len(calls), chunk)]


def make_tasks(specs: list[str], limit: int | None = None) -> list[dict]:
    tasks: list[dict] = []
    for spec in specs:
        kind = spec.split(":")[0]
        if kind == "layers":
            tasks += layer_tasks(spec)
        elif kind == "attn":
            tasks += attn_tasks(spec)
        elif kind == "extra":
            tasks += extra_tasks(spec)
        elif kind == "epilogues":
            tasks += epilogue_tasks(spec)
        elif kind == "attnfam":
            tasks += attnfam_tasks(spec)
        elif kind == "rope":
            tasks += rope_tasks(spec)
        elif kind == "views":
            tasks += view_tasks(spec)
        elif kind == "random":
            _, seed, count = spec.split(":")
            tasks += list_tasks(spec, random_calls(int(seed), int(count)))
        elif kind == "fresh":
            _, seed, count = spec.split(":")
            tasks += list_tasks(spec, fresh_calls(int(seed), int(count)), chunk=200)
        elif kind == "file":
            path = spec[5:]
            op = gzip.open if path.endswith(".gz") else open
            with op(path, "rt") as f:
                data = json.load(f)
            calls = data["calls"] if isinstance(data, dict) else data
            if limit:
                calls = calls[:limit]
            tasks += list_tasks(spec.replace(HERE + "/", ""), [norm_call(c) for c in calls], chunk=1000)
        else:
            raise SystemExit(f"unknown list {spec!r}; lists:{LIST_HELP}")
    for i, t in enumerate(tasks):
        t["id"] = i
    return tasks


def task_calls(t: dict) -> list[dict]:
    if t["kind"] == "list":
        return [dict(zip(FIELDS, row)) for row in t["calls"]]
    out = []
    for m in parse_mspec(t["ms"]):
        c = dict(t["call"])
        for k in ("M", "N", "K"):
            if c[k] is None or (t["vary"] == "S" and c[k] == "S"):
                c[k] = m
        if t.get("view"):
            c["view"] = t["view"]
        out.append(c)
    return out


def varied(t: dict, c: dict) -> int:
    """The token count (or sequence length) of a call of a token-count task."""
    if t["vary"] in ("M", "N", "K"):
        return c[t["vary"]]
    return next(c[k] for k in ("M", "N", "K") if t["call"][k] == t["vary"])


def call_bytes(c: dict) -> tuple[int, int, int]:
    bt = c["batch"]
    M, N, K = c["M"], c["N"], c["K"]
    a = bt * M * K * SIZE[c["a_dtype"]]
    b = (1 if c["op"] == "matmul" else bt) * K * N * SIZE[c["b_dtype"]]
    o = bt * M * N * SIZE[c["out_dtype"]]
    return a, b, o


# ------------------------------------------------------------------------------------------------ torch side
class Buffers:
    """Flat uint8 device buffers for A, B and C/bias (and fp32 scales), grown on demand; views are made per call.
    ``fill``: zeros (executed calls); else uninitialised (captured calls read nothing)."""

    def __init__(self, torch, fill: bool):
        self.torch, self.fill = torch, fill
        self.bufs: dict[str, object] = {}
        self.scales = torch.ones(MAX_T, device="cuda", dtype=torch.float32)
        self.one = torch.ones((), device="cuda", dtype=torch.float32)

    def ensure(self, need: dict[str, int]):
        t = self.torch
        for k, n in need.items():
            n = max(n, 256)
            cur = self.bufs.get(k)
            if cur is None or cur.numel() < n:
                self.bufs.pop(k, None)
                del cur
                t.cuda.empty_cache()
                self.bufs[k] = (t.zeros if self.fill else t.empty)(n, dtype=t.uint8, device="cuda")

    def release(self):
        self.bufs.clear()
        self.torch.cuda.empty_cache()

    def view(self, slot: str, dtype: str, shape: tuple[int, ...]):
        n = 1
        for s in shape:
            n *= s
        return self.bufs[slot][: n * SIZE[dtype]].view(getattr(self.torch, dtype)).view(*shape)


def make_fn(torch, c: dict, bufs: Buffers):
    """A zero-argument function that makes the call's torch call on views of the buffers (no kernel launched
    before the call itself)."""
    F = torch.nn.functional
    op, M, N, K, bt = c["op"], c["M"], c["N"], c["K"], c["batch"]
    a_dt, b_dt, o_dt = c["a_dtype"], c["b_dtype"], c["out_dtype"]
    out_kw = {} if o_dt == a_dt or op == "scaled_mm" else {"out_dtype": getattr(torch, o_dt)}
    tf32 = bool(c["tf32"])
    batched = op in ("bmm", "baddbmm")
    view = c.get("view")
    if batched and view == "a_rows_interleaved":  # a batch-1 query: the (S, heads, d) tensor viewed (heads, S, d)
        A = bufs.view("A", a_dt, (M, bt, K)).transpose(0, 1)
        B = bufs.view("B", b_dt, (bt, N, K)).transpose(1, 2) if c["b_t"] else bufs.view("B", b_dt, (bt, K, N))
    elif batched and view == "a_batch_broadcast":  # one (M, K) matrix expanded over the batch (stride 0)
        A = bufs.view("A", a_dt, (1, M, K)).expand(bt, M, K)
        B = bufs.view("B", b_dt, (bt, N, K)).transpose(1, 2) if c["b_t"] else bufs.view("B", b_dt, (bt, K, N))
    elif view:
        raise ValueError(f"unknown operand view {view!r}")
    elif batched:
        A = bufs.view("A", a_dt, (bt, K, M)).transpose(1, 2) if c["a_t"] else bufs.view("A", a_dt, (bt, M, K))
        B = bufs.view("B", b_dt, (bt, N, K)).transpose(1, 2) if c["b_t"] else bufs.view("B", b_dt, (bt, K, N))
    elif op == "matmul":
        A = bufs.view("A", a_dt, (bt, M, K))
        B = bufs.view("B", b_dt, (N, K)).t() if c["b_t"] else bufs.view("B", b_dt, (K, N))
    else:
        A = bufs.view("A", a_dt, (K, M)).t() if c["a_t"] else bufs.view("A", a_dt, (M, K))
        if op in ("linear", "scaled_mm") or c["b_t"]:
            W = bufs.view("B", b_dt, (N, K))
            B = W.t()
        else:
            B = bufs.view("B", b_dt, (K, N))
    mm = torch.backends.cuda.matmul

    if op == "linear":
        bias = bufs.view("C", a_dt, (N,)) if c["bias"] else None

        def fn():
            mm.allow_tf32 = tf32
            return F.linear(A, W, bias)
    elif op == "mm":
        def fn():
            mm.allow_tf32 = tf32
            return torch.mm(A, B, **out_kw)
    elif op == "bmm":
        def fn():
            mm.allow_tf32 = tf32
            return torch.bmm(A, B, **out_kw)
    elif op == "baddbmm":
        C = bufs.view("C", o_dt, (bt, M, N))
        alpha, beta = c["alpha"], c["beta"]

        def fn():
            mm.allow_tf32 = tf32
            return torch.baddbmm(C, A, B, beta=beta, alpha=alpha, **out_kw)
    elif op == "addmm":
        C = bufs.view("C", o_dt, (N,)) if c["bias"] else bufs.view("C", o_dt, (M, N))
        alpha, beta = c["alpha"], c["beta"]

        def fn():
            mm.allow_tf32 = tf32
            return torch.addmm(C, A, B, beta=beta, alpha=alpha, **out_kw)
    elif op == "matmul":
        def fn():
            mm.allow_tf32 = tf32
            return torch.matmul(A, B)
    elif op == "scaled_mm":
        if c["scale"] == "row":  # one fp32 scale per row of A and per column of B (N reaches vocabulary widths)
            if bufs.scales.numel() < max(M, N):
                bufs.scales = torch.ones(max(M, N), device="cuda", dtype=torch.float32)
            sa = bufs.scales[:M].view(M, 1)
            sb = bufs.scales[:N].view(1, N)
        else:
            sa = sb = bufs.one
        bias = bufs.view("C", o_dt, (N,)) if c["bias"] else None
        odt, fast = getattr(torch, o_dt), bool(c["fast_accum"])

        def fn():
            r = torch._scaled_mm(A, B, scale_a=sa, scale_b=sb, bias=bias, out_dtype=odt, use_fast_accum=fast)
            return r[0] if isinstance(r, tuple) else r
    else:
        raise ValueError(f"unknown op {op!r}")
    return fn


def apply_setting(torch, setting: dict) -> dict:
    """Set the torch flags of a setting; what torch said (exceptions, warnings) and what it reads back."""
    import warnings
    said: dict = {}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        if setting.get("blas"):
            try:
                torch.backends.cuda.preferred_blas_library(setting["blas"])
            except Exception as exc:
                said["preferred_blas_library"] = f"{type(exc).__name__}: {exc}"
        if setting.get("reduced") is not None:
            val = tuple(setting["reduced"])
            for attr in ("allow_bf16_reduced_precision_reduction", "allow_fp16_reduced_precision_reduction"):
                try:
                    setattr(torch.backends.cuda.matmul, attr, val)
                except Exception as exc:
                    said[attr] = f"{type(exc).__name__}: {exc}"
                    if val[1]:  # a torch without the split-K flag: the bool alone
                        setattr(torch.backends.cuda.matmul, attr, val[0])
                        said[attr] += f"; set to {val[0]}"
                said[attr + "_read_back"] = repr(getattr(torch.backends.cuda.matmul, attr))
        if setting.get("deterministic"):
            torch.use_deterministic_algorithms(True)
            said["deterministic_algorithms"] = torch.are_deterministic_algorithms_enabled()
            try:  # torch.empty would fill each output with NaN (a kernel before the GEMM in the captured call)
                torch.utils.deterministic.fill_uninitialized_memory = False
                said["fill_uninitialized_memory"] = torch.utils.deterministic.fill_uninitialized_memory
            except AttributeError as exc:
                said["fill_uninitialized_memory"] = f"unreadable: {exc}"
    if w:
        said["warnings"] = [str(x.message) for x in w]
    return said


def matmul_settings(torch) -> dict:
    m = torch.backends.cuda.matmul
    d = {}
    for k in ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction",
              "allow_fp16_accumulation"):
        try:
            d[k] = repr(getattr(m, k))
        except Exception as exc:
            d[k] = f"unreadable: {exc!r}"
    d["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    d["deterministic_algorithms"] = repr(torch.are_deterministic_algorithms_enabled())
    d["preferred_blas_library"] = repr(torch.backends.cuda.preferred_blas_library())
    return d


def device_info(torch) -> dict:
    import ctypes
    import datetime
    import platform
    p = torch.cuda.get_device_properties(0)
    d = {"gpu": torch.cuda.get_device_name(0), "sm_count": p.multi_processor_count,
         "capability": list(torch.cuda.get_device_capability(0)), "memory_bytes": p.total_memory,
         "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
         "date_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    try:
        d["l2_bytes"] = p.L2_cache_size
    except AttributeError:
        pass
    try:
        with open("/proc/driver/nvidia/version") as f:
            d["driver_proc"] = f.readline().strip()
    except OSError:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        d["nvidia_smi"] = out.stdout.strip()
        d["driver"] = out.stdout.split(",")[0].strip() or None
    except Exception as exc:
        d["nvidia_smi_error"] = repr(exc)
    try:
        v = ctypes.c_int()
        ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))
        d["cuda_driver_api"] = v.value
    except Exception:
        pass
    from plan_capture import lib_path
    torch.mm(torch.ones(8, 8, device="cuda"), torch.ones(8, 8, device="cuda"))
    for frag, key in (("libcublasLt.so", "cublaslt"), ("libcublas.so", "cublas")):
        path = lib_path(frag)
        d[key + "_path"] = path
        if not path:
            continue
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
    try:
        from importlib import metadata
        d["packages"] = {}
        for n in ("nvidia-cublas", "nvidia-cublas-cu12", "nvidia-cublas-cu13", "torch", "numpy"):
            try:
                d["packages"][n] = metadata.version(n)
            except Exception:
                pass
    except Exception:
        pass
    d["matmul_settings"] = matmul_settings(torch)
    d["env"] = {k: os.environ.get(k) for k in ENV_KEYS}
    return d


# ------------------------------------------------------------------------------------------------ worker
class Interner:
    def __init__(self):
        self.items: list = []
        self.index: dict = {}

    def __call__(self, x):
        key = json.dumps(x, separators=(",", ":")) if isinstance(x, (list, dict)) else x
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.items)
            self.items.append(x)
        return i


import plan_capture  # noqa: E402,F401  (puts the checkout's package on the path)

from tcsmt.hwcheck.record import PLAN_FIELDS, plan_of  # noqa: E402  (the package's plan fields, tcsmt record's)


def worker(args):
    import plan_capture as PC
    import torch
    setting = json.loads(args.setting)
    said = apply_setting(torch, setting)
    info = device_info(torch)
    info["setting_said"] = said
    info["pid"] = os.getpid()
    lt = PC.LtTrace(PC.lib_path("libcublasLt.so"))
    with open(args.tasks) as f:
        tasks = json.load(f)
    method = args.method
    bufs = Buffers(torch, fill=(method == "executed" or args.compare_exec))
    cap = PC.Capturer(torch, lt) if method == "capture" else None
    # warm the libraries on the capture stream, outside capture: torch's per-(handle, stream) workspaces
    warm = [call("mm", 64, 64, 64, "bfloat16"), call("linear", 64, 64, 64, "bfloat16", bias=True, b_t=True),
            call("scaled_mm", 64, 64, 64, "float8_e4m3fn", None, "bfloat16", scale="tensor", b_t=True)]
    bufs.ensure({"A": 1 << 16, "B": 1 << 16, "C": 1 << 16})
    stream = cap.stream if cap else torch.cuda.current_stream()
    with torch.cuda.stream(stream):
        for c in warm:
            try:
                make_fn(torch, c, bufs)()
            except Exception as exc:
                info.setdefault("warm_errors", []).append(repr(exc))
        torch.cuda.synchronize()
    info["memory_after_warm"] = torch.cuda.memory_allocated()
    with open(os.path.join(args.tmp, f"info_{args.wid}.json"), "w") as f:
        json.dump(info, f)
    outf = open(os.path.join(args.tmp, f"w{args.wid}.jsonl"), "a")
    slots = args.heavy_slots
    deferred = []

    def claim(path):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.close(fd)
            return True
        except FileExistsError:
            return False

    def heavy_slot():
        for s in range(slots):
            if claim(os.path.join(args.tmp, f"heavy{s}")):
                return s
        return None

    def run_task(t):
        t0 = time.time()
        calls = task_calls(t)
        need = {"A": 0, "B": 0, "C": 0}
        for c in calls:
            a, b, o = call_bytes(c)
            need["A"], need["B"], need["C"] = max(need["A"], a), max(need["B"], b), max(need["C"], o)
        bufs.ensure(need)
        if cap:
            cap.begin_task(max(call_bytes(c)[2] for c in calls) + (64 << 20))
        tabs = {"kernels": Interner(), "lt": Interner(), "errors": Interner()}
        plans = Interner()
        recs: list = []
        comp: list = []
        B = args.batch
        for i in range(0, len(calls), B):
            chunk = calls[i:i + B]
            fns = []
            for c in chunk:
                try:
                    fns.append(make_fn(torch, c, bufs))
                except Exception as exc:
                    msg = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
                    fns.append(lambda msg=msg: (_ for _ in ()).throw(RuntimeError("make_fn: " + msg)))
            if method == "capture":
                res = cap.record(fns)
            else:
                res = PC.record_executed(torch, fns, lt)
            if args.compare_exec and method == "capture":
                ex = PC.record_executed(torch, fns, lt)
                for j, (r1, r2) in enumerate(zip(res, ex)):
                    p2, g2, w2 = plan_of(r2, tabs)
                    comp.append([i + j, plans(p2), g2, w2, [n.get("full") for n in r1["nodes"] if "name" in n],
                                 [n.get("full") for n in r2["nodes"] if "name" in n],
                                 [n.get("smem") for n in r1["nodes"] if "name" in n],
                                 [n.get("cluster") for n in r2["nodes"] if "name" in n]])
            for c, r in zip(chunk, res):
                if t["kind"] == "mrange":  # the token count in torch's messages -> {t} (str.replace gives it back)
                    tv = varied(t, c)
                    for k in ("err", "capture_err"):
                        if r.get(k):
                            r[k] = re.sub(rf"(?<![0-9]){tv}(?![0-9])", "{t}", r[k])
                p, g, w = plan_of(r, tabs)
                recs.append((plans(p), g, w))
        if cap:
            cap.end_task()
        else:
            torch.cuda.empty_cache()
        if t["kind"] == "mrange":
            ms = parse_mspec(t["ms"])
            rows = []
            last: list = []
            for j, (pid, g, w) in enumerate(recs):
                if rows and rows[-1][2] == pid:  # the last row ends at the previous token count
                    rows[-1][1] = ms[j]
                    last[-1] = (g, w)
                else:
                    rows.append([ms[j], ms[j], pid, g, w])
                    last.append((g, w))
            for row, (g, w) in zip(rows, last):
                if (g, w) != (row[3], row[4]):
                    row += [g, w]
        else:
            rows = [[j, pid, g, w] for j, (pid, g, w) in enumerate(recs)]
        line = {"task": t["id"], "secs": round(time.time() - t0, 3), "n": len(calls),
                "kernels": tabs["kernels"].items, "lt": tabs["lt"].items, "errors": tabs["errors"].items,
                "plans": plans.items, "rows": rows}
        if comp:
            line["exec"] = comp
        outf.write(json.dumps(line, separators=(",", ":")) + "\n")
        outf.flush()

    for t in tasks:
        if time.time() > args.deadline_at:
            break
        if t.get("heavy"):
            if not claim(os.path.join(args.tmp, f"claim{t['id']}")):
                continue
            s = heavy_slot()
            if s is None:
                deferred.append(t)
                continue
            try:
                run_task(t)
            finally:
                os.unlink(os.path.join(args.tmp, f"heavy{s}"))
                bufs.release()
            continue
        if not claim(os.path.join(args.tmp, f"claim{t['id']}")):
            continue
        try:
            run_task(t)
        except Exception:
            traceback.print_exc()
            with open(os.path.join(args.tmp, f"failed{t['id']}"), "w") as f:
                f.write(traceback.format_exc())
    while deferred and time.time() < args.deadline_at:
        t = deferred[0]
        s = heavy_slot()
        if s is None:
            time.sleep(0.2)
            continue
        deferred.pop(0)
        try:
            run_task(t)
        except Exception:
            traceback.print_exc()
        finally:
            os.unlink(os.path.join(args.tmp, f"heavy{s}"))
            bufs.release()
    if cap and cap.not_chain:
        with open(os.path.join(args.tmp, f"notchain_{args.wid}"), "w") as f:
            f.write(str(cap.not_chain))


# ------------------------------------------------------------------------------------------------ parent
def merge(tmp: str, tasks: list[dict], header: dict) -> dict:
    tabs = {"kernels": Interner(), "lt": Interner(), "errors": Interner()}
    plans = Interner()
    done: dict[int, dict] = {}
    secs = 0.0
    ncalls = 0
    for fn in sorted(os.listdir(tmp)):
        if not (fn.startswith("w") and fn.endswith(".jsonl")):
            continue
        with open(os.path.join(tmp, fn)) as f:
            for line in f:
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                km = [tabs["kernels"](x) for x in d["kernels"]]
                lm = [tabs["lt"](x) for x in d["lt"]]
                em = [tabs["errors"](x) for x in d["errors"]]
                pm = [plans([[km[k] for k in p[0]], p[1], p[2], p[3], p[4], p[5], p[6], [lm[x] for x in p[7]],
                             None if p[8] is None else em[p[8]], None if p[9] is None else em[p[9]], *p[10:]])
                      for p in d["plans"]]
                t = tasks[d["task"]]
                out = {k: v for k, v in t.items() if k not in ("calls", "heavy")}
                if t["kind"] == "list":
                    out["calls"] = t["calls"]
                    out["rows"] = [[r[0], pm[r[1]], r[2], r[3]] for r in d["rows"]]
                else:
                    out["rows"] = [[r[0], r[1], pm[r[2]], *r[3:]] for r in d["rows"]]
                if "exec" in d:
                    out["exec"] = [[e[0], pm[e[1]], *e[2:]] for e in d["exec"]]
                out["secs"] = d["secs"]
                done[d["task"]] = out
                secs += d["secs"]
                ncalls += d["n"]
    res = dict(header)
    res["tables"] = {"kernels": tabs["kernels"].items, "lt": tabs["lt"].items, "errors": tabs["errors"].items,
                     "plans": plans.items}
    res["tasks"] = [done[i] for i in sorted(done)]
    res["not_done"] = [t["id"] for t in tasks if t["id"] not in done]
    res["stats"] = {"tasks_done": len(done), "tasks": len(tasks), "calls_done": ncalls,
                    "calls": sum(t["n"] for t in tasks), "worker_seconds": round(secs, 1)}
    failed = [f for f in os.listdir(tmp) if f.startswith("failed")]
    if failed:
        res["failed"] = {f[6:]: open(os.path.join(tmp, f)).read()[-2000:] for f in failed}
    return res


def write_out(path: str, obj: dict):
    tmpf = path + ".part"
    with gzip.open(tmpf, "wt", compresslevel=6) as f:
        json.dump(obj, f, separators=(",", ":"))
    os.replace(tmpf, path)


def run(args):
    import tempfile
    t_start = time.time()
    tasks = make_tasks(args.list, args.limit)
    if args.only_tasks:  # the ids of an earlier run of the same lists (a rerun of tasks that failed there)
        keep = {int(x) for x in args.only_tasks.split(",")}
        tasks = [t for t in tasks if t["id"] in keep]
        for i, t in enumerate(tasks):
            t["id_in_lists"], t["id"] = t["id"], i
    for t in tasks:
        if t["kind"] == "mrange":
            c = dict(t["call"])
            for k in ("M", "N", "K"):
                if not isinstance(c[k], int):
                    c[k] = MAX_T if t["ms"] == "all" else max(parse_mspec(t["ms"]))
            t["heavy"] = sum(call_bytes(c)) > HEAVY_BYTES
    setting = dict(SETTINGS[args.setting])
    setting["name"] = args.setting
    tmp = tempfile.mkdtemp(prefix="recplans_")
    with open(os.path.join(tmp, "tasks.json"), "w") as f:
        json.dump(tasks, f)
    env = dict(os.environ)
    env.update(setting.get("env", {}))
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONUNBUFFERED"] = "1"
    deadline_at = t_start + args.deadline
    procs = []
    for w in range(args.workers):
        cmd = [sys.executable, os.path.abspath(__file__), "worker", "--tasks", os.path.join(tmp, "tasks.json"),
               "--tmp", tmp, "--wid", str(w), "--setting", json.dumps(setting), "--method", args.method,
               "--heavy-slots", str(args.heavy_slots), "--batch", str(args.batch), "--deadline-at", str(deadline_at),
               ] + (["--compare-exec"] if args.compare_exec else [])
        procs.append(subprocess.Popen(cmd, env=env, stdout=open(os.path.join(tmp, f"log{w}.txt"), "w"),
                                      stderr=subprocess.STDOUT))
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, args.name + ".json.gz")
    header = {"format": "tcsmt cuBLAS plan recordings, v1", "name": args.name, "setting": setting,
              "method": args.method + (" + executed comparison (torch.profiler)" if args.compare_exec else ""),
              "method_text": METHOD_TEXT[args.method], "lists": args.list, "command": " ".join(sys.argv),
              "workers": args.workers, "batch": args.batch, "fields": list(FIELDS), "plan_fields": PLAN_FIELDS,
              "mrange_row": ["t_first", "t_last", "plan", "grids_first", "workspace_first", "grids_last",
                             "workspace_last"],
              "mrange_row_note": ("t_first..t_last: consecutive token counts of the task's list (ms) with one plan; "
                                  "grids (one [x, y, z] per kernel) and cuBLASLt workspace bytes (one per traced "
                                  "matmul) at t_first, and at t_last where they differ (else the row has 5 fields)"),
              "list_row": ["index", "plan", "grids", "workspace"],
              "exec_row": ["index", "plan", "grids", "workspace", "capture_full_names", "executed_full_names",
                           "capture_smem", "executed_cluster"]}
    last = time.time()
    while any(p.poll() is None for p in procs):
        time.sleep(1.0)
        if time.time() > deadline_at + args.grace:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            break
        if time.time() - last > args.flush_every:
            last = time.time()
            _write(args, tmp, tasks, header, path, t_start, procs)
    res = _write(args, tmp, tasks, header, path, t_start, procs)
    logs = {}
    for w in range(args.workers):
        with open(os.path.join(tmp, f"log{w}.txt")) as f:
            txt = f.read()
        if txt.strip():
            logs[w] = txt[-3000:]
    if logs:
        res["worker_logs"] = logs
        write_out(path, res)
    st = res["stats"]
    print(f"{args.name}: {st['calls_done']} of {st['calls']} calls, {st['tasks_done']} of {st['tasks']} tasks, "
          f"{st['wall_seconds']} s wall, {st['calls_per_second']} calls/s, {len(res['tables']['plans'])} plans, "
          f"{len(res['tables']['kernels'])} kernel names", flush=True)
    for w, txt in logs.items():
        print(f"--- worker {w} log tail:\n{txt[-1500:]}", flush=True)


def _write(args, tmp, tasks, header, path, t_start, procs):
    infos = []
    for w in range(args.workers):
        p = os.path.join(tmp, f"info_{w}.json")
        if os.path.exists(p):
            with open(p) as f:
                infos.append(json.load(f))
    h = dict(header)
    if infos:
        h["device"] = {k: v for k, v in infos[0].items() if k not in ("pid", "memory_after_warm")}
        keys = ("gpu", "sm_count", "driver", "torch", "cuda", "cublas", "cublaslt", "matmul_settings", "env")
        h["workers_agree"] = all(all(i.get(k) == infos[0].get(k) for k in keys) for i in infos)
    h["not_chain_graphs"] = sum(int(open(os.path.join(tmp, f)).read()) for f in os.listdir(tmp)
                                if f.startswith("notchain_"))
    res = merge(tmp, tasks, h)
    wall = time.time() - t_start
    res["stats"]["wall_seconds"] = round(wall, 1)
    res["stats"]["calls_per_second"] = round(res["stats"]["calls_done"] / max(wall, 1e-9), 1)
    res["stats"]["finished"] = all(p.poll() is not None for p in procs)
    write_out(path, res)
    return res


METHOD_TEXT = {
    "capture": ("Each call is made under CUDA stream capture (torch.cuda.CUDAGraph(keep_graph=True), shared memory "
                "pool, capture_error_mode thread_local, on one side stream whose cuBLAS/cuBLASLt workspaces were made "
                "by executed warm-up calls), so nothing executes. Up to `batch` calls share one capture; a 4-byte "
                "cuMemsetD32Async of the call's index on a marker buffer precedes each call. The captured graph is "
                "read with the driver API (ctypes on libcuda: cuGraphGetNodes, cuGraphGetEdges_v2 for the order, "
                "cuGraphNodeGetType, cuGraphKernelNodeGetParams_v2 -> cuFuncGetName, demangled by libstdc++'s "
                "__cxa_demangle and shortened like the profiler's names in the plan files (no 'void', no parameter "
                "list), grid/block dims, the cluster-dimension launch attribute). cuBLASLt's trace "
                "(cublasLtLoggerSetCallback, level 2) is read per call at call time: numSplitsK (1 where an algo is "
                "traced without it), reductionScheme, algo and compute descriptor. Calls whose capture failed are "
                "retried one by one; torch's refusals are kept as torch_error. Operands are views of uninitialised "
                "flat buffers (offset 0)."),
    "executed": ("Each call runs on the GPU under torch.profiler (one session per batch; kernels matched to "
                 "record_function labels by correlation id), operands are views of zeroed flat buffers; cuBLASLt's "
                 "trace as in capture."),
}


# ------------------------------------------------------------------------------------------------ autograd check
def rerun_ids(path):
    """The task ids of a recording to record again: tasks not done or failed, and tasks with a call whose plan says the
    recorder ran out of device memory (a worker's failure beside others, not torch's answer)."""
    with gzip.open(path, "rt") as f:
        rec = json.load(f)
    ids = {int(x) for x in rec.get("not_done") or []} | {int(x) for x in rec.get("failed") or {}}
    pf, tables = rec["plan_fields"], rec["tables"]
    errs = [pf.index("torch_error"), pf.index("capture_error")]
    oom = {i for i, p in enumerate(tables["plans"])
           if any(p[e] is not None and "OutOfMemory" in str(tables["errors"][p[e]]) for e in errs)}
    for t in rec["tasks"]:
        at = 1 if t.get("kind") == "list" else 2  # a raw row's plan (list_row, mrange_row); compacted: runs' column
        plans = t["runs"]["plan"] if "runs" in t else [r[at] for r in t.get("rows", [])]
        if any(int(x) in oom for x in plans):
            ids.add(int(t["id"]))
    return sorted(ids)


def autograd_check(args):
    """Which aten ops (and operand strides) autograd issues for nn.Linear, forward and backward, 2-D and 3-D
    input, with and without bias (TorchDispatchMode around the real forward + backward)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Log(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}

            def desc(x):
                if isinstance(x, torch.Tensor):
                    return {"shape": list(x.shape), "stride": list(x.stride()), "dtype": str(x.dtype).split(".")[-1],
                            "offset": x.storage_offset()}
                if isinstance(x, (list, tuple)):
                    return [desc(y) for y in x]
                return repr(x)
            self.ops.append({"op": str(func), "args": [desc(a) for a in args],
                             "kwargs": {k: desc(v) for k, v in kwargs.items()}})
            return func(*args, **kwargs)

    res = {"device": device_info(torch), "cases": [],
           "note": "nn.Linear(K, N) and a GPT-2-style Conv1D (y = addmm(b, x, W), W of shape K x N), forward + backward"}
    T, K, N = 24, 64, 48
    for dtype in (torch.bfloat16, torch.float32):
        for bias in (True, False):
            for shape in ((T, K), (2, T // 2, K)):
                lin = torch.nn.Linear(K, N, bias=bias, device="cuda", dtype=dtype)
                x = torch.randn(*shape, device="cuda", dtype=dtype, requires_grad=True)
                gy = torch.randn(*shape[:-1], N, device="cuda", dtype=dtype)
                log = Log()
                with log:
                    y = lin(x)
                    y.backward(gy)
                torch.cuda.synchronize()
                gemm = [o for o in log.ops if any(s in o["op"] for s in ("mm", "linear", "matmul", "bmm"))]
                res["cases"].append({"dtype": str(dtype).split(".")[-1], "bias": bias, "input_shape": list(shape),
                                     "T": T, "K": K, "N": N, "gemm_ops": gemm, "all_ops": [o["op"] for o in log.ops]})
        # GPT-2's Conv1D: y = addmm(b, x.view(-1, K), W), W stored K x N
        W = torch.randn(K, N, device="cuda", dtype=dtype, requires_grad=True)
        b = torch.randn(N, device="cuda", dtype=dtype, requires_grad=True)
        x = torch.randn(T, K, device="cuda", dtype=dtype, requires_grad=True)
        gy = torch.randn(T, N, device="cuda", dtype=dtype)
        log = Log()
        with log:
            y = torch.addmm(b, x, W)
            y.backward(gy)
        torch.cuda.synchronize()
        gemm = [o for o in log.ops if any(s in o["op"] for s in ("mm", "linear", "matmul", "bmm"))]
        res["cases"].append({"dtype": str(dtype).split(".")[-1], "bias": True, "module": "conv1d", "input_shape": [T, K],
                             "T": T, "K": K, "N": N, "gemm_ops": gemm, "all_ops": [o["op"] for o in log.ops]})
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    for c in res["cases"]:
        print(c["dtype"], c["bias"], c["input_shape"], [(o["op"], [a.get("stride") if isinstance(a, dict) else a
                                                                 for a in o["args"]]) for o in c["gemm_ops"]])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="record lists of calls", epilog="lists:" + LIST_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--out", required=True)
    r.add_argument("--name", required=True)
    r.add_argument("--list", action="append", required=True)
    r.add_argument("--setting", default="default", choices=sorted(SETTINGS), help=SETTING_HELP)
    r.add_argument("--method", default="capture", choices=["capture", "executed"])
    r.add_argument("--compare-exec", action="store_true", help="also run every call executed (validation)")
    r.add_argument("--workers", type=int, default=1)
    r.add_argument("--heavy-slots", type=int, default=2, help="tasks over 3 GiB of operands at a time")
    r.add_argument("--batch", type=int, default=256, help="calls per capture")
    r.add_argument("--deadline", type=float, default=540, help="seconds; no task starts after it")
    r.add_argument("--grace", type=float, default=30)
    r.add_argument("--flush-every", type=float, default=60)
    r.add_argument("--limit", type=int, help="first calls of a file: list only")
    r.add_argument("--only-tasks", help="comma list of task ids of these lists (rerun of an earlier run's tasks)")
    w = sub.add_parser("worker")
    w.add_argument("--tasks", required=True)
    w.add_argument("--tmp", required=True)
    w.add_argument("--wid", type=int, required=True)
    w.add_argument("--setting", required=True)
    w.add_argument("--method", required=True)
    w.add_argument("--heavy-slots", type=int, default=2)
    w.add_argument("--batch", type=int, default=256)
    w.add_argument("--deadline-at", type=float, required=True)
    w.add_argument("--compare-exec", action="store_true")
    ri = sub.add_parser("rerun-ids", help="task ids of a recording to record again (comma list)")
    ri.add_argument("recording")
    a = sub.add_parser("autograd")
    a.add_argument("--out", required=True)
    ls = sub.add_parser("lists")
    ls.add_argument("--list", action="append", required=True)
    args = ap.parse_args()
    if args.cmd == "run":
        run(args)
    elif args.cmd == "worker":
        worker(args)
    elif args.cmd == "rerun-ids":
        print(",".join(map(str, rerun_ids(args.recording))))
    elif args.cmd == "autograd":
        autograd_check(args)
    elif args.cmd == "lists":
        tasks = make_tasks(args.list)
        n = sum(t["n"] for t in tasks)
        print(f"{len(tasks)} tasks, {n} calls")
        by: dict = {}
        for t in tasks:
            k = (t["list"].split(":")[0], t.get("dtype"), t.get("product"))
            by[k] = by.get(k, 0) + t["n"]
        for k, v in sorted(by.items(), key=str):
            print(k, v)


if __name__ == "__main__":
    main()
