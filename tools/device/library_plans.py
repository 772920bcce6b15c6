"""Device campaign of the library GEMMs (evidence/library_plans.md): cuBLAS plans over the shape grid, split-K slice rules read
from output bits, and validation calls.  Runs on a GPU machine with torch; needs numpy and torch only.
(One file on purpose, over 400 lines: it is shipped alone to a bare GPU machine and run as a script; for the
same reason its options are read with the standard library's argparse, not click and tcsmt's shared options:
it must run where tcsmt is not installed.)

    python3 tools/device/library_plans.py --out DIR [--stages info,grid,heur,probes,valid] [--quick]

Writes into DIR: ``h100_cublas_plans.json.gz`` (gzipped) and ``h100_library_validation.json`` (formats: evidence/library_plans.md,
"Files"), ``probes.json`` (raw slice and reduction probes), ``log.txt``.
Stages:
  info    versions (torch, CUDA, cuBLAS, cuBLASLt), matmul settings, the workspace torch allocates
  grid    every (M, N, K), each a power of two 1 .. 16384, for each dtype configuration; the kernels each call
          launches, read from one torch.profiler session per configuration (record_function labels, launches
          matched to kernels by correlation id)
  heur    cuBLASLt's own heuristic (ctypes on the libcublasLt that torch loaded) for the same calls: S =
          CUBLASLT_ALGO_CONFIG_SPLITK_NUM of the first algorithm
  probes  slice starts of split-K calls from output bits (see ``slice_probe``), then the reduction order from
          one planted product per slice (see ``reduce_probe``)
  valid   the calls of ``library_calls.validation_calls()``, sampled outputs

``--probe-list LIST`` probes only the calls of LIST (``run_probe_list``): calls with the plan files' fields and,
optionally, the recorder's layouts ``a_t`` / ``b_t`` (A / B transposed views, tools/device/record_plans.py
``FIELDS``), ``linear``, ``addmm`` (zero bias or C) and ``_scaled_mm`` (unit scales, per tensor or row-wise).
"""
from __future__ import annotations

import argparse
import ctypes
import gzip
import json
import math
import os
import sys
import tempfile
import time
import traceback

import numpy as np

# library_calls.py (numpy only) is shipped with this script: tcsmt/hwcheck/ of the same checkout
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tcsmt", "hwcheck"))
import library_calls as LC

P2 = [1 << i for i in range(15)]  # 1 .. 16384
LOG = None


def log(*a):
    s = time.strftime("%H:%M:%S ") + " ".join(str(x) for x in a)
    print(s, flush=True)
    if LOG:
        LOG.write(s + "\n")
        LOG.flush()


# ------------------------------------------------------------------------------------------------ configs
# (name, op, a, b, out, tf32, scale, fast)
GRID_CONFIGS = [
    ("bf16_bf16", "mm", "bfloat16", "bfloat16", "bfloat16", False, None, False),
    ("f16_f16", "mm", "float16", "float16", "float16", False, None, False),
    ("bf16_f32", "mm", "bfloat16", "bfloat16", "float32", False, None, False),
    ("f16_f32", "mm", "float16", "float16", "float32", False, None, False),
    ("tf32_f32", "mm", "float32", "float32", "float32", True, None, False),
    ("e4m3_bf16", "scaled_mm", "float8_e4m3fn", "float8_e4m3fn", "bfloat16", False, "tensor", False),
    ("e4m3_bf16_fast", "scaled_mm", "float8_e4m3fn", "float8_e4m3fn", "bfloat16", False, "tensor", True),
    ("e4m3_f32", "scaled_mm", "float8_e4m3fn", "float8_e4m3fn", "float32", False, "tensor", False),
    ("e4m3_f32_fast", "scaled_mm", "float8_e4m3fn", "float8_e4m3fn", "float32", False, "tensor", True),
]


def call_dict(op, M, N, K, a, b, out, tf32=False, scale=None, fast=False, batch=1, bias=False, alpha=1.0,
              beta=0.0):
    return {"op": op, "M": M, "N": N, "K": K, "batch": batch, "a_dtype": a, "b_dtype": b, "out_dtype": out,
            "bias": bias, "alpha": alpha, "beta": beta, "tf32": tf32, "scale": scale, "fast_accum": fast}


def grid_calls(cfg, quick=False):
    _name, op, a, b, out, tf32, scale, fast = cfg
    sizes = [1, 16, 64, 1024, 4096] if quick else P2
    calls = []
    for M in sizes:
        for N in sizes:
            for K in sizes:
                if op == "scaled_mm" and (K % 16 or N % 16):
                    continue  # torch requires multiples of 16 (checked once below, recorded as rejected)
                calls.append(call_dict(op, M, N, K, a, b, out, tf32, scale, fast))
    return calls


def extra_calls(quick=False):
    """bmm, addmm/linear with bias, alpha/beta, and random shapes (kernel names; plan per call)."""
    rng = np.random.default_rng(12)
    calls = []
    shapes = [(64, 64, 4096), (128, 128, 4096), (16, 4096, 4096), (1024, 1024, 1024), (256, 256, 8192),
              (1, 4096, 4096), (8, 8, 16384), (4096, 4096, 4096)]
    for (M, N, K) in shapes:
        for a, out in (("bfloat16", "bfloat16"), ("float16", "float16"), ("bfloat16", "float32")):
            for bt in (2, 8):
                calls.append(call_dict("bmm", M, N, K, a, a, out, batch=bt))
            calls.append(call_dict("addmm", M, N, K, a, a, out, bias=True, beta=1.0))
            calls.append(call_dict("addmm", M, N, K, a, a, out, bias=True, alpha=0.5, beta=2.0))
            calls.append(call_dict("addmm", M, N, K, a, a, out, alpha=1.5, beta=0.75))
            if out == a:
                calls.append(call_dict("linear", M, N, K, a, a, out, bias=True))
                calls.append(call_dict("linear", M, N, K, a, a, out))
        calls.append(call_dict("addmm", M, N, K, "float32", "float32", "float32", tf32=True, bias=True, beta=1.0))
        calls.append(call_dict("bmm", M, N, K, "float32", "float32", "float32", tf32=True, batch=4))
        for b8 in ("float8_e4m3fn", "float8_e5m2"):
            for out in ("bfloat16", "float32"):
                for fast in (False, True):
                    calls.append(call_dict("scaled_mm", M, N, K, "float8_e4m3fn", b8, out, scale="row",
                                           fast=fast))
                    if b8 == "float8_e5m2":
                        calls.append(call_dict("scaled_mm", M, N, K, "float8_e4m3fn", b8, out, scale="tensor",
                                               fast=fast))
        calls.append(call_dict("scaled_mm", M, N, K, "float8_e4m3fn", "float8_e4m3fn", "bfloat16",
                               scale="tensor", bias=True))
    nrand = 20 if quick else 300
    for _ in range(nrand):
        M, N, K = (int(x) for x in np.exp(rng.uniform(0, math.log(8192), size=3)).round().astype(int) + 0)
        M, N, K = max(M, 1), max(N, 1), max(K, 1)
        for cfg in GRID_CONFIGS[:5]:
            _, op, a, b, out, tf32, scale, fast = cfg
            calls.append(call_dict(op, M, N, K, a, b, out, tf32, scale, fast))
        K16, N16 = max(16, K // 16 * 16), max(16, N // 16 * 16)
        calls.append(call_dict("scaled_mm", M, N16, K16, "float8_e4m3fn", "float8_e4m3fn", "bfloat16",
                               scale="tensor"))
        calls.append(call_dict("scaled_mm", M, N16, K16, "float8_e4m3fn", "float8_e4m3fn", "float32",
                               scale="tensor", fast=True))
    return calls


# ------------------------------------------------------------------------------------------------ info
def info(torch):
    d = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
         "capability": list(torch.cuda.get_device_capability(0)),
         "sm_count": torch.cuda.get_device_properties(0).multi_processor_count}
    m = torch.backends.cuda.matmul
    d["matmul_settings"] = {
        "allow_tf32": bool(m.allow_tf32),
        "allow_fp16_reduced_precision_reduction": repr(m.allow_fp16_reduced_precision_reduction),
        "allow_bf16_reduced_precision_reduction": repr(m.allow_bf16_reduced_precision_reduction),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "preferred_blas_library": repr(torch.backends.cuda.preferred_blas_library()),
    }
    for k in ("CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE", "TORCH_BLAS_PREFER_CUBLASLT",
              "TORCH_CUBLASLT_UNIFIED_WORKSPACE", "DISABLE_ADDMM_CUDA_LT"):
        d["env_" + k] = os.environ.get(k)
    # cuBLAS / cuBLASLt versions from the libraries the process loaded
    libs = {}
    try:
        for line in open("/proc/self/maps"):
            p = line.split()[-1]
            if "libcublas" in p:
                libs[os.path.basename(p)] = p
    except OSError:
        pass
    d["libraries"] = sorted(set(libs.values()))
    for base, p in libs.items():
        try:
            lib = ctypes.CDLL(p)
            if "cublasLt" in base:
                lib.cublasLtGetVersion.restype = ctypes.c_size_t
                d["cublaslt"] = str(lib.cublasLtGetVersion())
            else:
                parts = []
                for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
                    v = ctypes.c_int()
                    lib.cublasGetProperty(prop, ctypes.byref(v))
                    parts.append(v.value)
                d["cublas"] = str(parts[0] * 10000 + parts[1] * 100 + parts[2])
                d["cublas_version"] = ".".join(map(str, parts))
        except Exception as exc:
            d["version_error_" + base] = repr(exc)
    try:
        from importlib import metadata
        d["packages"] = {n: metadata.version(n) for n in ("nvidia-cublas", "nvidia-cublas-cu12", "torch")
                         if _has_dist(metadata, n)}
    except Exception:
        pass
    return d


