"""The GPU simulator back end computes the simulator's bits (run here with NumPy as its array module).

On a machine with CuPy and a GPU the same comparison runs on the device (marked gpu).
"""
from __future__ import annotations

import numpy as np
import pytest

from tcsmt.arith.formats import get_format
from tcsmt.arith.registry import all_paths
from tcsmt.backends.cupy import simulate_on_gpu
from tcsmt.errors import TcsmtError
from tcsmt.sim.simulator import simulate_params


def _gpu_paths():
    out = []
    for arch, path in all_paths():
        p = path.params
        if p.window_frac_bits is None or p.c_mode in ("after", "after_instr", "after_sum") or p.in_fmt == "fp64" \
                or p.reduction != "chain" or p.scale_fmt:
            continue  # needs integers wider than 62 bits, or block scales: CPU only
        out.append(pytest.param(p, id=p.name))
    return out


def _random(p, n, seed=3):
    rng = np.random.default_rng(seed)
    fin, fc = get_format(p.in_fmt), get_format(p.c_fmt)
    K = 2 * (p.instr_k or p.block_k)  # two instructions, or two blocks of a library chain
    a = rng.integers(0, 1 << (fin.storage_bits - fin.pad_bits), (n, K)).astype(np.uint64) << np.uint64(fin.pad_bits)
    fb = get_format(p.b_format)
    b = rng.integers(0, 1 << (fb.storage_bits - fb.pad_bits), (n, K)).astype(np.uint64) << np.uint64(fb.pad_bits)
    c = rng.integers(0, 1 << fc.storage_bits, n).astype(np.uint64)
    return a.astype(fin.dtype), b.astype(fb.dtype), c.astype(fc.dtype)


@pytest.mark.parametrize("p", _gpu_paths())
def test_same_bits_as_simulator_with_numpy(p):
    a, b, c = _random(p, 3000)
    got = simulate_on_gpu(p, a, b, c, xp=np)
    assert (got == simulate_params(p, a, b, c)).all()


def test_wide_models_are_refused():
    from tcsmt.arith.registry import resolve

    p = resolve("exact", "fp16", "fp32")
    a, b, c = _random(resolve("hopper", "fp16", "fp32"), 4)
    with pytest.raises(TcsmtError, match="62 bits"):
        simulate_on_gpu(p, a[:, :4], b[:, :4], c, xp=np)


@pytest.mark.gpu
def test_same_bits_on_the_gpu():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:
        pytest.skip("no CUDA device")
    from tcsmt.arith.registry import resolve

    p = resolve("hopper", "fp16", "fp32")
    a, b, c = _random(p, 20000)
    assert (cupy.asnumpy(simulate_on_gpu(p, a, b, c)) == simulate_params(p, a, b, c)).all()
