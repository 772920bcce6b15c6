"""The vectorised simulator against the independent scalar model (benchmarks/scalar_model.py).

The scalar model is a plain-Python, one-dot-product-at-a-time implementation of
the block-FMA model written from the ModelParams docstring and seed 000 sec. 3.1,
sharing no code with tcsmt.arith.semantics / tcsmt.arith.formats; the two must agree bit for
bit on every path of every model file, on random inputs drawn to reach
cancellation, subnormals, overflow, infinities and NaN.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import scalar_model

from tcsmt import resolve
from tcsmt.arith.formats import get_format
from tcsmt.arith.registry import all_paths
from tcsmt.sim.simulator import simulate_params


def _random_patterns(rng, fmt_name: str, shape, mode: str) -> np.ndarray:
    f = get_format(fmt_name)
    width = f.storage_bits - f.pad_bits
    if mode == "any":  # every pattern, specials included
        x = rng.integers(0, 1 << min(width, 62), size=shape, dtype=np.int64).astype(np.uint64)
        if width == 64:
            x |= rng.integers(0, 4, size=shape).astype(np.uint64) << np.uint64(62)
    else:  # "near": exponents close together (cancellation, carries), some zeros and subnormals
        top = (1 << f.exp_bits) - 1
        centre = f.bias if mode == "near" else 1
        e = np.clip(rng.integers(centre - 4, centre + 4, size=shape), 0, top - 1)
        fr = rng.integers(0, 1 << f.frac_bits, size=shape)
        fr = np.where(rng.random(shape) < 0.3, fr & ~((1 << max(f.frac_bits - 2, 0)) - 1), fr)  # short significands
        s = rng.integers(0, 2, size=shape)
        x = ((s.astype(np.uint64) << np.uint64(f.exp_bits + f.frac_bits)) | (e.astype(np.uint64) << np.uint64(f.frac_bits))
             | fr.astype(np.uint64))
        x = np.where(rng.random(shape) < 0.05, np.uint64(0), x)
        if f.specials == "fn":  # S.1111.111 is NaN in e4m3: keep "near" inputs finite
            x = np.where((x & np.uint64(0x7F)) == np.uint64(0x7F), x & np.uint64(0xFE), x)
    return (x << np.uint64(f.pad_bits)).astype(f.dtype)


# block-scaled paths: the scalar model has no scales; their simulator results are cross-checked
# against MMA-Sim's published reading in tests/test_block_scale.py
PATHS = [pytest.param(p.params, id=p.params.name) for _, p in all_paths() if not p.params.scale_fmt]
EXTRA = [  # hypotheses and overrides that exercise other parameter values
    "volta:carry2", "volta:rne_inside", "turing:like_volta", "ampere:carry4", "cdna2:pairwise", "cdna1:fttn3",
    "hopper:carry_bits=3,overflow=saturate", "ampere:align=floor", "ampere:product_exponent=normalized",
    "hopper:block_round=ru", "hopper:block_round=rd", "volta:align_floor=-5", "ada:subnormal_in=false,subnormal_out=false",
    "blackwell:paper25", "ampere:zero_exp126", "volta:zero_positive", "turing:blocks4", "hopper:zero_exponent=-126",
    "ampere:zero_exponent=-100,zero_sign=plus", "cdna3:c_drop=3,late_align=trunc", "cdna3:product_groups=2,sum_frac_bits=26",
    "cdna3:zeros_left_out,late_align=rne",
]


def _extra_params():
    out = []
    for spec in EXTRA:
        base = spec.split(":")[0]
        in_fmt = "e4m3" if spec.endswith("paper25") else "fp16"
        out.append(pytest.param(resolve(spec, in_fmt, "fp32"), id=spec))
    return out


def _check(p, n, mode, seed):
    rng = np.random.default_rng(seed)
    K = 2 * (p.instr_k or 8) + (p.block_k or 1) // 2 + 1  # two instructions and a ragged tail
    a = _random_patterns(rng, p.in_fmt, (n, K), mode)
    b = _random_patterns(rng, p.b_format, (n, K), mode)
    c = _random_patterns(rng, p.c_fmt, (n,), mode)
    d = simulate_params(p, a, b, c)
    ref = np.array(scalar_model.dot_rows(p, a, b, c), dtype=d.dtype)
    bad = np.nonzero(d != ref)[0]
    assert len(bad) == 0, f"{p.name}: {len(bad)} of {n} differ; first row {bad[0]}: a={a[bad[0]].tolist()} " \
                          f"b={b[bad[0]].tolist()} c={int(c[bad[0]])} sim=0x{int(d[bad[0]]):x} scalar=0x{int(ref[bad[0]]):x}"


@pytest.mark.parametrize("p", PATHS + _extra_params())
@pytest.mark.parametrize("mode", ["near", "low", "any"])
def test_simulator_equals_scalar_model(p, mode):
    if p.in_fmt not in scalar_model.FORMATS:
        pytest.skip(f"the scalar model has no {p.in_fmt} format (formats are checked in tests/test_formats_narrow.py)")
    _check(p, 150, mode, zlib.crc32(f"{p.name}/{mode}".encode()))