def _has_dist(metadata, n):
    try:
        metadata.version(n)
        return True
    except Exception:
        return False


def measure_workspace(torch):
    """Bytes the caching allocator gains on the first cuBLAS / cuBLASLt call beyond the output (the workspace)."""
    res = {}
    for what in ("mm_bf16", "addmm_bias_bf16", "scaled_mm"):
        torch.cuda.synchronize()
        dev = "cuda"
        a = torch.ones(64, 4096, device=dev, dtype=torch.bfloat16)
        b = torch.ones(4096, 64, device=dev, dtype=torch.bfloat16)
        bias = torch.ones(64, device=dev, dtype=torch.bfloat16)
        one = torch.ones((), device=dev)
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        if what == "mm_bf16":
            out = torch.mm(a, b)
        elif what == "addmm_bias_bf16":
            out = torch.addmm(bias, a, b)
        else:
            out = torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        torch.cuda.synchronize()
        res[what] = torch.cuda.memory_allocated() - before - out.numel() * out.element_size()
        del out
    return res


# ------------------------------------------------------------------------------------------------ grid
class Buffers:
    """Flat device buffers big enough for the largest grid operand, random non-zero values."""

    def __init__(self, torch, n_elems):
        self.torch = torch
        self.n = n_elems
        self.cache = {}

    def get(self, dtype_name, slot):
        key = (dtype_name, slot)
        if key not in self.cache:
            t = self.torch
            g = t.Generator(device="cuda").manual_seed(7 + slot)
            x = t.randn(self.n, device="cuda", generator=g, dtype=t.float32)
            self.cache[key] = x.to(getattr(t, dtype_name))
            del x
        return self.cache[key]

    def tensors(self, call):
        t = self.torch
        M, N, K, bt = call["M"], call["N"], call["K"], call["batch"]
        lead = (bt,) if call["op"] == "bmm" else ()
        Aflat = self.get(call["a_dtype"], 0)[: bt * M * K]
        # a_t / b_t (the recorder's layout fields): A, B transposed views of contiguous (K, M), (N, K) tensors
        A = Aflat.view(*lead, K, M).transpose(-1, -2) if call.get("a_t") else Aflat.view(*lead, M, K)
        Bflat = self.get(call["b_dtype"], 1)[: bt * K * N]
        d = {"A": A}
        if call["op"] in ("linear", "scaled_mm"):
            d["Bt"] = Bflat.view(N, K)
        elif call.get("b_t"):
            d["B"] = Bflat.view(*lead, N, K).transpose(-1, -2)
        else:
            d["B"] = Bflat.view(*lead, K, N)
        if call["bias"]:
            d["bias"] = self.get(call["out_dtype"], 2)[:N]
        elif call["op"] == "addmm":
            d["C"] = self.get(call["out_dtype"], 2)[: M * N].view(M, N)
        if call["op"] == "scaled_mm":
            if call["scale"] == "row":
                d["scale_a"] = t.ones(M, 1, device="cuda")
                d["scale_b"] = t.ones(1, N, device="cuda")
            else:
                d["scale_a"] = t.ones((), device="cuda")
                d["scale_b"] = t.ones((), device="cuda")
        return d


