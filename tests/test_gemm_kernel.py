"""The compiled GEMM kernel (tcsmt.kernels.cpu) against the numpy simulator, bit for bit.

The kernel is a second implementation of tcsmt.arith.semantics for speed; these tests
are what ties it to the one definition: every output of every supported
library path of models/hopper.toml (the paths whose parameters the H100 cuBLAS
runs in evidence/h100_library_cublas.json, h100_library_tf32.json and
h100_library_fp8.json fit) is compared with
tcsmt.sim.simulator.simulate_params(params, A_rows, B_cols.T, +0), on inputs of many
kinds and shapes whose K is not a multiple of block_k or of 128.
"""
from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import pytest

pytest.importorskip("numba")

from tcsmt.arith.formats import get_format
from tcsmt.arith.registry import find_arch, resolve
from tcsmt.errors import TcsmtError
from tcsmt.kernels.cpu import check_supported, gemm
from tcsmt.sim.simulator import simulate_params

LIBRARY_PATHS = [p.params for p in find_arch("hopper").every_path()  # e4m3 x e5m2 (b_fmt) too
                 if p.library and p.params.extra_bits != "exact"]  # simt_ffma's exact FMA window is not compiled
DISTS = ("wide", "narrow", "tiny", "subout", "cancel", "overflow", "special", "zeros")


def make_bits(fmt_name: str, dist: str, shape: tuple[int, int], rng: np.random.Generator,
              out_emin: int = -126) -> np.ndarray:
    """Bit patterns of ``fmt_name`` drawn from one input distribution (fields drawn directly).

    "subout" puts products near 2^out_emin, so sums land in the output's subnormal range."""
    f = get_format(fmt_name)
    n = int(np.prod(shape))
    top = (1 << f.exp_bits) - 1  # all-ones exponent field
    max_field = top - 1 if f.specials == "ieee" else top
    sign = rng.integers(0, 2, n)
    frac = rng.integers(0, 1 << f.frac_bits, n)
    if dist == "wide":
        expf = rng.integers(1, max_field + 1, n)
    elif dist == "narrow":
        expf = rng.integers(f.bias - 2, f.bias + 3, n)
    elif dist == "tiny":  # subnormals and the smallest normals
        expf = rng.integers(0, min(4, max_field) + 1, n)
    elif dist == "subout":
        centre = f.bias + out_emin // 2
        expf = np.clip(rng.integers(centre - 6, centre + 2, n), 0, max_field)
    elif dist == "cancel":  # pairs of near-equal magnitudes of both signs at a few exponents
        expf = rng.integers(f.bias, f.bias + 3, n)
        frac = (frac & ~np.int64(3)) | rng.integers(0, 2, n)
    elif dist == "overflow":
        expf = rng.integers(max_field - 2, max_field + 1, n)
    elif dist == "special":  # a sprinkling of inf / NaN among ordinary values, zeros too
        expf = rng.integers(f.bias - 4, f.bias + 5, n)
        pick = rng.random(n)
        if f.specials == "ieee":
            expf = np.where(pick < 0.01, top, expf)
            frac = np.where(pick < 0.005, 0, frac)  # inf
        else:
            expf = np.where(pick < 0.01, top, expf)
            frac = np.where(pick < 0.01, (1 << f.frac_bits) - 1, frac)  # the one NaN pattern
        expf = np.where((pick > 0.5) & (pick < 0.55), 0, expf)
        frac = np.where((pick > 0.5) & (pick < 0.53), 0, frac)
    elif dist == "zeros":  # mostly signed zeros, a few ordinary values
        expf = np.where(rng.random(n) < 0.9, 0, rng.integers(1, max_field + 1, n))
        frac = np.where(expf == 0, 0, frac)
    else:
        raise ValueError(dist)
    if f.specials == "fn":  # the all-ones pattern of e4m3 is NaN: keep it out unless asked for
        bad = (expf == top) & (frac == (1 << f.frac_bits) - 1) & (dist != "special")
        frac = np.where(bad, frac - 1, frac)
    word = ((sign << (f.exp_bits + f.frac_bits)) | (expf << f.frac_bits) | frac) << f.pad_bits
    return word.astype(f.dtype).reshape(shape)


