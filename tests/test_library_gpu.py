"""Library calls on the GPU (CuPy arrays: tcsmt.library.evaluate's device path) against the numpy path, bit for bit.

GPU only: skips without CuPy or a CUDA device (CI has none; the device runs of
benchmarks/bench_library_device.py also compare every output of large calls with torch).  The plans are
recorded ones (models/library/h100_cublas13_recorded.toml) chosen to cover every device step: split-K
slices and each reduction, residue-first K tiles, every epilogue step, tf32 input rounding, fp8 scales,
a chain the GPU kernel does not implement (fp32 SIMT: computed on the CPU), and 264 split-K slices.
"""
from __future__ import annotations

import numpy as np
import pytest

from tcsmt.arith.formats import get_format
from tcsmt.library import api as L


def _cupy():
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception:
        pytest.skip("no CUDA device")
    return cp


CALLS = [  # (op, M, N, K, plan keywords)
    ("mm", 64, 64, 4096, {"a_dtype": "bfloat16"}),  # split-K, fp32_forward
    ("mm", 8, 32, 2, {"a_dtype": "bfloat16"}),  # S = 264: empty slices, the serial reduction past 64 partials
    ("mm", 8, 2, 2, {"a_dtype": "bfloat16"}),  # out_rounded
    ("mm", 4, 2, 8192, {"a_dtype": "bfloat16"}),  # out_chain_acc_add, k_tile
    ("mm", 16384, 2, 2, {"a_dtype": "bfloat16"}),  # k_tile without split
    ("mm", 512, 4, 4, {"a_dtype": "float32", "tf32": True}),  # tf32 input rounding
    ("mm", 64, 64, 4096, {"a_dtype": "float32", "tf32": True}),
    ("mm", 32, 32, 8192, {"a_dtype": "float32"}),  # fp32 SIMT chain: not on the GPU kernel
    ("addmm", 8, 8, 16384, {"a_dtype": "bfloat16", "alpha": 1.5, "beta": 0.75}),  # alpha, beta_c, split
    ("addmm", 256, 256, 256, {"a_dtype": "float32", "tf32": True, "alpha": 0.5, "beta": -1.25}),  # alpha_beta_c
    ("linear", 8, 8, 16384, {"a_dtype": "float16", "bias": True}),  # bias after a split
    ("scaled_mm", 256, 256, 8192, {"a_dtype": "float8_e4m3fn", "out_dtype": "bfloat16", "scale": "tensor",
                                   "bias": True}),
    ("scaled_mm", 48, 160, 1040, {"a_dtype": "float8_e4m3fn", "out_dtype": "float32", "scale": "row"}),
    ("scaled_mm", 1, 16, 7840, {"a_dtype": "float8_e4m3fn", "out_dtype": "float32", "scale": "tensor",
                                "fast_accum": True}),
]


def _patterns(rng, fmt_name, shape):
    f = get_format(fmt_name)
    n = int(np.prod(shape))
    e = rng.integers(max(1, f.bias - 6), f.bias + 6, n)
    m = rng.integers(0, 1 << f.frac_bits, n)
    word = (((rng.integers(0, 2, n) << f.exp_bits) | e) << f.frac_bits | m) << f.pad_bits
    return word.astype(f.dtype).reshape(shape)


@pytest.mark.gpu
@pytest.mark.parametrize("op,M,N,K,kw", CALLS, ids=[f"{c[0]}-{c[1]}x{c[2]}x{c[3]}-{c[4]['a_dtype']}" for c in CALLS])
def test_device_path_matches_numpy(op, M, N, K, kw):
    cp = _cupy()
    p = L.plan(op, M, N, K, **kw)
    rng = np.random.default_rng(M * 7 + N * 3 + K)
    fin = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "e4m3"}[kw["a_dtype"]]
    r, c = min(M, 40), min(N, 40)
    A, B = _patterns(rng, fin, (r, K)), _patterns(rng, fin, (K, c))
    args = {}
    fout = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}[p.call.out_dtype]
    if {"beta_c", "alpha_beta_c"} & set(p.epilogue):
        args["C"] = _patterns(rng, fout, (r, c))
    if "bias" in p.epilogue:
        args["bias"] = _patterns(rng, "bf16" if op == "scaled_mm" else fin, (c,))
    if p.call.scale:
        args["scale_a"] = _patterns(rng, "fp32", (r if p.call.scale == "row" else 1,))
        args["scale_b"] = _patterns(rng, "fp32", (c if p.call.scale == "row" else 1,))
    want = L.run(p, A, B, **args)
    got = L.run(p, cp.asarray(A), cp.asarray(B), **{k: cp.asarray(v) for k, v in args.items()})
    assert isinstance(got, cp.ndarray) and got.dtype == want.dtype
    assert np.array_equal(cp.asnumpy(got), want)