class LtLogCapture:
    """cuBLASLt's own trace of each matmul it runs (cublasLtLoggerSetCallback, level 2 = trace): the algorithm
    of the real call, with numSplitsK and reductionScheme where they are not the defaults (1, none)."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.CB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p)
        self.cur = None

        def cb(level, fn, msg):
            if self.cur is not None:
                self.cur.append(((fn or b"").decode(errors="replace"), (msg or b"").decode(errors="replace")))
        self.cb = self.CB(cb)
        self.lib.cublasLtLoggerSetCallback.argtypes = [self.CB]
        self.lib.cublasLtLoggerSetLevel.argtypes = [ctypes.c_int]
        st1 = self.lib.cublasLtLoggerSetCallback(self.cb)
        st2 = self.lib.cublasLtLoggerSetLevel(2)
        if st1 != 0 or st2 != 0:
            raise RuntimeError(f"cublasLt logger: status {st1}, {st2}")

    def start(self):
        self.cur = []

    def stop(self):
        got, self.cur = self.cur, None
        return got


LT_CAPTURE = None


def parse_lt(msgs):
    """(S, summary) from the trace lines of one call: S = numSplitsK of the last matmul's algo (1 where the
    trace shows an algo without numSplitsK, the default), None where no matmul was traced."""
    import re
    S, summary = None, []
    for fn, msg in msgs:
        if not fn.endswith("Matmul"):
            continue
        m = re.search(r"algo=\[([^\]]*)\]", msg)
        comp = re.search(r"computeDesc=\[([^\]]*)\]", msg)
        ws = re.search(r"workSpaceSizeInBytes=(\d+)", msg)
        if not m:
            continue
        algo = m.group(1)
        k = re.search(r"numSplitsK=(\d+)", algo)
        S = int(k.group(1)) if k else 1
        summary.append(f"{fn}: {algo}; {comp.group(1) if comp else ''}; ws={ws.group(1) if ws else '?'}")
    return S, summary


def profile_calls(torch, calls, bufs, label_prefix="c"):
    """Kernel names (and grids) launched by each call, from one profiler session; errors per call."""
    from torch.profiler import ProfilerActivity, profile, record_function
    errors = {}
    lt = {}
    tens = []
    for call in calls:  # views of the buffers (and scale tensors) made before the profiler starts
        try:
            tens.append(bufs.tensors(call))
        except Exception as exc:
            tens.append(exc)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for idx, call in enumerate(calls):
            with record_function(f"{label_prefix}{idx}"):
                if LT_CAPTURE:
                    LT_CAPTURE.start()
                try:
                    if isinstance(tens[idx], Exception):
                        raise tens[idx]
                    LC.call_torch(torch, call, tens[idx])
                except Exception as exc:
                    errors[idx] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                if LT_CAPTURE:
                    lt[idx] = parse_lt(LT_CAPTURE.stop())
        torch.cuda.synchronize()
    del tens
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    os.unlink(path)
    ev = trace["traceEvents"] if isinstance(trace, dict) else trace
    labels = []
    launches = {}
    kernels: dict = {}
    for e in ev:
        cat = e.get("cat", "")
        if cat == "user_annotation" and e.get("name", "").startswith(label_prefix):
            labels.append((e["ts"], e["ts"] + e.get("dur", 0), int(e["name"][len(label_prefix):])))
        elif cat == "kernel":
            kernels.setdefault(e["args"].get("correlation"), []).append(e)
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launches[e["args"]["correlation"]] = e["ts"]
    labels.sort()
    starts = [lab[0] for lab in labels]
    import bisect
    per_call: dict[int, list] = {i: [] for i in range(len(calls))}
    for corr, ks in kernels.items():
        ts = launches.get(corr)
        if ts is None:
            continue
        pos = bisect.bisect_right(starts, ts) - 1
        if pos < 0 or ts > labels[pos][1]:
            continue
        for k in ks:
            per_call[labels[pos][2]].append((k["ts"], k["name"], k["args"].get("grid"), k["args"].get("block")))
    out = {}
    for i, ks in per_call.items():
        ks.sort()
        out[i] = {"kernels": [k[1] for k in ks], "grids": [k[2] for k in ks], "blocks": [k[3] for k in ks]}
        if i in lt:
            out[i]["lt_split_k"], out[i]["lt_algo"] = lt[i]
    return out, errors


def with_profile(calls, prof, errs, config):
    """Copies of ``calls``, each with what the profiler recorded for it (kernels, grids, cuBLASLt's split-K and
    algorithm), torch's error where it refused the call, and its configuration's name."""
    out = []
    for i, c in enumerate(calls):
        c = dict(c)
        c["kernels"] = prof[i]["kernels"]
        c["grids"] = prof[i]["grids"]
        c["lt_split_k"], c["lt_algo"] = prof[i].get("lt_split_k"), prof[i].get("lt_algo")
        if i in errs:
            c["torch_error"] = errs[i]
        c["config"] = config
        out.append(c)
    return out


def run_grid(torch, quick):
    bufs = Buffers(torch, (1024 * 1024) if quick else 16384 * 16384)
    results = []
    for cfg in GRID_CONFIGS:
        calls = grid_calls(cfg, quick)
        # warm-up: one call of every shape outside the profiler would double the time; one small call suffices
        t0 = time.time()
        prof, errs = profile_calls(torch, calls, bufs)
        log(f"grid {cfg[0]}: {len(calls)} calls, {len(errs)} errors, {time.time() - t0:.1f} s")
        results += with_profile(calls, prof, errs, cfg[0])
        torch.cuda.empty_cache()
    ex = extra_calls(quick)
    t0 = time.time()
    prof, errs = profile_calls(torch, ex, bufs, label_prefix="x")
    log(f"extra: {len(ex)} calls, {len(errs)} errors, {time.time() - t0:.1f} s")
    results += with_profile(ex, prof, errs, "extra")
    del bufs
    torch.cuda.empty_cache()
    return results


# ------------------------------------------------------------------------------------------------ heuristic
CUDA_R = {"float32": 0, "float16": 2, "bfloat16": 14, "float8_e4m3fn": 28, "float8_e5m2": 29}
COMPUTE_32F, COMPUTE_32F_FAST_TF32 = 68, 77
DESC_TRANSA, DESC_TRANSB, DESC_EPILOGUE, DESC_BIAS_DATA_TYPE, DESC_FAST_ACCUM = 3, 4, 7, 26, 25
PREF_MAX_WORKSPACE = 1
ALGO_ID, ALGO_TILE, ALGO_SPLITK, ALGO_RED = 0, 1, 2, 3
EPILOGUE_DEFAULT, EPILOGUE_BIAS = 1, 4


class HeurResult(ctypes.Structure):
    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspaceSize", ctypes.c_size_t), ("state", ctypes.c_int),
                ("wavesCount", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


class LtHeuristic:
    """cuBLASLt's heuristic through ctypes, with torch's row-major convention: D^T (N x M, column-major) =
    B^T A^T, i.e. Lt's A is torch's B (ld N, op N) and Lt's B is torch's A (ld K, op N) for mm/bmm/addmm;
    for scaled_mm (fp8 needs TN) Lt's A is torch's column-major B (K x N, ld K, op T) and Lt's B is torch's A
    (K x M, ld K, op N); for linear, Lt's A is weight (K x N, ld K, op T)."""

    def __init__(self, path, workspace):
        self.lib = L = ctypes.CDLL(path)
        vp, i32, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
        L.cublasLtCreate.argtypes = [ctypes.POINTER(vp)]
        L.cublasLtMatmulDescCreate.argtypes = [ctypes.POINTER(vp), i32, i32]
        L.cublasLtMatmulDescSetAttribute.argtypes = [vp, i32, vp, sz]
        L.cublasLtMatmulDescDestroy.argtypes = [vp]
        L.cublasLtMatrixLayoutCreate.argtypes = [ctypes.POINTER(vp), i32, ctypes.c_uint64, ctypes.c_uint64,
                                                 ctypes.c_int64]
        L.cublasLtMatrixLayoutSetAttribute.argtypes = [vp, i32, vp, sz]
        L.cublasLtMatrixLayoutDestroy.argtypes = [vp]
        L.cublasLtMatmulPreferenceCreate.argtypes = [ctypes.POINTER(vp)]
        L.cublasLtMatmulPreferenceSetAttribute.argtypes = [vp, i32, vp, sz]
        L.cublasLtMatmulPreferenceDestroy.argtypes = [vp]
        L.cublasLtMatmulAlgoGetHeuristic.argtypes = [vp, vp, vp, vp, vp, vp, vp, i32, ctypes.POINTER(HeurResult),
                                                     ctypes.POINTER(i32)]
        L.cublasLtMatmulAlgoConfigGetAttribute.argtypes = [vp, i32, vp, sz, ctypes.POINTER(sz)]
        self.ws = workspace
        self.h = ctypes.c_void_p()
        self._chk(self.lib.cublasLtCreate(ctypes.byref(self.h)), "create")

    @staticmethod
    def _chk(st, what):
        if st != 0:
            raise RuntimeError(f"cublasLt {what}: status {st}")

    def _layout(self, dt, rows, cols, ld, batch=1, stride=0):
        lay = ctypes.c_void_p()
        self._chk(self.lib.cublasLtMatrixLayoutCreate(ctypes.byref(lay), dt, ctypes.c_uint64(rows),
                                                      ctypes.c_uint64(cols), ctypes.c_int64(ld)), "layout")
        if batch > 1:
            b = ctypes.c_int32(batch)
            s = ctypes.c_int64(stride)
            self._chk(self.lib.cublasLtMatrixLayoutSetAttribute(lay, 5, ctypes.byref(b), 4), "batch")
            self._chk(self.lib.cublasLtMatrixLayoutSetAttribute(lay, 6, ctypes.byref(s), 8), "stride")
        return lay

    def query(self, call, n_algos=1):
        L = self.lib
        op, M, N, K, bt = call["op"], call["M"], call["N"], call["K"], call["batch"]
        ab = CUDA_R[call["a_dtype"]]
        bb = CUDA_R[call["b_dtype"]]
        dt = CUDA_R[call["out_dtype"]]
        fp8 = op == "scaled_mm"
        comp = COMPUTE_32F_FAST_TF32 if (call["a_dtype"] == "float32" and call["tf32"]) else COMPUTE_32F
        desc = ctypes.c_void_p()
        self._chk(L.cublasLtMatmulDescCreate(ctypes.byref(desc), comp, 0), "desc")
        ta = ctypes.c_int32(1 if (fp8 or op == "linear") else 0)
        tb = ctypes.c_int32(0)
        L.cublasLtMatmulDescSetAttribute(desc, DESC_TRANSA, ctypes.byref(ta), 4)
        L.cublasLtMatmulDescSetAttribute(desc, DESC_TRANSB, ctypes.byref(tb), 4)
        if call["bias"] and (op in ("linear", "scaled_mm") or (op == "addmm" and call["beta"] == 1.0
                                                               and call["alpha"] == 1.0)):
            ep = ctypes.c_int32(EPILOGUE_BIAS)
            L.cublasLtMatmulDescSetAttribute(desc, DESC_EPILOGUE, ctypes.byref(ep), 4)
            bdt = ctypes.c_int32(dt)
            L.cublasLtMatmulDescSetAttribute(desc, DESC_BIAS_DATA_TYPE, ctypes.byref(bdt), 4)
        if fp8 and call["fast_accum"]:
            fa = ctypes.c_int8(1)
            L.cublasLtMatmulDescSetAttribute(desc, DESC_FAST_ACCUM, ctypes.byref(fa), 1)
        if ta.value:
            Ad = self._layout(bb, K, N, K, bt, N * K)
        else:
            Ad = self._layout(bb, N, K, N, bt, N * K)
        Bd = self._layout(ab, K, M, K, bt, M * K)
        ct = dt
        Cd = self._layout(ct, N, M, N, bt, M * N)
        Dd = self._layout(dt, N, M, N, bt, M * N)
        pref = ctypes.c_void_p()
        L.cublasLtMatmulPreferenceCreate(ctypes.byref(pref))
        ws = ctypes.c_uint64(self.ws)
        L.cublasLtMatmulPreferenceSetAttribute(pref, PREF_MAX_WORKSPACE, ctypes.byref(ws), 8)
        res = (HeurResult * n_algos)()
        cnt = ctypes.c_int(0)
        st = L.cublasLtMatmulAlgoGetHeuristic(self.h, desc, Ad, Bd, Cd, Dd, pref, n_algos, res, ctypes.byref(cnt))
        out = []
        if st == 0:
            for r in res[: cnt.value]:
                vals = {}
                for name, attr in (("algo_id", ALGO_ID), ("tile", ALGO_TILE), ("split_k", ALGO_SPLITK),
                                   ("reduction", ALGO_RED)):
                    v = ctypes.c_int32(0)
                    w = ctypes.c_size_t(0)
                    L.cublasLtMatmulAlgoConfigGetAttribute(ctypes.byref(r.algo), attr, ctypes.byref(v), 4,
                                                           ctypes.byref(w))
                    vals[name] = v.value
                vals["workspace"] = r.workspaceSize
                out.append(vals)
        for lay in (Ad, Bd, Cd, Dd):
            L.cublasLtMatrixLayoutDestroy(lay)
        L.cublasLtMatmulPreferenceDestroy(pref)
        L.cublasLtMatmulDescDestroy(desc)
        return st, out


