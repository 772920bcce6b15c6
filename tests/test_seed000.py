"""Every V100 / T4 test outcome printed in Fasi, Higham, Mikaitis, Pranesh 2020 (seed 000).

Each test is one entry d11 of a 4x4x4 tensor-core product, i.e. one dot product
of K = 4 (the first row of A, the first column of B) plus c11, eq. (2) of the
paper.  "binary32 mode" is the fp16 -> fp32 path, "binary16 mode" the
fp16 -> fp16 path (C and D in fp16).  Where the paper writes (3) it sets the
first row of A to 1, so the products are the entries of the first column of B.

Expected values are the paper's; the section of each is in the test's
docstring.  A failing test here is a disagreement between the model and the
paper: report it, do not change the expected value.
"""
from __future__ import annotations

import itertools

import pytest
from conftest import V, dot1

ONES = [1, 1, 1, 1]


def volta32(a, b, c=0, arch="volta"):
    return dot1(arch, a, b, c, "fp16", "fp32")


def volta16(a, b, c=0, arch="volta"):
    return dot1(arch, a, b, c, "fp16", "fp16")


BOTH_ARCHS = ["volta", "turing"]  # sec. 3.2: all V100 conclusions hold for the T4 except the extra bit


# ---------------------------------------------------------------- 3.1.1
@pytest.mark.parametrize("arch", BOTH_ARCHS)
@pytest.mark.parametrize("out", ["fp32", "fp16"])
def test_subnormal_input_product(arch, out):
    """Sec. 3.1.1: a11 = 2^-24 (fp16 subnormal), b11 = 2^2, rest 0 -> 2^-22 in binary16 and binary32 mode."""
    assert dot1(arch, [V("2^-24"), 0, 0, 0], [4, 0, 0, 0], 0, "fp16", out) == V("2^-22")


@pytest.mark.parametrize("arch", BOTH_ARCHS)
def test_subnormal_fp32_c_kept(arch):
    """Sec. 3.1.1: c11 = 2^-149 (smallest fp32 subnormal), A = B = 0 -> d11 = 2^-149."""
    assert dot1(arch, [0, 0, 0, 0], [0, 0, 0, 0], V("2^-149"), "fp16", "fp32") == V("2^-149")


@pytest.mark.parametrize("arch", BOTH_ARCHS)
@pytest.mark.parametrize("out", ["fp32", "fp16"])
def test_subnormal_output_from_normals(arch, out):
    """Sec. 3.1.1: a11 = 2^-14, b11 = 2^-1 -> the binary16 subnormal 2^-15 in both modes."""
    assert dot1(arch, [V("2^-14"), 0, 0, 0], [V("2^-1"), 0, 0, 0], 0, "fp16", out) == V("2^-15")


@pytest.mark.parametrize("arch", BOTH_ARCHS)
def test_subnormal_output_with_c(arch):
    """Sec. 3.1.1: a11 = 2^-14, b11 = 1, c11 = -2^-15 -> the subnormal binary16 number 2^-15."""
    assert dot1(arch, [V("2^-14"), 0, 0, 0], [1, 0, 0, 0], -V("2^-15"), "fp16", "fp16") == V("2^-15")


@pytest.mark.parametrize("arch", BOTH_ARCHS)
def test_subnormal_handled_in_tensor_core(arch):
    """Sec. 3.1.1: a11 = a12 = 1, b11 = 2^-23 + 2^-24 (fp16 subnormal), b21 = 2 -> 2 (rounded down)."""
    assert volta32([1, 1, 0, 0], [V("2^-23+2^-24"), 2, 0, 0], arch=arch) == 2


# ---------------------------------------------------------------- 3.1.2
@pytest.mark.parametrize("arch", BOTH_ARCHS)
def test_products_exact(arch):
    """Sec. 3.1.2: row of A and column of B = 1-2^-11, c11 = 0 -> exact 4(1-2^-10+2^-22) in binary32."""
    x = V("1-2^-11")
    assert volta32([x] * 4, [x] * 4, arch=arch) == 4 * V("1-2^-10+2^-22")


