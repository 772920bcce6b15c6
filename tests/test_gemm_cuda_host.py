"""The library finish of tcsmt.kernels.cuda (split-K reduction, epilogue, output conversion) and its pattern
conversions, compiled from the same CUDA source (tcsmt/hwcheck/gemm_emulation.cu) as host C++, against the
numpy path that defines them (tcsmt.library.evaluate.finish_numpy, tcsmt.arith.semantics.convert).

Why a host build: CI has no GPU, and the finish is per-output scalar code (``finish_one``); the GPU kernels
call the same functions (their device runs: benchmarks/bench_library_device.py compares every output with
torch).  Skips without a C++ compiler.
"""
from __future__ import annotations

import ctypes
import dataclasses
import shutil
import subprocess

import numpy as np
import pytest

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import FP32, get_format
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.kernels.cuda import _source_path, convert_arguments, finish_arguments
from tcsmt.library import api as L
from tcsmt.library.evaluate import _const32, finish_numpy, fmt_of, to_fp32

CXX = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler")
_B = NumpyBackend()


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    so = tmp_path_factory.mktemp("gemm_host") / "gemm_emulation_host.so"
    subprocess.run([CXX, "-O1", "-shared", "-fPIC", "-std=c++17", "-x", "c++", "-o", str(so), str(_source_path())],
                   check=True, capture_output=True)
    return ctypes.CDLL(str(so))


def _c(args):
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(ctypes.c_void_p(a.ctypes.data))
        elif isinstance(a, np.int64):
            out.append(ctypes.c_longlong(int(a)))
        elif isinstance(a, np.uint32):
            out.append(ctypes.c_uint(int(a)))
        else:
            out.append(ctypes.c_int(int(a)))
    return out


def fp32_patterns(rng, shape, kind):
    """fp32 patterns: 'wide' (every exponent, 2% specials, 3% zeros), 'narrow', 'tiny' (subnormal range),
    'huge' (near overflow)."""
    n = int(np.prod(shape))
    lo, hi = {"wide": (0, 255), "narrow": (124, 131), "tiny": (0, 4), "huge": (250, 255)}[kind]
    e = rng.integers(lo, hi, n)
    f = rng.integers(0, 1 << 23, n)
    if kind == "narrow":
        f &= ~((1 << rng.integers(0, 20, n)) - 1)  # short significands: ties and exact sums happen
    bits = (rng.integers(0, 2, n) << 31) | (e << 23) | f
    pick = rng.random(n)
    bits = np.where(pick < 0.03, (rng.integers(0, 2, n) << 31), bits)  # +-0
    if kind != "narrow":
        sp = np.where(rng.random(n) < 0.5, 0x7F800000, 0x7FFFFFFF) | (rng.integers(0, 2, n) << 31)
        bits = np.where(pick > 0.98, sp, bits)
    return bits.astype(np.uint32).reshape(shape)


def partials(rng, S, shape, kind):
    parts = [fp32_patterns(rng, shape, kind) for _ in range(S)]
    if kind == "narrow" and S > 1:  # cancellations: partial 1 is -(partial 0) with its last bits changed
        parts[1] = (parts[0] ^ np.uint32(1 << 31)) ^ rng.integers(0, 4, shape).astype(np.uint32)
    return parts


def out_patterns(rng, fmt, shape):
    f = get_format(fmt)
    bits = rng.integers(0, 1 << f.storage_bits, int(np.prod(shape)))
    return bits.astype(f.dtype).reshape(shape)


BASE = L.plan("mm", 64, 64, 4096, a_dtype="bfloat16")


def plan_of(out_dtype, reduce, steps, alpha=1.0, beta=0.0, scale=None):
    call = dataclasses.replace(BASE.call, out_dtype=out_dtype, alpha=alpha, beta=beta, scale=scale)
    return dataclasses.replace(BASE, call=call, reduce=reduce, epilogue=tuple(steps), split_k=2, grain=128)


def host_finish(lib, plan, parts, **kw):
    out_fmt = fmt_of(plan.call.out_dtype)
    args, r, c = finish_arguments(parts, out_fmt, plan.reduce, plan.epilogue, alpha=_const32(plan.call.alpha),
                                  beta=_const32(plan.call.beta), xp=np, **kw)
    out = np.zeros(r * c, dtype=np.uint32)
    lib.finish_outputs_host(*_c(args), ctypes.c_void_p(out.ctypes.data))
    return out.reshape(r, c).astype(out_fmt.dtype)


REDUCES = ["fp32_forward", "pairwise", "out_rounded", "out_chain", "out_chain_acc_add"]


@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("kind", ["wide", "narrow", "tiny", "huge"])
def test_reductions_match_numpy(lib, out_dtype, reduce, kind):
    rng = np.random.default_rng(hash((out_dtype, reduce, kind)) % 2**32)
    for S in (1, 2, 3, 5, 70 if reduce != "pairwise" else 64):
        plan = plan_of(out_dtype, reduce, ())
        parts = partials(rng, S, (16, 40), kind)
        assert np.array_equal(host_finish(lib, plan, parts), finish_numpy(plan, parts)), (S, reduce, kind)


SCALARS = [1.0, 1.5, 0.75, -2.0, 0.0, -0.0, 3e38, 1e-40, float("inf")]


