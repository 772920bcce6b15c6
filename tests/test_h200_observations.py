"""The H200 feature tests of shared/reference/h200_observations.md through the hopper model.

Each row of the table is one dot product D[0][0] of one ``mma.sync`` (the
hopper ``mma`` paths): f16->f32 and bf16->f32 (m16n8k16, K = 16), tf32->f32
(m16n8k8, K = 8), f16->f16 (K = 16), e4m3/e5m2->f32 (m16n8k32, K = 32) and
f64 (m8n8k4, K = 4).  Results are relative to U, a power of two chosen per
input format so that every product factor (and product) is a normal number.

How we read the table (the layout of the inputs is not spelled out there):

* "U - U*2^-24" etc. and "2U + 0.75 ulp(2U)": both terms are PRODUCTS (slots
  0 and 1) and C = 0.  The fp8 column forces this reading: the table says fp8
  adds C with round-to-nearest-even after the product sum, so with U (or
  -U*2^-25) in C the fp8 result of "U - U*2^-25" would be the tie 1 - 2^-25
  rounded to even = 1, not the 1 - 2^-24 the table gives.
* Rows that name C ("C = U(1+u), product U*u/2", ...) put C in C and the
  products in slots 0, 1, 2, ... (row "slots 0 and i": slot 0 and slot i).
* u is the unit of the column's OUTPUT format: 2^-23 for the fp32 columns
  (the table's u = 2^-23); for the f16->f16 column the table says "(fp16 ulp)":
  its constants are 2^-11, 2^-12, 2^-13 and ulp(2U) is the fp16 ulp; the f64
  column's results (1-2^-53; U(1+2u) for C = U(1+u) plus U*u/2) only make sense
  with the fp64 unit u = 2^-52, so the f64 column is read the same way.  In
  every column "U - U*2^-24" is therefore U - U*u/2, "U - U*2^-25" is U - U*u/4
  and "U - U*2^-26" is U - U*u/8.
* An empty cell is not tested.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tcsmt import resolve, simulate
from tcsmt.arith.formats import NAN, get_format
from tcsmt.errors import TcsmtError

# column -> (in_fmt, out_fmt, K, output unit u, U)
COLS = {
    "f16->f32": ("fp16", "fp32", 16, Fraction(1, 2**23), Fraction(1)),
    "bf16->f32": ("bf16", "fp32", 16, Fraction(1, 2**23), Fraction(1)),
    "tf32->f32": ("tf32", "fp32", 8, Fraction(1, 2**23), Fraction(1)),
    "f16->f16": ("fp16", "fp16", 16, Fraction(1, 2**10), Fraction(1)),
    "e4m3->f32": ("e4m3", "fp32", 32, Fraction(1, 2**23), Fraction(2**15)),
    "e5m2->f32": ("e5m2", "fp32", 32, Fraction(1, 2**23), Fraction(1)),
    "f64": ("fp64", "fp64", 4, Fraction(1, 2**52), Fraction(1)),
}
FP32_COLS = ["f16->f32", "bf16->f32", "tf32->f32"]
FP8_COLS = ["e4m3->f32", "e5m2->f32"]


def split(v: Fraction, fmt_name: str) -> tuple[Fraction, Fraction]:
    """Two normal numbers of fmt whose product is exactly v (v = odd * 2^e with a short odd part)."""
    fmt = get_format(fmt_name)
    sign = -1 if v < 0 else 1
    m = abs(v)
    e = 0
    while m.denominator != 1:
        m *= 2
        e -= 1
    while m.numerator % 2 == 0:
        m /= 2
        e += 1
    tiny = Fraction(2) ** fmt.emin

    def ok(x: Fraction) -> bool:
        try:
            fmt.from_fraction(x)
        except TcsmtError:
            return False
        return x >= tiny

    for e1 in sorted(range(e - 80, e + 80), key=lambda k: abs(2 * k - e)):
        a, b = m * Fraction(2) ** e1, Fraction(2) ** (e - e1)
        if ok(a) and ok(b):
            return sign * a, b
    raise AssertionError(f"cannot write {v} as a product of two normal {fmt_name} numbers")


def run(col: str, products: dict[int, Fraction], c: Fraction = Fraction(0)) -> Fraction:
    """D[0][0] of one mma.sync with the given products (slot -> value) and C; returns D / U."""
    fin, fout, K, _, U = COLS[col]
    p = resolve("hopper", fin, fout, "mma")
    a, b = [0.0] * K, [0.0] * K
    for slot, val in products.items():
        x, y = split(val * U, fin)
        a[slot], b[slot] = float(x), float(y)
    fc = get_format(p.c_fmt)
    cb = np.array([fc.from_fraction(c * U)], dtype=fc.dtype)
    d = simulate("hopper", np.array([a]), np.array([b]), cb, fin, fout, "mma")
    return get_format(fout).to_fraction(int(d[0])) / U


def u_of(col: str) -> Fraction:
    return COLS[col][3]


ALL = list(COLS)


# --------------------------------------------------------- U - U*2^-k rows
@pytest.mark.parametrize("col", ALL)
def test_u_minus_half_ulp(col):
    """Row 'U - U*2^-24': 1-2^-24 (fp32 columns, fp8), 1-2^-11 (f16->f16, fp16 ulp), 1-2^-53 (f64)."""
    u = u_of(col)
    assert run(col, {0: Fraction(1), 1: -u / 2}) == 1 - u / 2


@pytest.mark.parametrize("col", ALL)
def test_u_minus_quarter_ulp(col):
    """Row 'U - U*2^-25': 1-2^-24 (fp32 columns and fp8: 2 extra bits, truncation); 1 (f16->f16, f64)."""
    u = u_of(col)
    want = Fraction(1) if col in ("f16->f16", "f64") else 1 - u / 2
    assert run(col, {0: Fraction(1), 1: -u / 4}) == want


@pytest.mark.parametrize("col", ALL)
def test_u_minus_eighth_ulp(col):
    """Row 'U - U*2^-26': 1 in every column (the third bit below the LSB is not kept)."""
    u = u_of(col)
    assert run(col, {0: Fraction(1), 1: -u / 8}) == 1


@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("col", ALL)
def test_two_u_plus_three_quarter_ulp(col, sign):
    """Row '2U + 0.75 ulp(2U), and negated': 2U, -2U (fp32 columns, fp8: truncated output);
    2U+ulp (f16->f16 and f64: round to nearest)."""
    u = u_of(col)
    ulp = 2 * u  # ulp(2U) / U
    got = run(col, {0: sign * Fraction(2), 1: sign * Fraction(3, 4) * ulp})
    want = 2 + ulp if col in ("f16->f16", "f64") else Fraction(2)
    assert got == sign * want


# --------------------------------------------------------- rows with C
@pytest.mark.parametrize("col", FP32_COLS + FP8_COLS + ["f64"])
def test_c_one_plus_u_and_half_ulp_product(col):
    """Row 'C = U(1+u), product U*u/2': U(1+u) (fp32 columns), U(1+2u) (fp8: C added with RNE; f64)."""
    u = u_of(col)
    want = 1 + u if col in FP32_COLS else 1 + 2 * u
    assert run(col, {0: u / 2}, c=1 + u) == want


@pytest.mark.parametrize("col", FP32_COLS + FP8_COLS + ["f64"])
def test_c_one_and_three_half_ulp_products(col):
    """Row 'C = U, three products U*u/2': U(1+u) (fp32 columns), U(1+2u) (fp8), U (f64: three RNE ties)."""
    u = u_of(col)
    want = {**dict.fromkeys(FP32_COLS, 1 + u), **dict.fromkeys(FP8_COLS, 1 + 2 * u), "f64": Fraction(1)}[col]
    assert run(col, {0: u / 2, 1: u / 2, 2: u / 2}, c=Fraction(1)) == want


@pytest.mark.parametrize("col", FP32_COLS + FP8_COLS)
def test_cancellation_keeps_low_bit(col):
    """Row 'C = -(U - U*u/2), product U': 2^-24 U (fp32 columns and fp8)."""
    u = u_of(col)
    assert run(col, {0: Fraction(1)}, c=-(1 - u / 2)) == Fraction(1, 2**24)


@pytest.mark.parametrize("col", FP32_COLS + FP8_COLS + ["f64"])
def test_two_half_ulp_products_any_slot(col):
    """Row 'C = U, two products U*u/2 in slots 0 and i': U(1+u) for every i < K (one block over the
    whole instruction; fp8: every i < 32); U for f64."""
    u = u_of(col)
    K = COLS[col][2]
    want = Fraction(1) if col == "f64" else 1 + u
    for i in range(1, K):
        assert run(col, {0: u / 2, i: u / 2}, c=Fraction(1)) == want, f"slot {i}"


@pytest.mark.parametrize("col", FP32_COLS + FP8_COLS)
def test_carry_into_4u(col):
    """Row 'C = U(1+3u), products U, U, U, U*u': 4U + 2^-21 U (fp32 columns; fp8 'same')."""
    u = u_of(col)
    got = run(col, {0: Fraction(1), 1: Fraction(1), 2: Fraction(1), 3: u}, c=1 + 3 * u)
    assert got == 4 + Fraction(1, 2**21)


# --------------------------------------------------------- cuBLAS paths
@pytest.mark.parametrize("K", [32, 64, 128, 256])
def test_cublas_fp16_blocks_of_16(K):
    """h200_observations (cuBLAS): fp16 GEMMs with fp32 output for K = 32..256 behave as blocks of 16
    with the fp32 accumulator truncated between blocks (hopper wgmma fp16 path): C = 1 and two products
    2^-24 are exact (1 + 2^-23) when they share a block of 16, and both lost when they do not."""
    p = resolve("hopper", "fp16", "fp32", "wgmma")
    assert p.block_k == 16
    half = 2.0**-12  # 2^-12 * 2^-12 = 2^-24 = u/2
    a = np.zeros((K - 1, K))  # row j - 1: the products in slots 0 and j
    a[:, 0] = half
    a[np.arange(K - 1), np.arange(1, K)] = half
    d = simulate("hopper", a, a.copy(), np.ones(K - 1, dtype=np.float32), "fp16", "fp32", "wgmma")
    for j in range(1, K):
        want = 1 + 2.0**-23 if j < 16 else 1.0
        assert float(d.view(np.float32)[j - 1]) == want, f"slot {j}"


@pytest.mark.parametrize("K", [32, 64])
def test_scaled_mm_e4m3_low_bits_unused(K):
    """h200_observations (cuBLAS): torch._scaled_mm, e4m3 inputs, fp32 output, K = 32 and 64 never uses
    the low 10 fp32 fraction bits (13 fraction bits): the hopper wgmma e4m3 path with C = 0."""
    rng = np.random.default_rng(K)
    n = 2000
    f = get_format("e4m3")
    pat = rng.integers(0, 256, size=(2, n, K)).astype(np.uint8)
    nan = f.classify(pat) == NAN
    pat[nan] = 0
    d = simulate("hopper", pat[0], pat[1], np.zeros(n, dtype=np.uint32), "e4m3", "fp32", "wgmma")
    assert np.all((d & np.uint32(0x3FF)) == 0)
    assert np.any(d & np.uint32(0x7FFC00))  # and the results are not trivial