@pytest.mark.parametrize("arch", BOTH_ARCHS)
def test_products_exact_fp16_mode(arch):
    """Sec. 3.1.2: a11 = b11 = a12 = 1-2^-11, b21 = 2^-11 -> exact 1-2^-10+2^-11 with C, D in binary16."""
    x = V("1-2^-11")
    assert volta16([x, x, 0, 0], [x, V("2^-11"), 0, 0], arch=arch) == V("1-2^-10+2^-11")


@pytest.mark.parametrize("where", range(5))
def test_four_rounding_errors_all_permutations(where):
    """Sec. 3.1.2: A row = 1; one of b11..b41, c11 set to 1, the rest 2^-24: all 5 cases return 1 (V100)."""
    vals = [V("2^-24")] * 5
    vals[where] = 1
    assert volta32(ONES, vals[:4], vals[4]) == 1


# ---------------------------------------------------------------- 3.1.3
@pytest.mark.parametrize("arch", BOTH_ARCHS)
def test_rounding_positive(arch):
    """Sec. 3.1.3: b11 = 2, b21 = 2^-23+2^-24 (0.75 ulp(2)), rest 0 -> 2 (RZ or RD)."""
    assert volta32(ONES, [2, V("2^-23+2^-24"), 0, 0], arch=arch) == 2


@pytest.mark.parametrize("arch", BOTH_ARCHS)
def test_rounding_negative(arch):
    """Sec. 3.1.3: the same with the signs of B changed -> -2 (so RZ, not RD)."""
    assert volta32(ONES, [-2, -V("2^-23+2^-24"), 0, 0], arch=arch) == -2


def test_rounding_test_refutes_rne_inside():
    """Sec. 3.1.3: RN(2 + 0.75 ulp) = 2 + 2^-22, which the V100 does not return; the IEEE-like hypothesis gives it."""
    assert volta32(ONES, [2, V("2^-23+2^-24"), 0, 0], arch="volta:rne_inside") == V("2+2^-22")


@pytest.mark.parametrize("arch", BOTH_ARCHS)
def test_fp16_output_rounding(arch):
    """Sec. 3.1.3: a11 = a12 = 2^-24, b11 = 2^-1, b21 = 2^-2, c11 = 0, binary16 mode -> 2^-24 (not RZ)."""
    assert volta16([V("2^-24"), V("2^-24"), 0, 0], [V("2^-1"), V("2^-2"), 0, 0], arch=arch) == V("2^-24")


def test_fp16_output_rounding_refutes_rz_out():
    """Sec. 3.1.3: RZ(2^-25 + 2^-26) = 0, which the V100 does not return (hypothesis volta:rz_out gives 0)."""
    assert volta16([V("2^-24"), V("2^-24"), 0, 0], [V("2^-1"), V("2^-2"), 0, 0], arch="volta:rz_out") == 0


# ---------------------------------------------------------------- 3.1.4
def test_no_guard_digit():
    """Sec. 3.1.4 (extra bits in alignment): b11 = 1, c11 = -1 + 2^-24 -> 2^-23 on the V100."""
    assert volta32(ONES, [1, 0, 0, 0], V("-1+2^-24")) == V("2^-23")


@pytest.mark.parametrize("arch", BOTH_ARCHS)
def test_no_normalisation_in_addition(arch):
    """Sec. 3.1.4 (normalisation in addition) and the monotonicity test: c11 = 1-2^-24, B column
    all 2^-24 -> only the final sum is normalised: 1 - 2^-24 + 3*2^-24 = 1 + 2^-23 (the quoted value)."""
    assert volta32(ONES, [V("2^-24")] * 4, V("1-2^-24"), arch=arch) == V("1+2^-23")


@pytest.mark.parametrize("perm", sorted(set(itertools.permutations([0, 1]))))
def test_no_normalisation_in_subtraction(perm):
    """Sec. 3.1.4 (normalisation in subtraction): c11 = -1+2^-24, two entries of B are 1 and -2^-24 -> 2^-23."""
    pair = [1, -V("2^-24")]
    b = [pair[perm[0]], pair[perm[1]], 0, 0]
    assert volta32(ONES, b, V("-1+2^-24")) == V("2^-23")