@pytest.mark.parametrize("steps", [("alpha",), ("beta_c",), ("alpha_beta_c",), ("bias",), ("scale",),
                                   ("scale_b_then_a",), ("alpha", "bias"), ("beta_c", "bias"),
                                   ("out_round_c",)])
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("kind", ["wide", "narrow", "tiny", "huge"])
def test_epilogues_match_numpy(lib, steps, out_dtype, kind):
    rng = np.random.default_rng(hash((steps, out_dtype, kind)) % 2**32)
    r, c = 12, 20
    out_fmt = fmt_of(out_dtype)
    for trial in range(3):
        alpha, beta = SCALARS[rng.integers(len(SCALARS))], SCALARS[rng.integers(len(SCALARS))]
        row = trial % 2 == 1
        scale = "row" if row else "tensor"
        plan = plan_of(out_dtype, "fp32_forward", steps, alpha=alpha, beta=beta,
                       scale=scale if {"scale", "scale_b_then_a"} & set(steps) else None)
        parts = partials(rng, 1 + trial, (r, c), kind)
        kw = {}
        if {"beta_c", "alpha_beta_c", "out_round_c"} & set(steps):
            kw["C"] = to_fp32(out_patterns(rng, out_fmt.name, (r, c)), out_fmt)
        if "bias" in steps:
            kw["bias"] = to_fp32(out_patterns(rng, "bf16", (c,)), get_format("bf16"))
        if {"scale", "scale_b_then_a"} & set(steps):
            kw["scale_a"] = fp32_patterns(rng, (r if row else 1,), kind).astype(np.int64)
            kw["scale_b"] = fp32_patterns(rng, (c if row else 1,), kind).astype(np.int64)
        assert np.array_equal(host_finish(lib, plan, parts, **kw), finish_numpy(plan, parts, **kw)), (steps, trial)


@pytest.mark.parametrize("steps", [("beta_c",), ("alpha_beta_c",)])
@pytest.mark.parametrize("beta", [1.5, 0.3, -1.0000001])
def test_fused_multiply_add_cancellation(lib, steps, beta):
    """y = FFMA(beta, C, y) where y is -(beta * C) within a few units: the exact 48-bit product decides the bits."""
    from tcsmt.library.evaluate import IEEE32

    rng = np.random.default_rng(11)
    r, c = 32, 64
    C = fp32_patterns(rng, (r, c), "narrow").astype(np.int64)
    b32 = _const32(beta)
    if steps == ("alpha_beta_c",):  # y is then first scaled by alpha = 1 (exact): the same cancellation
        prod = np.asarray(sem.mul_rounded(_B, IEEE32, b32, C, FP32, "rne")).astype(np.int64)
    else:
        prod = np.asarray(sem.mul_rounded(_B, IEEE32, b32, C, FP32, "rz")).astype(np.int64)
    y = ((prod ^ (1 << 31)) + rng.integers(-3, 4, (r, c))).astype(np.uint32)
    plan = plan_of("float32", "fp32_forward", steps, alpha=1.0, beta=beta)
    assert np.array_equal(host_finish(lib, plan, [y], C=C), finish_numpy(plan, [y], C=C))


@pytest.mark.parametrize("src,dst,mode", [("fp32", "bf16", "rne"), ("fp32", "fp16", "rne"), ("bf16", "fp32", "rne"),
                                          ("fp16", "fp32", "rne"), ("fp32", "tf32", "rne"), ("fp32", "tf32", "rna"),
                                          ("fp32", "tf32", "rz"), ("fp32", "fp32", "rne")])
def test_conversions_match_semantics(lib, src, dst, mode):
    rng = np.random.default_rng(3)
    fs, fd = get_format(src), get_format(dst)
    if fs.storage_bits == 32:
        bits = np.concatenate([fp32_patterns(rng, (4000,), k) for k in ("wide", "narrow", "tiny", "huge")])
        bits = np.concatenate([bits, np.array([0x7FC00001, 0xFFFFFFFF, 0x7F7FFFFF, 0x477FF000, 0x477FEFFF, 0x477FF001,
                                               0x33000000, 0x33000001, 0x387FE000, 0x7F7FF000], np.uint32)])
    else:
        bits = np.arange(1 << fs.storage_bits, dtype=np.uint32)  # every pattern
    want = np.asarray(sem.convert(_B, bits.astype(fs.dtype), fs, fd, mode)).astype(np.uint64)
    if fs == fd:
        got = bits
    else:
        out = np.zeros(bits.size, dtype=np.uint32)
        lib.convert_patterns_host(*_c([bits, np.int64(bits.size), *convert_arguments(fs, fd, mode)]),
                                  ctypes.c_void_p(out.ctypes.data))
        got = out
    assert np.array_equal(got.astype(np.uint64), want)


def test_finish_refuses_what_it_does_not_implement():
    from tcsmt.errors import TcsmtError

    parts = [np.zeros((2, 2), np.uint32)]
    with pytest.raises(TcsmtError, match="reduction"):
        finish_arguments(parts, FP32, "tree", ())
    with pytest.raises(TcsmtError, match="epilogue"):
        finish_arguments(parts, FP32, "fp32_forward", ("gelu",))
    with pytest.raises(TcsmtError, match="64 at most"):
        finish_arguments(parts * 65, FP32, "pairwise", ())
    finish_arguments(parts * 65, FP32, "fp32_forward", ())  # serial reductions take any number