def reference(p, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """simulate_params on every (row, column) pair: the numpy semantics."""
    r, K = A.shape
    c = B.shape[1]
    rows = np.repeat(A, c, axis=0)
    cols = np.tile(B.T, (r, 1))
    zeros = np.zeros(r * c, dtype=get_format(p.c_fmt).dtype)
    return simulate_params(p, rows, cols, zeros).reshape(r, c)


def _id(p):
    return f"{p.in_fmt}.{p.out_fmt}.{p.instr}"


@pytest.mark.parametrize("p", LIBRARY_PATHS, ids=_id)
@pytest.mark.parametrize("dist", DISTS)
def test_library_paths_match_simulator(p, dist):
    rng = np.random.default_rng(zlib.crc32(f"{_id(p)}/{dist}".encode()))
    r, c = int(rng.integers(3, 9)), int(rng.integers(3, 9))
    K = int(rng.choice([1, 5, 17, 33, 130, 300]))
    emin = get_format(p.out_fmt).emin
    A = make_bits(p.in_fmt, dist, (r, K), rng, emin)
    B = make_bits(p.b_format, dist, (K, c), rng, emin)
    got = gemm(p, A, B)
    want = reference(p, A, B)
    assert got.dtype == want.dtype
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{len(bad)} of {got.size} differ; first {bad[0]}: 0x{int(got[tuple(bad[0])]):x} != 0x{int(want[tuple(bad[0])]):x}"


@pytest.mark.parametrize("p", LIBRARY_PATHS, ids=_id)
def test_mixed_shape_and_threads(p):
    """A 17 x 300 x 23 product of mixed distributions, on one thread and on all."""
    rng = np.random.default_rng(17)
    A = np.concatenate([make_bits(p.in_fmt, d, (17, 60), rng) for d in ("wide", "tiny", "cancel", "narrow", "special")], 1)
    B = np.concatenate([make_bits(p.b_format, d, (60, 23), rng) for d in ("narrow", "tiny", "cancel", "wide", "zeros")], 0)
    want = reference(p, A, B)
    assert np.array_equal(gemm(p, A, B, threads=1), want)
    assert np.array_equal(gemm(p, A, B), want)


@pytest.mark.parametrize("instr_k", [128, 64])
@pytest.mark.parametrize("order", ["big_first", "tiny_first"])
def test_promotion_across_exponent_spreads(instr_k, order):
    """scaled_mm promotion (one RNE fp32 addition per instruction) where the held sum
    and the instruction's result are 2^40 and more apart, and in the other order."""
    p = resolve("hopper", "e4m3", "fp32", "scaled_mm").with_overrides({"instr_k": instr_k})
    rng = np.random.default_rng(instr_k)
    big = make_bits("e4m3", "overflow", (6, 2 * instr_k), rng)
    tiny = make_bits("e4m3", "tiny", (6, 2 * instr_k + 7), rng) & np.uint8(0x87)  # subnormals only
    A = np.concatenate([big, tiny] if order == "big_first" else [tiny, big], 1)
    B = np.concatenate([make_bits("e4m3", "overflow", (A.shape[1], 4), rng) & np.uint8(0x7f),
                        make_bits("e4m3", "tiny", (A.shape[1], 3), rng) & np.uint8(0x87)], 1)
    assert np.array_equal(gemm(p, A, B), reference(p, A, B))


# Variants of the library paths that the kernel also compiles (other roundings,
# flushes, floors, overflow and zero-sign rules): each must still match the simulator.
VARIANTS = [
    ("hopper", "bf16", "fp32", "cublas", {"block_round": "rne"}),
    ("hopper", "bf16", "fp32", "cublas", {"block_round": "ru", "align": "floor"}),
    ("hopper", "bf16", "fp32", "cublas", {"block_round": "rd", "zero_sign": "positive"}),
    ("hopper", "bf16", "fp32", "cublas", {"block_round": "rd", "zero_sign": "plus"}),  # RD cancellations: +0
    ("hopper", "bf16", "fp32", "cublas", {"block_round": "rd", "zero_sign": "ieee"}),  # RD cancellations: -0
    ("hopper", "bf16", "fp32", "cublas", {"subnormal_in": False, "subnormal_c": False, "subnormal_out": False}),
    ("hopper", "bf16", "fp32", "cublas", {"align_floor": "none", "overflow_result": "inf"}),
    ("hopper", "fp16", "fp32", "cublas", {"block_k": 0}),
    ("hopper", "fp16", "fp32", "cublas", {"subnormal_in": False}),  # fp16 subnormal products are visible in fp32
    ("hopper", "fp16", "fp16", "cublas", {"out_round": "rz"}),
    ("hopper", "e4m3", "fp32", "scaled_mm", {"c_round": "rz", "instr_k": 64}),
    ("hopper", "e5m2", "fp32", "wgmma", {"instr_k": 0}),
    ("hopper", "e5m2", "fp32", "wgmma_xe4m3", {"instr_k": 0}),  # A e5m2, B e4m3 (b_fmt)
    ("hopper", "bf16", "fp32", "wgmma", {}),  # instr_k = 16: instructions chained through fp32
    ("hopper", "tf32", "fp32", "mma", {"block_k": 4}),
]


@pytest.mark.parametrize("arch,fin,fout,instr,over", VARIANTS)
@pytest.mark.parametrize("dist", ("wide", "tiny", "subout", "cancel", "overflow", "special"))
def test_variants_match_simulator(arch, fin, fout, instr, over, dist):
    p = resolve(arch, fin, fout, instr).with_overrides(over)
    rng = np.random.default_rng(len(dist) * 1000 + len(str(over)))
    emin = get_format(p.out_fmt).emin
    A = make_bits(p.in_fmt, dist, (4, 75), rng, emin)
    B = make_bits(p.b_format, dist, (75, 5), rng, emin)
    assert np.array_equal(gemm(p, A, B), reference(p, A, B))


HYPOTHESES = [(p.params, h, over) for p in find_arch("hopper").every_path() if p.library
              for h, over in p.hypotheses.items()]


@pytest.mark.parametrize("base,name,over", HYPOTHESES, ids=[f"{_id(b)}:{h}" for b, h, _ in HYPOTHESES])
def test_library_hypotheses_match_or_raise(base, name, over):
    """Every named hypothesis of a library path (models/hopper.toml) either runs bit-exact or raises."""
    p = base.with_overrides(over)
    rng = np.random.default_rng(zlib.crc32(f"{_id(p)}:{name}".encode()))
    emin = get_format(p.out_fmt).emin
    A = np.concatenate([make_bits(p.in_fmt, d, (3, 70), rng, emin) for d in ("wide", "subout", "cancel")], 1)
    B = np.concatenate([make_bits(p.b_format, d, (70, 4), rng, emin) for d in ("cancel", "wide", "subout")], 0)
    try:
        check_supported(p)
    except TcsmtError:
        with pytest.raises(TcsmtError):
            gemm(p, A, B)
        return
    assert np.array_equal(gemm(p, A, B), reference(p, A, B))


@pytest.mark.parametrize("over,field", [
    ({"carry_bits": 2}, "carry_bits"),
    ({"extra_bits": "exact"}, "extra_bits"),
    ({"product_exponent": "normalized"}, "product_exponent"),
    ({"reduction": "pairwise"}, "reduction"),
    ({"c_mode": "after"}, "c_mode"),
    ({"align": "rne"}, "align"),
    ({"block_interleave": 2}, "block_interleave"),
    ({"zero_exponent": -126}, "zero_exponent"),
    ({"product_groups": 2}, "product_groups"),
])
def test_unsupported_params_raise(over, field):
    p = resolve("hopper", "bf16", "fp32", "cublas").with_overrides(over)
    with pytest.raises(TcsmtError, match=field):
        check_supported(p)
    with pytest.raises(TcsmtError, match=field):
        gemm(p, np.zeros((2, 16), np.uint16), np.zeros((16, 2), np.uint16))


def test_unsupported_paths_raise():
    # fp16 accumulation, operand conversion (fp8 mma.sync) and fp64 are not compiled
    with pytest.raises(TcsmtError, match="acc_fmt"):
        check_supported(resolve("hopper", "fp16", "fp16", "mma"))
    with pytest.raises(TcsmtError, match="operand_fmt"):
        check_supported(resolve("hopper", "e4m3", "fp32", "mma"))
    with pytest.raises(TcsmtError, match="in_fmt"):
        check_supported(resolve("hopper", "fp64", "fp64", "mma"))
    p = dataclasses.replace(resolve("hopper", "fp16", "fp16", "cublas"), instr_k=16)
    with pytest.raises(TcsmtError, match="out_fmt"):
        gemm(p, np.zeros((2, 32), np.uint16), np.zeros((32, 2), np.uint16))


def test_bad_shapes_raise():
    p = resolve("hopper", "bf16", "fp32", "cublas")
    with pytest.raises(TcsmtError, match="same K"):
        gemm(p, np.zeros((2, 16), np.uint16), np.zeros((15, 2), np.uint16))
    with pytest.raises(TcsmtError, match="at least 1"):
        gemm(p, np.zeros((2, 0), np.uint16), np.zeros((0, 2), np.uint16))


@pytest.mark.parametrize("mode", ["rz", "rne", "ru", "rd"])
def test_promotion_addition_matches_semantics(mode):
    """The compiled fp32 addition of c_mode "after_instr" against semantics.add_rounded,
    on fp32 pairs of every exponent distance (specials, subnormals and signed zeros included)."""
    from tcsmt.arith import semantics as sem
    from tcsmt.backends.numpy import NumpyBackend
    from tcsmt.kernels.cpu_numba import add_rounded

    fp32 = get_format("fp32")
    rng = np.random.default_rng(99)
    n = 4000
    x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    y = (x.astype(np.int64) ^ rng.integers(0, 1 << 31, n) ^ (rng.integers(0, 2, n) << 31)).astype(np.uint32)
    y[:500] = x[:500] ^ np.uint32(1 << 31)  # exact cancellations
    x[500:700] &= np.uint32(0x807FFFFF)  # subnormals and zeros
    for keep in (True, False):
        p = resolve("hopper", "e4m3", "fp32", "scaled_mm").with_overrides({"subnormal_c": keep, "c_round": mode})
        want = np.asarray(sem.add_rounded(NumpyBackend(), p, x, fp32, y, fp32, fp32, mode)).astype(np.uint32)
        got = np.array([add_rounded(np.int64(a), np.int64(b), keep, ["rz", "rne", "ru", "rd"].index(mode),
                                    True, False, False) for a, b in zip(x, y)], dtype=np.uint32)
        assert np.array_equal(got, want)


def test_without_numba_raises(monkeypatch):
    """Without the compiled module (numba missing), gemm raises TcsmtError so callers fall back."""
    import sys

    import tcsmt.kernels

    monkeypatch.setitem(sys.modules, "tcsmt.kernels.cpu_numba", None)  # makes the import fail
    monkeypatch.delattr(tcsmt.kernels, "cpu_numba", raising=False)
    p = resolve("hopper", "bf16", "fp32", "cublas")
    with pytest.raises(TcsmtError, match="numba"):
        gemm(p, np.zeros((2, 16), np.uint16), np.zeros((16, 2), np.uint16))


# ------------------------------------------------- tcsmt.simulate on the compiled kernel
# Every instruction path of every model that the kernel compiles with an fp32 C (tcsmt.kernels.simulate):
# rows with their own C, against the numpy semantics (tcsmt.sim.simulator), which stays the reference.
def _instruction_paths():
    from pathlib import Path

    from tcsmt.arith.registry import models_dir

    out = []
    for f in sorted(Path(models_dir()).glob("*.toml")):
        for path in find_arch(f.stem).every_path():
            p = path.params
            try:
                check_supported(p)
            except TcsmtError:
                continue
            if p.c_fmt == "fp32" and not p.scale_fmt and not path.library:
                out.append(pytest.param(p, id=f"{f.stem}.{_id(p)}"))
    return out


INSTRUCTION_PATHS = _instruction_paths()


def c_patterns(dist: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """fp32 C values of one distribution, with signed zeros, subnormals and (for 'special') inf and NaN."""
    c = make_bits("fp32", {"subout": "tiny", "zeros": "zeros"}.get(dist, dist), (n, 1), rng).reshape(n)
    pick = rng.random(n)
    c = np.where(pick < 0.05, np.uint32(0x80000000), c)  # -0
    return np.where((pick > 0.05) & (pick < 0.1), np.uint32(0), c).astype(np.uint32)


def test_instruction_paths_are_found():
    ids = {p.id for p in INSTRUCTION_PATHS}
    assert {"hopper.fp16.fp32.mma", "ampere.fp16.fp32.mma", "hopper.bf16.fp32.wgmma"} <= ids


@pytest.mark.parametrize("p", INSTRUCTION_PATHS)
@pytest.mark.parametrize("dist", DISTS)
def test_simulate_on_the_kernel_matches_semantics(p, dist):
    from tcsmt.kernels.simulate import compiled_pairs

    rng = np.random.default_rng(zlib.crc32(f"sim/{p.name}/{p.instr}/{dist}".encode()))
    n = 300
    K = int(rng.choice([p.instr_k or 16, 2 * (p.instr_k or 16), 3 * (p.instr_k or 16) + 1]))
    emin = get_format(p.out_fmt).emin
    a = make_bits(p.in_fmt, dist, (n, K), rng, emin)
    b = make_bits(p.b_format, dist, (n, K), rng, emin)
    c = c_patterns(dist, n, rng)
    want = simulate_params(p, a, b, c)
    got = compiled_pairs(p, a, b, c)
    assert got.dtype == want.dtype
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{bad.size} of {n} differ; first row {bad[0]}: 0x{int(got[bad[0]]):x} != 0x{int(want[bad[0]]):x}"


def test_public_simulate_uses_the_kernel_and_falls_back(monkeypatch):
    import tcsmt
    from tcsmt.kernels import simulate as fast

    calls = []
    real = fast.compiled_pairs
    monkeypatch.setattr(fast, "compiled_pairs", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(fast, "_loaded", False)
    rng = np.random.default_rng(5)
    p = resolve("hopper", "fp16", "fp32", "mma")
    small = fast.MIN_PRODUCTS // 16
    a, b = make_bits("fp16", "narrow", (small, 16), rng), make_bits("fp16", "narrow", (small, 16), rng)
    c = c_patterns("narrow", small, rng)
    assert np.array_equal(tcsmt.simulate("hopper", a, b, c, "fp16", "fp32"), simulate_params(p, a, b, c))
    assert calls == []  # before the kernel has run in this process: the numpy semantics, up to MIN_PRODUCTS_COLD
    n = fast.MIN_PRODUCTS_COLD // 16
    a, b = make_bits("fp16", "narrow", (n, 16), rng), make_bits("fp16", "narrow", (n, 16), rng)
    c = c_patterns("narrow", n, rng)
    assert np.array_equal(tcsmt.simulate("hopper", a, b, c, "fp16", "fp32"), simulate_params(p, a, b, c))
    assert calls == [1]
    tcsmt.simulate("hopper", a[:small], b[:small], c[:small], "fp16", "fp32")  # loaded: the kernel from MIN_PRODUCTS
    assert calls == [1, 1]
    tcsmt.simulate("hopper", a[:10], b[:10], c[:10], "fp16", "fp32")  # small: the numpy semantics
    assert calls == [1, 1]
    v = resolve("volta", "fp16", "fp32")  # not compiled: the numpy semantics answers
    got = tcsmt.simulate_params(v, a, b, c)
    assert np.array_equal(got, simulate_params(v, a, b, c))
    with pytest.raises(TcsmtError):  # bad input: the simulator's own error
        tcsmt.simulate("hopper", a, b[:, :3], c, "fp16", "fp32")


# ------------------------------------------------- the per-row kernel (tcsmt.kernels.cpu_rows) beyond the model files
@pytest.mark.parametrize("arch,fin,fout,instr,over", VARIANTS)
def test_variants_on_the_rows_kernel(arch, fin, fout, instr, over):
    """tcsmt.simulate's kernel (tcsmt.kernels.cpu.pairs) on the variants above (other roundings, the floor,
    flushes, zero-sign rules, promotion after each instruction, a narrower output, e4m3/e5m2 decoding): rows of
    every distribution, each with its own C where C is fp32."""
    from tcsmt.kernels.cpu import pairs

    p = resolve(arch, fin, fout, instr).with_overrides(over)
    rng = np.random.default_rng(zlib.crc32(f"rows/{p.name}/{over}".encode()))
    emin = get_format(p.out_fmt).emin
    K = 75 if p.in_fmt in ("fp16", "bf16", "tf32") else 150  # not a multiple of block_k or instr_k
    A = np.concatenate([make_bits(p.in_fmt, d, (40, K), rng, emin) for d in DISTS])
    B = np.concatenate([make_bits(p.b_format, d, (40, K), rng, emin) for d in DISTS])
    C = c_patterns("wide", A.shape[0], rng) if p.c_fmt == "fp32" else None
    want = simulate_params(p, A, B, C if C is not None else np.zeros(A.shape[0], get_format(p.c_fmt).dtype))
    got = pairs(p, A, B.T, C=C)
    bad = np.flatnonzero(got != want)
    assert got.dtype == want.dtype and bad.size == 0, f"{bad.size} differ; first row {bad[:1]}"


def _pattern(f, neg, expf, frac):
    return ((neg << (f.exp_bits + f.frac_bits)) | (expf << f.frac_bits) | frac) << f.pad_bits


def adversarial_rows(fmt_name: str, K: int, rng: np.random.Generator):
    """Rows (A, B, C) that stress each step of the chain: carries (every product the largest of the format, one
    sign, with and without a large C), exact cancellation (products in +- pairs; one product against C), the
    smallest subnormals and their products, results at the edge of fp32's range and past it, inf x 0, inf - inf,
    NaN in A, B or C, signed zeros everywhere; then the same rows with their entries shuffled across K."""
    f = get_format(fmt_name)
    top = (1 << f.exp_bits) - 1
    big = _pattern(f, 0, top - 1, (1 << f.frac_bits) - 1)  # the largest finite value
    one = _pattern(f, 0, f.bias, 0)
    tiny = _pattern(f, 0, 0, 1)  # the smallest subnormal
    inf, nan = _pattern(f, 0, top, 0), _pattern(f, 0, top, 1)
    neg = 1 << (f.exp_bits + f.frac_bits + f.pad_bits)
    fp32_max, fp32_inf, fp32_nan, fp32_tiny = 0x7F7FFFFF, 0x7F800000, 0x7FC00000, 0x00000001
    rows = []

    def row(a, b, c):
        rows.append((np.resize(np.array(a, np.int64), K), np.resize(np.array(b, np.int64), K), c))

    row([big], [big], 0)  # every product the largest: the block sum carries
    row([big], [big], fp32_max)
    row([big | neg], [big], fp32_max | 1 << 31)
    row([big, big | neg], [big], 0)  # + and - in pairs: an exact zero
    row([big, big | neg], [big], 1 << 31)
    row([one, one | neg], [tiny], 1 << 31)
    row([one] + [0] * (K - 1), [one] + [0] * (K - 1), 0xBF800000)  # 1 - 1: C cancels the one product
    row([one] + [neg] * (K - 1), [one | neg] + [0] * (K - 1), 0x3F800000)
    row([tiny], [tiny], 0)  # subnormal x subnormal: far below the window
    row([tiny], [tiny], fp32_tiny)
    row([tiny | neg], [tiny], 0)  # bf16: below fp32's subnormals, a zero from a non-zero sum
    row([tiny, one], [one], fp32_tiny | 1 << 31)
    row([big], [one], fp32_max)  # at the top of fp32 (fp16) or past it (bf16)
    row([inf] + [0] * (K - 1), [0], 0)  # inf x 0: NaN
    row([inf, inf | neg], [one], 0)  # inf - inf: NaN
    row([inf], [one], fp32_inf | 1 << 31)  # +inf + (-inf) from C
    row([one], [nan], 0)
    row([one], [one], fp32_nan)
    row([inf], [one], fp32_max)
    row([neg], [0], 1 << 31)  # signed zeros
    row([neg], [neg], 1 << 31)
    row([0], [neg], 0)
    a = np.array([r[0] for r in rows])
    b = np.array([r[1] for r in rows])
    c = np.array([r[2] for r in rows], np.int64)
    perm = np.argsort(rng.random(a.shape), axis=1)  # the same products in other orders (other blocks)
    a = np.concatenate([a, np.take_along_axis(a, perm, 1)])
    b = np.concatenate([b, np.take_along_axis(b, perm, 1)])
    return a.astype(f.dtype), b.astype(f.dtype), np.concatenate([c, c]).astype(np.uint32)


ADVERSARIAL = [(a, f, {}) for a in ("hopper", "ampere") for f in ("fp16", "bf16")] + [
    ("hopper", "bf16", {"block_round": "rne", "align": "floor"}),
    ("hopper", "fp16", {"block_round": "ru", "zero_sign": "ieee"}),
    ("ampere", "bf16", {"block_round": "rd", "zero_sign": "positive", "overflow_result": "ieee"}),
    ("hopper", "fp16", {"subnormal_in": False, "subnormal_c": False, "subnormal_out": False}),
]


@pytest.mark.parametrize("arch,fmt,over", ADVERSARIAL)
def test_adversarial_rows_on_the_rows_kernel(arch, fmt, over):
    from tcsmt.kernels.simulate import compiled_pairs

    p = resolve(arch, fmt, "fp32", "mma").with_overrides(over)
    rng = np.random.default_rng(zlib.crc32(f"adv/{arch}/{fmt}/{over}".encode()))
    for K in (16, 19, 48):
        a, b, c = adversarial_rows(fmt, K, rng)
        want = simulate_params(p, a, b, c)
        got = compiled_pairs(p, a, b, c)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (f"K = {K}: rows {bad.tolist()} differ: "
                               f"{[hex(int(x)) for x in got[bad]]} != {[hex(int(x)) for x in want[bad]]}")


def test_rows_kernel_in_slices_on_threads(monkeypatch):
    """Rows cut into slices on several threads (tcsmt.kernels.cpu.PAIR_SLICE) give the one-thread bits."""
    from tcsmt.kernels import cpu

    p = resolve("ampere", "bf16", "fp32", "mma")
    rng = np.random.default_rng(11)
    A = np.concatenate([make_bits("bf16", d, (50, 40), rng) for d in DISTS])
    B = np.concatenate([make_bits("bf16", d, (50, 40), rng) for d in DISTS])
    C = c_patterns("wide", A.shape[0], rng)
    one = cpu.pairs(p, A, B.T, C=C, threads=1)
    monkeypatch.setattr(cpu, "PAIR_SLICE", 64)
    monkeypatch.setattr(cpu, "_threads", lambda threads: 3)
    assert np.array_equal(cpu.pairs(p, A, B.T, C=C), one)
    assert np.array_equal(one, simulate_params(p, A, B, C))