def lt_path():
    for line in open("/proc/self/maps"):
        p = line.split()[-1]
        if "libcublasLt.so" in p:
            return p
    return None


def run_heuristic(torch, calls, workspace):
    p = lt_path()
    if p is None:
        log("heur: libcublasLt not loaded")
        return
    lt = LtHeuristic(p, workspace)
    t0 = time.time()
    for c in calls:
        if c["op"] not in ("mm", "bmm", "addmm", "linear", "scaled_mm"):
            continue
        try:
            st, res = lt.query(c)
            c["heuristic"] = res[0] if res else {"status": st}
        except Exception as exc:
            c["heuristic"] = {"error": repr(exc)[:200]}
    log(f"heur: {len(calls)} queries in {time.time() - t0:.1f} s (workspace {workspace})")


def splitk_in_names(kernels):
    return any(("splitK" in k) or ("splitk" in k.lower()) for k in kernels)


def decide_split(c):
    """split_k and its source for one recorded call (never guessed): cuBLASLt's trace of the real call
    (numSplitsK) where it traced one; else the heuristic's S where its split / no split agrees with the kernels
    the profiler saw; else null."""
    ks = c.get("kernels") or []
    if not ks:
        return None, None
    if isinstance(c.get("lt_split_k"), int):
        return c["lt_split_k"], "cublaslt_log"
    h = c.get("heuristic") or {}
    prof_split = splitk_in_names(ks)
    S = h.get("split_k")
    if isinstance(S, int) and S >= 1 and (S > 1) == prof_split and any(k.startswith("nvjet") for k in ks):
        return S, "heuristic"
    return None, None


# ------------------------------------------------------------------------------------------------ probes
def probe_units(fmt_a, fmt_b):
    """(a_q, b weights 2^(m+w0), L factor) exponents for the slice probe of an input format pair."""
    if fmt_a.startswith("float8"):
        return -9, -9, 8  # a_q = 2^-9, b = 2^(m-9), L = 2^8 * 2^8; unit 2^-18
    return -12, -12, 7    # a_q = 2^-12, b = 2^(m-12), L = 2^7 * 2^7; unit 2^-24


def pattern(fmt, v):
    """Bit pattern of a power of two (or its negative) in fmt."""
    sign = 1 if v < 0 else 0
    e = round(math.log2(abs(v)))
    return LC.compose(fmt, np.array(sign), np.array(e), np.array(0))


def slice_tests(K, D):
    """Tests (p, [q ...]) of the slice probe, one group of 16 k positions at a time.  D = 1: L at p = 16g + 14
    and -L at p + 1 (one block: the accumulator is aligned with the block's products, so an earlier partial
    sum of the same slice is truncated away); D = 128 (fp8 slow accumulation, whose chunks of 128 start from
    zero): L at p = 16g + 15, -L at p + 128.  The q are the group's other positions, plus the previous
    group's last q (a slice starting at the group's first position)."""
    tests = []
    prev_last_q = None
    for lo in range(0, K, 16):
        hi = min(K, lo + 16)
        p = hi - 2 if D == 1 else hi - 1
        if p < lo or p + D >= K:
            prev_last_q = None
            continue
        qs = list(range(lo, p))
        if not qs:
            prev_last_q = None
            continue
        cross: list = [prev_last_q] if prev_last_q is not None else []
        allq = qs + cross
        for c in range(0, len(allq), 8):
            tests.append((p, allq[c:c + 8]))
        prev_last_q = qs[-1]
    return tests


def probe_inputs(call, A, B):
    """The probe's operands (logical (M, K) and (K, N) patterns) with what the call needs beside them: unit scales
    of the call's kind (per tensor, or row-wise (M, 1) and (1, N)) for ``scaled_mm``, a zero bias where the call has
    one, a zero C for ``addmm`` without bias (its ``beta`` then adds nothing).  Layouts (a_t, b_t) are
    ``library_calls.build_tensors``'s business: the patterns stay logical here."""
    M, N = A.shape[-2], B.shape[-1]
    inputs = {"A": A, "B": B}
    if call["op"] == "scaled_mm":
        one = np.uint32(0x3F800000)
        row = call.get("scale") == "row"
        inputs["scale_a"] = np.full((M, 1), one, dtype=np.uint32) if row else np.array(one, dtype=np.uint32)
        inputs["scale_b"] = np.full((1, N), one, dtype=np.uint32) if row else np.array(one, dtype=np.uint32)
    out_uint = LC.UINT[LC.FORMATS[call["out_dtype"]][0]]
    if call.get("bias"):
        inputs["bias"] = np.zeros(N, dtype=out_uint)
    elif call["op"] == "addmm":
        inputs["C"] = np.zeros((M, N), dtype=out_uint)
    return inputs