@pytest.mark.parametrize("arch", BOTH_ARCHS)
@pytest.mark.parametrize("b", sorted(set(itertools.permutations([1, 1, 1, V("2^-23")]))))
def test_two_carry_bits(arch, b):
    """Sec. 3.1.4 (extra bits for carry out): c11 = 1+2^-22+2^-23, B a permutation of 1, 1, 1, 2^-23:
    all four orderings return the exact 4 + 2^-21."""
    assert volta32(ONES, list(b), V("1+2^-22+2^-23"), arch=arch) == V("4+2^-21")


@pytest.mark.parametrize("arch", BOTH_ARCHS)
def test_third_carry_bit(arch):
    """Sec. 3.1.4: c11 = 1+2^-1+2^-2+2^-3, b = 1, 1+2^-1, 1+2^-1+2^-2, 1+2^-1+2^-2+2^-3 -> d11 = 8
    (sec. 3.2: the T4 has the {4.24} format, so also 8)."""
    b = [1, V("1+2^-1"), V("1+2^-1+2^-2"), V("1+2^-1+2^-2+2^-3")]
    assert volta32(ONES, b, V("1+2^-1+2^-2+2^-3"), arch=arch) == 8


def test_third_carry_bit_two_bit_hypothesis():
    """Sec. 3.1.4: 'If only two extra bits were present ... overflow would occur and the adder would
    incorrectly return d11 = 0' (model spec volta:carry2)."""
    b = [1, V("1+2^-1"), V("1+2^-1+2^-2"), V("1+2^-1+2^-2+2^-3")]
    assert volta32(ONES, b, V("1+2^-1+2^-2+2^-3"), arch="volta:carry2") == 0


def test_monotonicity():
    """Sec. 3.1.4 (monotonicity): B column all 2^-24; c11 = 1-2^-24 -> 1+2^-23, c11 = 1 -> 1."""
    b = [V("2^-24")] * 4
    assert volta32(ONES, b, V("1-2^-24")) == V("1+2^-23")
    assert volta32(ONES, b, 1) == 1


# ---------------------------------------------------------------- 3.2 (T4)
@pytest.mark.parametrize("b,c", [
    ([1, V("2^-24"), V("2^-24"), 0], 0),
    ([V("2^-24"), V("2^-24"), 0, 0], 1),
])
def test_t4_extra_bit_exact_sum(b, c):
    """Sec. 3.2: on the T4 '1 + 2^-24 + 2^-24 can now be performed exactly' (= 1 + 2^-23) because of the
    extra bit; the V100 (no extra bit, sec. 3.1.2) loses both 2^-24 and returns 1."""
    assert volta32(ONES, b, c, arch="turing") == V("1+2^-23")
    assert volta32(ONES, b, c, arch="volta") == 1


@pytest.mark.parametrize("where", range(5))
def test_t4_order_test_with_shifted_constant(where):
    """Sec. 3.2: on the T4 the order test of sec. 3.1.2 reproduces the V100 result (d11 = 1 in all five
    cases) once 2^-24 is replaced by 2^-25, the next bit to the right.  2^-25 is below the fp16 range, so
    the products are 2^-12 * 2^-13 (A is then not all ones); c11 = 2^-25 is an fp32 number."""
    a = [1, 1, 1, 1]
    b = [1, 1, 1, 1]
    c = V("2^-25")
    for k in range(4):
        if k != where:
            a[k], b[k] = V("2^-12"), V("2^-13")
    if where == 4:
        c = 1
    assert volta32(a, b, c, arch="turing") == 1


def test_t4_unshifted_order_test_differs():
    """Sec. 3.2: 'some of the results were different' on the T4: with the original 2^-24 constants the
    T4 keeps every 2^-24 of the 5-case test (the {3.24} format), i.e. returns 1 + 4*2^-24 = 1 + 2^-22."""
    assert volta32(ONES, [1] + [V("2^-24")] * 3, V("2^-24"), arch="turing") == V("1+2^-22")


def test_t4_like_volta_hypothesis_matches_v100():
    """Sec. 3.2 vs seed 003 ('Turing like Volta'): the like_volta hypothesis gives the V100 answer (1)
    to the 1 + 2^-24 + 2^-24 test, which the T4 computes exactly."""
    assert volta32(ONES, [1, V("2^-24"), V("2^-24"), 0], 0, arch="turing:like_volta") == 1
