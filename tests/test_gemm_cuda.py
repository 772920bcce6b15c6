"""tcsmt.kernels.cuda: the host-side parameter checks (CPU), and the kernel against the numpy simulator (GPU only).

The GPU part skips without CuPy or a CUDA device (CI has none); the device runs of
benchmarks/gemm_cuda_device.py cover every supported path on random and special inputs.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tcsmt import TcsmtError, resolve
from tcsmt.kernels.cuda import check_supported
from tcsmt.sim.simulator import simulate_params

LIBRARY_PATHS = [("fp16", "fp32", "cublas"), ("bf16", "fp32", "cublas"), ("fp16", "fp16", "cublas"),
                 ("tf32", "fp32", "cublas"), ("e4m3", "fp32", "scaled_mm_fast"), ("e4m3", "fp32", "scaled_mm")]


@pytest.mark.parametrize("path", LIBRARY_PATHS)
def test_every_hopper_library_path_is_supported(path):
    cfg = check_supported(resolve("hopper", *path))
    p = resolve("hopper", *path)
    assert cfg.block_k == p.block_k and cfg.window_frac_bits == p.window_frac_bits
    assert cfg.after_instr == (p.c_mode == "after_instr")


@pytest.mark.parametrize("field,value", [
    ("block_round", "rne"), ("align", "rne"), ("carry_bits", 3), ("extra_bits", "exact"), ("product_exponent", "normalized"),
    ("reduction", "pairwise"), ("zero_sign", "ieee"), ("overflow_result", "ieee"), ("subnormal_in", False),
    ("subnormal_out", False), ("block_interleave", 2), ("c_mode", "after"), ("block_k", 12), ("acc_fmt", "fp16"),
])
def test_unsupported_field_values_are_refused_by_name(field, value):
    p = dataclasses.replace(resolve("hopper", "bf16", "fp32", "cublas"), **{field: value})
    with pytest.raises(TcsmtError, match=field):
        check_supported(p)


def test_int32_block_sum_bound_is_checked():
    # 32 bf16 products with F = 25 can reach 2^32: more than the kernel's int32 block sum holds
    p = dataclasses.replace(resolve("hopper", "bf16", "fp32", "cublas"), block_k=32)
    with pytest.raises(TcsmtError, match="int32"):
        check_supported(p)


def test_not_model_params():
    with pytest.raises(TcsmtError):
        check_supported("hopper")


def _gpu():
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception:
        pytest.skip("no CUDA device")
    return cp


@pytest.mark.gpu
@pytest.mark.parametrize("path", LIBRARY_PATHS)
def test_kernel_matches_simulator(path):
    _gpu()
    from tcsmt.arith.formats import get_format
    from tcsmt.kernels.cuda import gemm
    p = resolve("hopper", *path)
    fmt = get_format(p.in_fmt)
    rng = np.random.default_rng(7)
    bias = (1 << (fmt.exp_bits - 1)) - 1
    def pats(shape):
        n = int(np.prod(shape))
        expf = rng.integers(max(0, bias - 5), bias + 5, n)
        bits = (rng.integers(0, 2, n) << (fmt.exp_bits + fmt.frac_bits)) | (expf << fmt.frac_bits) | rng.integers(0, 1 << fmt.frac_bits, n)
        return (bits.astype(np.uint64) << np.uint64(fmt.pad_bits)).astype(fmt.dtype).reshape(shape)
    A, B = pats((37, 45)), pats((45, 29))
    got = gemm(p, A, B)
    want = simulate_params(p, np.repeat(A, 29, axis=0), np.tile(B.T, (37, 1)), np.zeros(37 * 29, np.uint32), bits=True)
    assert np.array_equal(got.reshape(-1).astype(np.uint64), want.astype(np.uint64))