def slice_probe(torch, call, D):
    """For each test (p, qs): which q lose their weight (same slice as p's pair, before it).  Returns the raw
    readings per group, and the slice starts derived from them where the reading is contiguous."""
    M, N, K = call["M"], call["N"], call["K"]
    fa, fb, fo = call["a_dtype"], call["b_dtype"], call["out_dtype"]
    ea, eb, eL = probe_units(fa, fb)
    unit = 2.0 ** (ea + eb)
    tests = slice_tests(K, D)
    same = {}  # (q, p) -> lost
    anomalies = []
    width = LC.FORMATS[fa][0]
    for c0 in range(0, len(tests), N):
        chunk = tests[c0:c0 + N]
        A = np.zeros((M, K), dtype=LC.UINT[width])
        B = np.zeros((K, N), dtype=LC.UINT[LC.FORMATS[fb][0]])
        for j, (p, qs) in enumerate(chunk):
            A[:, p] = pattern(fa, 2.0 ** eL)
            A[:, p + D] = pattern(fa, 2.0 ** eL)
            B[p, j] = pattern(fb, 2.0 ** eL)
            B[p + D, j] = pattern(fb, -(2.0 ** eL))
            for m, q in enumerate(qs):
                A[:, q] = pattern(fa, 2.0 ** ea)
                B[q, j] = pattern(fb, 2.0 ** (eb + m))
        out = LC.run_call(torch, call, probe_inputs(call, A, B), "cuda")
        vals = LC.values(fo, out)
        if not np.all(vals[:, :len(chunk)] == vals[:1, :len(chunk)]):
            anomalies.append({"chunk": c0, "what": "rows differ"})
        for j, (p, qs) in enumerate(chunk):
            v = vals[0, j] / unit
            full = (1 << len(qs)) - 1
            if not (0 <= v <= full) or v != int(v):
                anomalies.append({"p": p, "qs": qs, "value": float(vals[0, j])})
                continue
            bits = int(v)
            for m, q in enumerate(qs):
                same[(q, p)] = not (bits >> m) & 1
    starts = [0]
    patterns = []
    noncontiguous = []
    for lo in range(0, K, 16):
        hi = min(K, lo + 16)
        p = hi - 2 if D == 1 else hi - 1
        row = [(q, same[(q, p)]) for q in range(lo, p) if (q, p) in same]
        if not row:
            patterns.append("")
            continue
        cross = [v for (q, pp), v in same.items() if pp == p and q < lo]
        patterns.append("".join("L" if lost else "s" for _, lost in row) + ("|" + ("L" if cross[0] else "s") if cross else ""))
        inside = [q for q, lost in row if lost]
        if not inside:
            continue
        first = min(inside)
        if not (all(lost for q, lost in row if q >= first) and not any(lost for q, lost in row if q < first)):
            noncontiguous.append(lo)
            continue
        if first > lo:
            starts.append(first)
        elif cross and not cross[0]:
            starts.append(lo)
    starts = sorted(set(starts))
    return {"tests": len(tests), "anomalies": anomalies[:40], "n_anomalies": len(anomalies),
            "starts": starts, "noncontiguous_groups": noncontiguous[:40], "lost_pairs": int(sum(same.values())),
            "pairs": len(same), "group_patterns": patterns}


