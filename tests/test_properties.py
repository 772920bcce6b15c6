"""Invariants of the model family and of the references (hypothesis property tests).

The expected values are computed independently with exact rationals
(fractions.Fraction) or Python floats (float(Fraction) is correctly rounded to
binary64); the model definitions are the ModelParams docstring and the
references of tcsmt.arith.registry (exact, ieee-fma32, ieee-fma64).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import round_fraction
from hypothesis import given, settings
from hypothesis import strategies as st

from tcsmt import resolve, simulate, simulate_params
from tcsmt.arith.formats import FP16, FP32, NAN, get_format
from tcsmt.errors import TcsmtError

FIN16 = [b for b in range(1 << 16) if (b >> 10) & 0x1F != 0x1F]  # finite fp16 patterns


def fp16_values(lo_exp=-24, hi_exp=8):
    """Finite fp16 values with moderate magnitudes (sums stay far from overflow)."""
    return st.builds(lambda s, m, e: (-1) ** s * m * 2.0**e, st.integers(0, 1), st.integers(0, 2047),
                     st.integers(lo_exp, hi_exp - 10)).filter(lambda v: FP16_ok(v))


def FP16_ok(v: float) -> bool:
    try:
        FP16.from_fraction(v)
        return True
    except TcsmtError:
        return False


def fp32_values():
    return st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)


def vec(n):
    return st.lists(fp16_values(), min_size=n, max_size=n)


def frac(x) -> Fraction:
    return Fraction(float(x))


# ------------------------------------------------------------ exact model
@settings(max_examples=150, deadline=None)
@given(vec(16), vec(16), fp32_values(), st.sampled_from(["volta", "ampere", "hopper", "blackwell"]))
def test_exact_block_model_rounds_once(a, b, c, arch):
    """extra_bits=exact, block_round=rne, one block over all K: the exact a.b + c rounded once (RNE)."""
    spec = f"{arch}:extra_bits=exact,block_round=rne,block_k=16,instr_k=16,carry_bits=unbounded"
    d = simulate(spec, np.array([a]), np.array([b]), np.array([c], dtype=np.float32), "fp16", "fp32")
    exact = sum((frac(x) * frac(y) for x, y in zip(a, b)), Fraction(0)) + frac(c)
    assert FP32.to_fraction(int(d[0])) == round_fraction(exact, "fp32")


@settings(max_examples=150, deadline=None)
@given(vec(8), vec(8), fp32_values())
def test_reference_exact(a, b, c):
    d = simulate("exact", np.array([a]), np.array([b]), np.array([c], dtype=np.float32), "fp16", "fp32")
    exact = sum((frac(x) * frac(y) for x, y in zip(a, b)), Fraction(0)) + frac(c)
    assert FP32.to_fraction(int(d[0])) == round_fraction(exact, "fp32")


@settings(max_examples=150, deadline=None)
@given(vec(8), vec(8), fp32_values())
def test_reference_ieee_fma32(a, b, c):
    """ieee-fma32: d = fma(a_k, b_k, d) in fp32 (one RNE rounding each), from d = C, k = 0, 1, ..."""
    d = simulate("ieee-fma32", np.array([a]), np.array([b]), np.array([c], dtype=np.float32), "fp16", "fp32")
    acc = frac(c)
    for x, y in zip(a, b):
        acc = round_fraction(frac(x) * frac(y) + acc, "fp32")
    assert FP32.to_fraction(int(d[0])) == acc


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e30, max_value=1e30), min_size=12, max_size=12),
       st.floats(allow_nan=False, allow_infinity=False, min_value=-1e30, max_value=1e30))
def test_reference_ieee_fma64(ab, c):
    """ieee-fma64 against Python floats: float(Fraction) is the correctly rounded (RNE) fma."""
    a, b = ab[:6], ab[6:]
    d = simulate("ieee-fma64", np.array([a]), np.array([b]), np.array([c]), "fp64", "fp64")
    acc = c
    for x, y in zip(a, b):
        acc = float(Fraction(x) * Fraction(y) + Fraction(acc))
    got = float(np.array(d).view(np.float64)[0])
    assert got == acc or (got == 0 and acc == 0)
    if hasattr(math, "fma"):  # Python >= 3.13
        acc2 = c
        for x, y in zip(a, b):
            acc2 = math.fma(x, y, acc2)
        assert got == acc2


# ------------------------------------------------------------ symmetries
BLOCK_MODELS = [("volta", 4), ("turing", 4), ("ampere", 8), ("ada", 8), ("hopper", 16), ("blackwell", 16)]


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(BLOCK_MODELS), st.data())
def test_permutation_within_one_block(model, data):
    """All terms of one block are aligned to the largest exponent and summed exactly, so the order of the
    products inside one block does not matter (seed 000 sec. 3.1.4: order-independence)."""
    arch, k = model
    a = data.draw(vec(k))
    b = data.draw(vec(k))
    c = data.draw(fp32_values())
    perm = data.draw(st.permutations(range(k)))
    cc = np.array([c], dtype=np.float32)
    d1 = simulate(arch, np.array([a]), np.array([b]), cc, "fp16", "fp32")
    d2 = simulate(arch, np.array([a])[:, perm], np.array([b])[:, perm], cc, "fp16", "fp32")
    assert d1[0] == d2[0]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["volta", "turing", "ampere", "hopper", "blackwell", "cdna1", "exact", "ieee-fma32"]),
       st.sampled_from(["fp32", "fp16"]), st.data())
def test_sign_symmetry(arch, out, data):
    """Negating all of a and c negates d for models that round with rz or rne (truncation and RNE are
    symmetric in the sign); zeros compare equal, whatever their sign."""
    try:
        p = resolve(arch, "fp16", out)
    except TcsmtError:
        return
    assert p.block_round in ("rz", "rne") and p.out_round in ("rz", "rne")
    K = 8
    a = np.array([data.draw(vec(K))])
    b = np.array([data.draw(vec(K))])
    c = data.draw(fp16_values() if out == "fp16" else fp32_values())
    cdt = np.float16 if out == "fp16" else np.float32
    d1 = simulate_params(p, a, b, np.array([c], dtype=cdt))
    d2 = simulate_params(p, -a, b, np.array([-c], dtype=cdt))
    f = get_format(out)
    v1, v2 = f.to_fraction(int(d1[0])), f.to_fraction(int(d2[0]))
    assert v1 == -v2


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["volta", "ampere", "hopper", "cdna2"]), vec(8), vec(8), fp32_values())
def test_values_and_bit_patterns_agree(arch, a, b, c):
    """simulate() on float values (float64, float32, float16) equals simulate() on the same values' bit patterns
    (uint16, or any integer dtype with bits=True)."""
    fa = np.array([a])
    fb = np.array([b])
    fc = np.array([c], dtype=np.float32)
    d1 = simulate(arch, fa, fb, fc, "fp16", "fp32")
    pa, pb = fa.astype(np.float16).view(np.uint16), fb.astype(np.float16).view(np.uint16)
    d2 = simulate(arch, pa, pb, fc.view(np.uint32), "fp16", "fp32")
    d3 = simulate(arch, fa.astype(np.float32), fb.astype(np.float32), fc, "fp16", "fp32")
    d4 = simulate(arch, pa.view(np.float16), pb.view(np.float16), fc, "fp16", "fp32")
    d5 = simulate(arch, pa.astype(np.int64), pb.astype(np.int32), fc.view(np.uint32).astype(np.int64), "fp16", "fp32",
                  bits=True)
    assert d1[0] == d2[0] == d3[0] == d4[0] == d5[0]


# ------------------------------------------------------------ special values
def _one(arch, a, b, c, fin="fp16", fout="fp32"):
    # float arrays: values (integer arrays would be read as bit patterns)
    return simulate(arch, np.array([a], dtype=np.float64), np.array([b], dtype=np.float64),
                    np.array([c], dtype=np.float32 if fout == "fp32" else np.float16), fin, fout)


@pytest.mark.parametrize("arch", ["volta", "ampere", "hopper", "exact", "ieee-fma32"])
def test_nan_and_inf(arch):
    nan, inf = float("nan"), float("inf")
    assert FP32.classify(_one(arch, [nan, 1, 1, 1], [1, 1, 1, 1], 0.0))[0] == NAN
    assert FP32.classify(_one(arch, [inf, 1, 1, 1], [0, 1, 1, 1], 0.0))[0] == NAN  # inf * 0
    assert FP32.classify(_one(arch, [inf, 1, 1, 1], [1, 1, 1, 1], -inf))[0] == NAN  # inf - inf
    assert _one(arch, [inf, 1, 1, 1], [1, 1, 1, 1], 1.0)[0] == 0x7F800000
    assert _one(arch, [inf, 1, 1, 1], [-1, 1, 1, 1], 1.0)[0] == 0xFF800000
    assert _one(arch, [1, 1, 1, 1], [1, 1, 1, 1], nan)[0] == FP32.nan_pattern()


def test_zero_signs():
    """zero_sign = ieee / positive: a zero result is -0 only when every addend is a (negative) zero (IEEE 754
    sec. 6.3; ModelParams docstring); zero_sign = plus (Volta's primary reading, MMA-Sim's): always +0."""
    for spec in ("volta:zero_positive", "volta:zero_ieee"):
        assert _one(spec, [-0.0, 0, 0, 0], [1, 0, 0, 0], -0.0)[0] == 0  # +0 products among the addends
        assert _one(spec, [-0.0] * 4, [1] * 4, -0.0)[0] == 0x80000000
        assert _one(spec, [1, 0, 0, 0], [1, 0, 0, 0], -1.0)[0] == 0  # exact cancellation: +0
    assert _one("volta", [-0.0] * 4, [1] * 4, -0.0)[0] == 0
    assert _one("volta", [1, 0, 0, 0], [1, 0, 0, 0], -1.0)[0] == 0


# ------------------------------------------------------------ bad inputs
@pytest.mark.parametrize("call", [
    lambda: simulate("volta", np.array([[0.1, 0, 0, 0]]), np.zeros((1, 4)), np.zeros(1), "fp16", "fp32"),
    lambda: simulate("volta", np.zeros((1, 4)), np.zeros((1, 4)), np.array([0.1], dtype=np.float64), "fp16", "fp16"),
    lambda: simulate("volta", np.zeros((2, 4)), np.zeros((2, 3)), np.zeros(2), "fp16", "fp32"),
    lambda: simulate("volta", np.zeros((2, 4)), np.zeros((2, 4)), np.zeros(3), "fp16", "fp32"),
    lambda: simulate("volta", np.zeros((1, 0)), np.zeros((1, 0)), np.zeros(1), "fp16", "fp32"),
    lambda: simulate("nosuchgpu", np.zeros((1, 4)), np.zeros((1, 4)), np.zeros(1), "fp16", "fp32"),
    lambda: simulate("volta", np.zeros((1, 4)), np.zeros((1, 4)), np.zeros(1), "bf16", "fp32"),
    lambda: simulate("volta:nosuchhyp", np.zeros((1, 4)), np.zeros((1, 4)), np.zeros(1), "fp16", "fp32"),
    lambda: simulate("volta:carry_bits=banana", np.zeros((1, 4)), np.zeros((1, 4)), np.zeros(1), "fp16", "fp32"),
    lambda: simulate("volta:no_such_param=1", np.zeros((1, 4)), np.zeros((1, 4)), np.zeros(1), "fp16", "fp32"),
    lambda: simulate("volta:block_k=3", np.zeros((1, 4)), np.zeros((1, 4)), np.zeros(1), "fp16", "fp32"),
    lambda: simulate("volta", np.zeros((1, 4)), np.zeros((1, 4)), np.zeros(1), "fp16", "fp8"),
    lambda: simulate("hopper", np.array([[70000.0]]), np.zeros((1, 1)), np.zeros(1), "fp16", "fp32"),
    lambda: simulate("hopper", np.array([[(1 << 20) | 1]], dtype=np.uint32), np.zeros((1, 1), np.uint32), np.zeros(1, np.uint32), "tf32", "fp32"),
    lambda: simulate("hopper", np.array([["x"]]), np.zeros((1, 1)), np.zeros(1), "fp16", "fp32"),
    lambda: simulate("hopper", np.array([[-1]]), np.zeros((1, 1), np.int64), np.zeros(1), "fp16", "fp32"),
])
def test_bad_inputs_raise(call):
    with pytest.raises(TcsmtError):
        call()


def test_nan_value_inputs_are_accepted():
    """NaN is a value of every input format: it is not a representability error."""
    d = simulate("volta", np.array([[np.nan, 0, 0, 0]]), np.zeros((1, 4)), np.zeros(1), "fp16", "fp32")
    assert FP32.classify(d)[0] == NAN