def _ceil_div(a: int, b: int) -> int:
    """ceil(a / b) for positive b, in integers."""
    return -(-a // b)


def candidate_starts(K, S):
    """Slice starts of the published rules for S slices: bitequiv's chunk = ceil(ceil(K/G)/S)*G (remainder in
    the last slice) for grains G, and mmaemu's q = ceil(T/S) tiles of 128 (T = ceil(K/128)); empty slices
    have no start."""
    c = {}
    for G in (16, 32, 64, 128, 256):
        chunk = _ceil_div(_ceil_div(K, G), S) * G
        c[f"chunk_G{G}"] = [i * chunk for i in range(S) if i * chunk < K]
    T = -(-K // 128)
    q = -(-T // S)
    c["tiles128_ceil"] = [s * q * 128 for s in range(S) if s * q * 128 < K]
    even = [round(i * K / S) for i in range(S)]
    c["even_round"] = even
    return c


def f32(x):
    return np.float32(x)


def round_to(fmt, x):
    """RNE of float32 x to fmt, as float64 value (fp16, bf16, fp32)."""
    x = np.float32(x)
    if fmt == "float32":
        return float(x)
    if fmt == "float16":
        return float(np.float16(x))
    if fmt == "bfloat16":
        b = np.array(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
        if np.isnan(x):
            return float(x)
        r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
        return float(np.array(r, dtype=np.uint32).view(np.float32))
    raise ValueError(fmt)


def reduce_hypotheses(parts, out_fmt):
    """Outputs of the published reduction schemes for exact fp32 slice partials ``parts``."""
    h = {}
    acc = f32(0)
    for v in parts:
        acc = f32(acc + f32(v))
    h["fp32_forward"] = round_to(out_fmt, acc)
    acc = f32(0)
    for v in reversed(parts):
        acc = f32(acc + f32(v))
    h["fp32_reverse"] = round_to(out_fmt, acc)

    def pw(xs):
        if len(xs) == 1:
            return f32(xs[0])
        m = len(xs) // 2  # halves, the first one the shorter
        return f32(pw(xs[:m]) + pw(xs[m:]))
    h["fp32_pairwise"] = round_to(out_fmt, pw(list(parts)))
    if out_fmt != "float32":
        acc = f32(0)
        for v in parts:
            acc = f32(acc + f32(round_to(out_fmt, v)))
        h["out_rounded_partials_fp32_sum"] = round_to(out_fmt, acc)
        acc = 0.0
        for v in parts:
            acc = round_to(out_fmt, f32(acc) + f32(round_to(out_fmt, v)))
        h["out_dtype_chain"] = acc
        # serial split-K in place: the output holds slice 0 rounded to the output format, and each later slice
        # adds its fp32 partial to it in fp32, rounded back to the output format
        acc = round_to(out_fmt, f32(parts[0]))
        for v in parts[1:]:
            acc = round_to(out_fmt, f32(f32(acc) + f32(v)))
        h["out_serial_f32add"] = acc
    return h


def reduce_probe(torch, call, starts, rng):
    """One product per slice (at each slice's first k), random values of wide exponent spread; compares the
    outputs with the reduction hypotheses.  Returns counts of agreement per hypothesis."""
    M, N, K = call["M"], call["N"], call["K"]
    fa, fb, fo = call["a_dtype"], call["b_dtype"], call["out_dtype"]
    S = len(starts)
    wa, wb = LC.FORMATS[fa][0], LC.FORMATS[fb][0]
    A = np.zeros((M, K), dtype=LC.UINT[wa])
    B = np.zeros((K, N), dtype=LC.UINT[wb])
    ks = list(starts)
    A[:, ks] = pattern(fa, 1.0)
    eb = LC.FORMATS[fb]
    if fb.startswith("float8"):
        lo, hi = (-6, 8) if fb == "float8_e4m3fn" else (-14, 15)
    elif fb == "float16":
        lo, hi = (-12, 12) if fo == "float16" else (-14, 15)
    else:
        lo, hi = (-20, 20)
    agree: dict = {}
    for rnd in range(4):
        # rounds 0, 2: the wide exponent range; 1, 3: a narrow one (more cancellation between partials)
        rlo, rhi = (lo, hi) if rnd % 2 == 0 else (max(lo, -3), min(hi, 3))
        sign = rng.integers(0, 2, size=(S, N))
        ex = rng.integers(rlo, rhi + 1, size=(S, N))
        mant = rng.integers(0, 1 << eb[2], size=(S, N))
        if fb == "float32":
            mant &= ~((1 << 13) - 1)  # tf32 values: the conversion leaves them as they are
        B[ks, :] = LC.compose(fb, sign, ex, mant)
        out = LC.run_call(torch, call, probe_inputs(call, A, B), "cuda")
        got = LC.values(fo, out)[0]
        parts = LC.values(fb, B[ks, :])  # exact partials (1 * b)
        for j in range(N):
            hyp = reduce_hypotheses(parts[:, j], fo)
            for name, v in hyp.items():
                ok = (v == got[j]) or (np.isnan(v) and np.isnan(got[j]))
                agree[name] = agree.get(name, 0) + int(ok)
    return {"columns": 4 * N, "agree": agree}


def reduce_probe2(torch, call, starts, rng, rounds=4, keep_raw=0):
    """Two products per slice (at its first two k), so that each slice partial is exact in fp32 but, in general,
    not representable in a 16-bit output format, with wide exponent spreads between slices (fp8: random A
    values too, so that products span more than fp32's 24 bits).  Compares the outputs with the reduction
    hypotheses (``reduce_hypotheses``); columns whose partials are not exact in fp32 are skipped."""
    M, N, K = call["M"], call["N"], call["K"]
    fa, fb, fo = call["a_dtype"], call["b_dtype"], call["out_dtype"]
    S = len(starts)
    bounds = [*list(starts), K]
    if any(bounds[t + 1] - bounds[t] < 2 for t in range(S)):
        return {"columns": 0, "agree": {}, "skipped": "a slice narrower than 2"}
    wa, wb = LC.FORMATS[fa][0], LC.FORMATS[fb][0]
    k1 = np.array(starts)
    k2 = k1 + 1
    fmt_b = LC.FORMATS[fb]
    if fb.startswith("float8"):
        lo, hi = (-6, 8) if fb == "float8_e4m3fn" else (-14, 15)
    elif fb == "float16":
        lo, hi = (-2, 12) if fo == "float16" else (-2, 15)
    else:
        lo, hi = (-20, 20)
    agree: dict = {}
    cols, skipped = 0, 0
    raw: list = []
    for rnd in range(rounds):
        A = np.zeros((M, K), dtype=LC.UINT[wa])
        B = np.zeros((K, N), dtype=LC.UINT[wb])
        if fa.startswith("float8"):
            # one power of two per slice on both k (products keep B's 4-bit significands, so a slice's two
            # products need at most 4 + gap bits: exact in the fp8 block's window for gap <= 5), and spread
            # the slices' exponents by the A factor too
            pw = LC.compose(fa, np.zeros(S, int), rng.integers(-6, 9, size=S), np.zeros(S, int))
            A[:, k1] = pw
            A[:, k2] = pw
        else:
            A[:, k1] = pattern(fa, 1.0)
            A[:, k2] = pattern(fa, 1.0)
        rlo, rhi = (lo, hi) if rnd % 2 == 0 else (max(lo, -3), min(hi, 3))
        e1 = rng.integers(rlo, rhi + 1, size=(S, N))
        gap = rng.integers(1, 6, size=(S, N)) if fa.startswith("float8") else rng.integers(4, 13, size=(S, N))
        e2 = np.maximum(e1 - gap, lo - 6 if fb != "float32" else lo)
        m1 = rng.integers(0, 1 << fmt_b[2], size=(S, N))
        m2 = rng.integers(0, 1 << fmt_b[2], size=(S, N))
        if fb == "float32":
            m1 &= ~((1 << 13) - 1)
            m2 &= ~((1 << 13) - 1)
        B[k1, :] = LC.compose(fb, rng.integers(0, 2, size=(S, N)), e1, m1)
        B[k2, :] = LC.compose(fb, rng.integers(0, 2, size=(S, N)), e2, m2)
        out = LC.run_call(torch, call, probe_inputs(call, A, B), "cuda")
        got = LC.values(fo, out)[0]
        av1 = LC.values(fa, A[0, k1])[:, None]
        av2 = LC.values(fa, A[0, k2])[:, None]
        parts = av1 * LC.values(fb, B[k1, :]) + av2 * LC.values(fb, B[k2, :])  # float64, exact here
        for j in range(N):
            pj = parts[:, j]
            if not np.all(pj.astype(np.float32).astype(np.float64) == pj):
                skipped += 1
                continue
            cols += 1
            if len(raw) < keep_raw:
                raw.append([[float(x) for x in pj], float(got[j])])
            for name, v in reduce_hypotheses(pj, fo).items():
                ok = (v == got[j]) or (np.isnan(v) and np.isnan(got[j]))
                agree[name] = agree.get(name, 0) + int(ok)
    out = {"columns": cols, "skipped": skipped, "agree": agree}
    if keep_raw:
        out["raw"] = raw
    return out


def run_reduce2(torch, probes_path, only=None):
    """reduce_probe2 on every clean probe of an earlier run (its slice starts)."""
    with (gzip.open if probes_path.endswith(".gz") else open)(probes_path, "rt") as f:
        probes = json.load(f)["probes"]
    rng = np.random.default_rng(2027)
    res: list = []
    for p in probes:
        if not p.get("clean") or len(p["starts"]) < 2:
            continue
        if only and not p["config"].startswith(only):
            continue
        call = {k: p[k] for k in LC.CALL_FIELDS}
        try:
            r = reduce_probe2(torch, call, p["starts"], rng)
        except Exception as exc:
            r = {"error": repr(exc)[:300]}
        key = {k: p[k] for k in ("config", "M", "N", "K")}
        key["reduce2"] = r
        res.append(key)
        log(f"reduce2 {p['config']} {p['M']}x{p['N']}x{p['K']}: {r}")
    return res


def probe_shapes(grid):
    """Split-K calls to probe: per configuration, up to 8 shapes with the profiler's split-K kernel."""
    by_cfg: dict = {}
    for c in grid:
        if c.get("config") in (None, "extra") or c.get("torch_error"):
            continue
        if not (splitk_in_names(c.get("kernels", [])) or (c.get("lt_split_k") or 1) > 1):
            continue
        if c["M"] > 256 or c["N"] < 16:
            continue
        by_cfg.setdefault(c["config"], []).append(c)
    chosen = []
    for cs in by_cfg.values():
        cs.sort(key=lambda c: (c["K"], c["M"] * c["N"]))
        # spread over K
        step = max(1, len(cs) // 8)
        chosen += cs[::step][:8]
    return chosen


def run_probes(torch, grid, quick, budget=1e9):
    t_start = time.time()
    rng = np.random.default_rng(2026)
    res: list = []
    shapes = probe_shapes(grid)
    # non-power-of-two K too (remainder placement): 64 x 64 x K for each configuration's dtypes
    extra = []
    for cfg in GRID_CONFIGS:
        _, op, a, b, out, tf32, scale, fast = cfg
        for K in ((1040, 3000) if quick else (1040, 3000, 4160, 5008, 7000, 12000)):
            if op == "scaled_mm" and K % 16:
                continue
            c = call_dict(op, 64, 64, K, a, b, out, tf32, scale, fast)
            c["config"] = cfg[0]
            extra.append(c)
    bufs = Buffers(torch, 64 * 16384)
    prof, _errs = profile_calls(torch, extra, bufs, label_prefix="p")
    for i, c in enumerate(extra):
        c["kernels"] = prof[i]["kernels"]
        c["grids"] = prof[i]["grids"]
        c["lt_split_k"], c["lt_algo"] = prof[i].get("lt_split_k"), prof[i].get("lt_algo")
    shapes += [c for c in extra if splitk_in_names(c["kernels"]) or (c.get("lt_split_k") or 1) > 1]
    for c in shapes:
        if time.time() - t_start > budget:
            log(f"probes: time budget reached, {len(res)} of {len(shapes)} probed")
            break
        D = 128 if (c["op"] == "scaled_mm" and not c["fast_accum"]) else 1
        t0 = time.time()
        try:
            sp = slice_probe(torch, c, D)
            entry = {k: c[k] for k in LC.CALL_FIELDS}
            entry.update({"config": c["config"], "kernels": c["kernels"], "grids": c.get("grids"), "D": D,
                          "heuristic": c.get("heuristic"), "lt_split_k": c.get("lt_split_k"),
                          "lt_algo": c.get("lt_algo")})
            entry.update(sp)
            S = len(sp["starts"])
            entry["candidates_matching"] = [k for k, v in candidate_starts(c["K"], S).items() if v == sp["starts"]]
            clean = not sp["noncontiguous_groups"] and (D == 128 or sp["n_anomalies"] == 0)
            entry["clean"] = clean
            if clean and 2 <= S <= 64:
                entry["reduce"] = reduce_probe(torch, c, sp["starts"], rng)
            res.append(entry)
            log(f"probe {c['config']} {c['M']}x{c['N']}x{c['K']}: S={len(sp['starts'])} starts={sp['starts'][:12]}"
                f" anomalies={sp['n_anomalies']} reduce={entry.get('reduce', {}).get('agree')}"
                f" ({time.time() - t0:.1f} s)")
        except Exception as exc:
            log(f"probe {c.get('config')} {c['M']}x{c['N']}x{c['K']} failed: {exc!r}")
            traceback.print_exc()
    return res, extra


class ProbePathTensors:
    """``Buffers``' interface over the probe's own path (``probe_inputs`` of zero operands through
    ``library_calls.build_tensors``): profiling with it shows the kernels and the cuBLASLt trace of the tensors the
    probes hand torch, layouts (a_t, b_t) included."""

    def __init__(self, torch):
        self.torch = torch

    def tensors(self, call):
        M, N, K = call["M"], call["N"], call["K"]
        A = np.zeros((M, K), dtype=LC.UINT[LC.FORMATS[call["a_dtype"]][0]])
        B = np.zeros((K, N), dtype=LC.UINT[LC.FORMATS[call["b_dtype"]][0]])
        return LC.build_tensors(self.torch, call, probe_inputs(call, A, B), "cuda")


def run_probe_list(torch, calls, path, budget=1e9):
    """Slice probe, then reduce_probe2, of each call of a list (``--probe-list``), in the list's order, until
    ``budget`` seconds have passed; ``path`` is rewritten after every probe.  Each entry keeps the list's fields
    (``config``, ``recorded``, ...) and adds the kernels and cuBLASLt trace of the call on flat buffers as the
    recorder made it (``kernels``, ``lt_split_k``, ``lt_algo``) and on the probe's own tensors (``probe_kernels``,
    ``probe_lt_split_k``, ``probe_lt_algo``)."""
    t0 = time.time()
    bufs = Buffers(torch, max(max(c["K"] * max(c["M"], c["N"]), c["M"] * c["N"]) for c in calls) + 1)
    prof, errs = profile_calls(torch, calls, bufs, label_prefix="l")
    del bufs
    torch.cuda.empty_cache()
    prof2, errs2 = profile_calls(torch, calls, ProbePathTensors(torch), label_prefix="q")
    rng = np.random.default_rng(2028)
    res: list = []
    for i, c in enumerate(calls):
        if time.time() - t0 > budget:
            log(f"list: time budget reached, {len(res)} of {len(calls)} probed")
            break
        e = dict(c)
        e["kernels"] = prof[i]["kernels"]
        e["lt_split_k"], e["lt_algo"] = prof[i].get("lt_split_k"), prof[i].get("lt_algo")
        e["probe_kernels"] = prof2[i]["kernels"]
        e["probe_lt_split_k"], e["probe_lt_algo"] = prof2[i].get("lt_split_k"), prof2[i].get("lt_algo")
        for k, v in (("torch_error", errs.get(i)), ("probe_torch_error", errs2.get(i))):
            if v:
                e[k] = v
        D = 128 if (c["op"] == "scaled_mm" and not c["fast_accum"]) else 1
        t1 = time.time()
        try:
            sp = slice_probe(torch, c, D)
            e.update({k: sp[k] for k in ("starts", "n_anomalies", "noncontiguous_groups", "tests", "pairs",
                                         "lost_pairs", "anomalies")})
            if c["K"] <= 8192:
                e["group_patterns"] = sp["group_patterns"]
            if not sp["noncontiguous_groups"] and len(sp["starts"]) >= 2:
                e["reduce2"] = reduce_probe2(torch, c, sp["starts"], rng, rounds=max(4, min(64, 256 // c["N"])),
                                             keep_raw=32)
        except Exception as exc:
            e["probe_error"] = repr(exc)[:300]
            traceback.print_exc()
        e["seconds"] = round(time.time() - t1, 2)
        res.append(e)
        st = e.get("starts") or [0]
        log(f"list {c.get('config')} {c['M']}x{c['N']}x{c['K']} a_t={c.get('a_t')} b_t={c.get('b_t')}: "
            f"S_lt={e['lt_split_k']}/{e['probe_lt_split_k']} S_bits={len(st)} chunk={st[1] if len(st) > 1 else None} "
            f"last={c['K'] - st[-1]} anomalies={e.get('n_anomalies')} nonc={(e.get('noncontiguous_groups') or [])[:3]} "
            f"red={e.get('reduce2', {}).get('agree')} err={e.get('probe_error')} ({e['seconds']} s)")
        with open(path, "w") as f:
            json.dump(res, f)
    return res


# ------------------------------------------------------------------------------------------------ validation
def run_validation(torch, quick, calls=None):
    """Run validation calls (``library_calls.validation_calls()``, or ``calls``: dicts with the call fields,
    ``seed`` and ``dist``) on inputs from make_inputs and record sampled outputs, kernels and split_k."""
    calls = LC.validation_calls() if calls is None else calls
    if quick:
        calls = calls[::10]
    done, rejected = [], []
    t0 = time.time()
    for c in calls:
        inputs = LC.make_inputs(c, c["seed"])
        try:
            out = LC.run_call(torch, c, inputs, "cuda")
            out2 = LC.run_call(torch, c, inputs, "cuda")
        except Exception as exc:
            r = dict(c)
            r["torch_error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            rejected.append(r)
            continue
        pos = LC.sample_positions(c, c["seed"])
        width = out.dtype.itemsize * 2
        r = dict(c)
        r["deterministic"] = bool(np.array_equal(out, out2))
        r["samples"] = [[*list(p), f"0x{int(out[p]):0{width}x}"] for p in pos]
        done.append(r)
    log(f"valid: {len(done)} calls run, {len(rejected)} rejected, {time.time() - t0:.1f} s")
    # kernels of each validation call (one profiler session, same shapes, random values)
    bufs = Buffers(torch, max(max(c["batch"] * c["K"] * max(c["M"], c["N"]), c["M"] * c["N"]) for c in done) + 1)
    prof, _errs = profile_calls(torch, done, bufs, label_prefix="v")
    for i, c in enumerate(done):
        c["kernels"] = prof[i]["kernels"]
        c["blocks"] = prof[i]["blocks"]  # the block dims: a GEMV kernel's K order is read per kernel and block
        c["split_k"] = prof[i].get("lt_split_k")
        c["split_k_source"] = "cublaslt_log" if c["split_k"] is not None else None
        c["lt_algo"] = prof[i].get("lt_algo")
    return done, rejected


# ------------------------------------------------------------------------------------------------ main
def main():
    global LOG, LT_CAPTURE
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--stages", default="info,grid,heur,probes,valid")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--probe-budget", type=float, default=1e9, help="seconds for the probes stage")
    ap.add_argument("--grid-from", help="reuse the grid calls of an earlier run (its grid_raw.json)")
    ap.add_argument("--reduce-from", help="only run reduce_probe2 on the clean probes of this probes file")
    ap.add_argument("--only", help="with --reduce-from: configurations starting with this")
    ap.add_argument("--probe-list", help="only probe the calls of this JSON list (slice probe, then reduce_probe2)")
    ap.add_argument("--valid-list", help="only run these validation calls (JSON list of calls with seed and dist); "
                                          "writes valid_list.json in the validation file's format")
    ap.add_argument("--input-crc", action="store_true",
                    help="only write crc32 of make_inputs of every validation call (cross-machine check)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    LOG = open(os.path.join(args.out, "log.txt"), "a")
    stages = args.stages.split(",")
    if args.input_crc:
        import zlib
        crc = []
        for c in LC.validation_calls():
            inp = LC.make_inputs(c, c["seed"])
            crc.append([c["seed"], {k: zlib.crc32(np.ascontiguousarray(v).tobytes()) for k, v in sorted(inp.items())}])
        with open(os.path.join(args.out, "input_crc.json"), "w") as f:
            json.dump({"numpy": np.__version__, "crc": crc}, f)
        log(f"input crc: {len(crc)} calls, numpy {np.__version__}")
        return
    import torch
    if args.valid_list:
        torch.mm(torch.ones(2, 2, device="cuda"), torch.ones(2, 2, device="cuda"))
        LT_CAPTURE = LtLogCapture(lt_path())
        with open(args.valid_list) as f:
            vcalls = json.load(f)
        meta = info(torch)
        done, rejected = run_validation(torch, False, vcalls)
        val = {"gpu": meta["gpu"], "torch": meta["torch"], "cuda": meta["cuda"], "cublas": meta.get("cublas"),
               "cublaslt": meta.get("cublaslt"), "driver": meta.get("driver"),
               "generator": "tcsmt/hwcheck/library_calls.py: make_inputs(call, seed); sample_positions(call, seed)",
               "calls": done, "rejected": rejected}
        with open(os.path.join(args.out, "valid_list.json"), "w") as f:
            json.dump(val, f, separators=(",", ":"))
        if not args.probe_list:
            return
    if args.probe_list:
        torch.mm(torch.ones(2, 2, device="cuda"), torch.ones(2, 2, device="cuda"))
        LT_CAPTURE = LtLogCapture(lt_path())
        with open(args.probe_list) as f:
            calls = json.load(f)
        run_probe_list(torch, calls, os.path.join(args.out, "probe_list.json"), args.probe_budget)
        return
    if args.reduce_from:
        ws = measure_workspace(torch)  # first cuBLAS calls of a fresh process: the workspaces
        log("workspace (fresh process)", ws)
        res = run_reduce2(torch, args.reduce_from, args.only)
        with open(os.path.join(args.out, "reduce2.json"), "w") as f:
            json.dump({"workspace_fresh_process": ws, "reduce2": res}, f, indent=1)
        return
    meta = info(torch)
    log("info", json.dumps(meta))
    try:
        torch.mm(torch.ones(2, 2, device="cuda"), torch.ones(2, 2, device="cuda"))  # loads cuBLAS(Lt)
        LT_CAPTURE = LtLogCapture(lt_path())
        LT_CAPTURE.start()
        torch.mm(torch.ones(64, 4096, device="cuda", dtype=torch.bfloat16),
                 torch.ones(4096, 64, device="cuda", dtype=torch.bfloat16))
        torch.cuda.synchronize()
        log("lt capture test:", parse_lt(LT_CAPTURE.stop()))
    except Exception as exc:
        LT_CAPTURE = None
        log(f"lt capture unavailable: {exc!r}")
    ws = measure_workspace(torch)
    meta["workspace_measured"] = ws
    log("workspace", ws)
    workspace = max(ws.values()) if ws and max(ws.values()) > 0 else None
    grid = []
    if args.grid_from:
        import gzip
        with gzip.open(args.grid_from, "rt") as f:
            grid = json.load(f)
    elif "grid" in stages:
        grid = run_grid(torch, args.quick)
    if "heur" in stages and grid and not args.grid_from:
        try:
            run_heuristic(torch, grid, workspace or 32 * 1024 * 1024)
        except Exception as exc:
            log(f"heur failed: {exc!r}")
            traceback.print_exc()
    if grid and not args.grid_from:
        import gzip
        with gzip.open(os.path.join(args.out, "grid_raw.json.gz"), "wt") as f:
            json.dump(grid, f, separators=(",", ":"))
    probes, probe_calls = [], []
    if "probes" in stages and grid:
        try:
            run_probes_res = run_probes(torch, grid, args.quick, args.probe_budget)
            probes, probe_calls = run_probes_res
            if "heur" in stages:
                run_heuristic(torch, probe_calls, workspace or 32 * 1024 * 1024)
        except Exception as exc:
            log(f"probes failed: {exc!r}")
            traceback.print_exc()
    # agreement of heuristic and profiler
    agree = {"both_split": 0, "both_nosplit": 0, "heur_split_only": 0, "prof_split_only": 0, "no_heur": 0}
    for c in grid:
        h = c.get("heuristic") or {}
        if not c.get("kernels"):
            continue
        if not isinstance(h.get("split_k"), int):
            agree["no_heur"] += 1
            continue
        hs, ps = h["split_k"] > 1, splitk_in_names(c["kernels"])
        agree[("both_split" if ps else "heur_split_only") if hs else ("prof_split_only" if ps else "both_nosplit")] += 1
    log("heuristic vs profiler", agree)
    agree_lt: dict = {}
    for c in grid:
        if not c.get("kernels"):
            continue
        S = c.get("lt_split_k")
        key = ("no_lt" if S is None else ("lt_split" if S > 1 else "lt_nosplit")) + \
            ("+prof_split" if splitk_in_names(c["kernels"]) else "+prof_nosplit")
        agree_lt[key] = agree_lt.get(key, 0) + 1
        h = (c.get("heuristic") or {}).get("split_k")
        if S is not None and isinstance(h, int):
            k2 = "heur_S_equal_lt_S" if h == S else "heur_S_differs"
            agree_lt[k2] = agree_lt.get(k2, 0) + 1
    log("cublaslt log vs profiler", agree_lt)
    # bits override where the probe measured S
    probe_S = {}
    for p in probes:
        if p.get("clean") and (p.get("lt_split_k") in (None, len(p["starts"]))):
            probe_S[tuple(p[k] for k in LC.CALL_FIELDS)] = len(p["starts"])
    calls_out = []
    for c in grid + probe_calls:
        e = {k: c[k] for k in LC.CALL_FIELDS}
        e["kernels"] = c.get("kernels", [])
        call_key = tuple(c[k] for k in LC.CALL_FIELDS)
        S, src = decide_split(c)
        if call_key in probe_S:
            S, src = probe_S[call_key], "bits"
        e["split_k"] = S
        e["split_k_source"] = src
        if c.get("torch_error"):
            e["torch_error"] = c["torch_error"]
        h = c.get("heuristic")
        if h and "split_k" in h:
            e["heuristic"] = [h.get("algo_id"), h.get("tile"), h.get("split_k"), h.get("reduction"), h.get("workspace")]
        if c.get("lt_algo"):
            e["lt_algo"] = c["lt_algo"]
        calls_out.append(e)
    plans = {"gpu": meta["gpu"], "torch": meta["torch"], "cuda": meta["cuda"], "cublas": meta.get("cublas"),
             "cublaslt": meta.get("cublaslt"), "workspace_bytes": workspace,
             "method": ("kernels: torch.profiler (one session per dtype configuration, record_function label per "
                        "call, kernels matched to launches by correlation id); split_k: numSplitsK of the algo in "
                        "cuBLASLt's own trace of the real call (cublasLtLoggerSetCallback, level 2; 1 where the "
                        "trace shows an algo without numSplitsK), source 'cublaslt_log'; else cuBLASLt heuristic "
                        "(cublasLtMatmulAlgoGetHeuristic, first algorithm, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) where "
                        "its split / no split agrees with the profiler's kernel names ('splitK'), 'bits' where the "
                        "slice probe read the slices from output bits, else null"),
             "meta": meta, "heuristic_vs_profiler": agree, "cublaslt_log_vs_profiler": agree_lt,
             "heuristic_fields": ["algo_id", "tile_id", "split_k", "reduction_scheme", "workspace_bytes"],
             "calls": calls_out, "families": {}}
    import gzip
    with gzip.open(os.path.join(args.out, "h100_cublas_plans.json.gz"), "wt") as f:
        json.dump(plans, f, separators=(",", ":"))
    with open(os.path.join(args.out, "probes.json"), "w") as f:
        json.dump(probes, f, indent=1)
    if "valid" in stages:
        done, rejected = run_validation(torch, args.quick)
        val = {"gpu": meta["gpu"], "torch": meta["torch"], "cuda": meta["cuda"], "cublas": meta.get("cublas"),
               "cublaslt": meta.get("cublaslt"), "workspace_bytes": workspace,
               "generator": "tcsmt/hwcheck/library_calls.py: make_inputs(call, seed); sample_positions(call, seed)",
               "calls": done, "rejected": rejected}
        with open(os.path.join(args.out, "h100_library_validation.json"), "w") as f:
            json.dump(val, f, separators=(",", ":"))
    log("done")


if __name__ == "__main__":
    main()
