"""The inert-parameter pass (tcsmt.solve.inert) never changes an output: the simulator with and without it agrees.

Every named point of a path and every ring-1 variant of it is simulated as it is and after
:func:`tcsmt.solve.inert.canonical` on random feature-test rows (tcsmt.identify.search.random_rows), uniform
random bit patterns (specials included) and adversarial rows built for the facts the pass uses: the
largest products of one sign with the largest C (carry bits, overflow), cancellations down to the
least product (zero sign, subnormal results), the least products with a subnormal C, and products
spread across the whole exponent range (window bits, alignment floor).  Expected values: the
simulator itself (the pass must be an identity on outputs), no published source needed.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tcsmt.arith.formats import get_format
from tcsmt.arith.params import validate
from tcsmt.arith.registry import resolve
from tcsmt.arith.semantics import unread_parameters
from tcsmt.identify.search import random_rows
from tcsmt.identify.space import HypothesisSpace, PathInfo
from tcsmt.sim.simulator import simulate_params
from tcsmt.solve.inert import canonical, inert_parameters

PATHS = [
    PathInfo("e4m3", "fp32", "fp32", "mma", 32, "m16n8k32"),
    PathInfo("e5m2", "fp32", "fp32", "mma", 32, "m16n8k32"),
    PathInfo("e4m3", "fp16", "fp16", "mma", 32, "m16n8k32"),
    PathInfo("e5m2", "fp16", "fp16", "mma", 32, "m16n8k32"),
    PathInfo("fp16", "fp32", "fp32", "mma", 16, "m16n8k16"),
    PathInfo("bf16", "fp32", "fp32", "mma", 16, "m16n8k16"),
]


def _adversarial(in_fmt: str, c_fmt: str, K: int, rng: np.random.Generator):
    fin, fc = get_format(in_fmt), get_format(c_fmt)
    big = fin.pack_fields(0, fin.emax + fin.bias, (1 << fin.frac_bits) - 1 - (1 if fin.specials == "fn" else 0))
    tiny = fin.pack_fields(0, 0, 1)
    cbig = fc.pack_fields(0, fc.emax + fc.bias, (1 << fc.frac_bits) - 1)
    csub = fc.pack_fields(0, 0, 1)
    sign_in = 1 << (fin.storage_bits - 1)
    sign_c = 1 << (fc.storage_bits - 1)
    rows_a, rows_b, rows_c = [], [], []
    for n in range(1, K + 1):  # n largest products of one sign, with C 0, largest, least, negative
        a = [big] * n + [0] * (K - n)
        for c in (0, cbig, csub, cbig | sign_c, csub | sign_c):
            rows_a.append(a)
            rows_b.append(a)
            rows_c.append(c)
    for n in range(1, K + 1):  # least products, cancelling pairs, with subnormal C of either sign
        a = [tiny] * n + [0] * (K - n)
        b = [tiny if i % 2 == 0 else tiny | sign_in for i in range(K)]
        for c in (0, csub, csub | sign_c, sign_c):
            rows_a.append(a)
            rows_b.append(b)
            rows_c.append(c)
    n = 4000  # exponents spread over the whole range, fractions random, signs random
    e = rng.integers(0, (1 << fin.exp_bits) - 1, size=(2, n, K))
    fr = rng.integers(0, 1 << fin.frac_bits, size=(2, n, K))
    sg = rng.integers(0, 2, size=(2, n, K))
    ab = fin.pack_fields(sg, e, fr)
    ce = rng.integers(0, (1 << fc.exp_bits) - 1, size=n)
    cc = fc.pack_fields(rng.integers(0, 2, size=n), ce, rng.integers(0, 1 << fc.frac_bits, size=n))
    A = np.concatenate([np.array(rows_a, dtype=fin.dtype), ab[0]])
    B = np.concatenate([np.array(rows_b, dtype=fin.dtype), ab[1]])
    C = np.concatenate([np.array(rows_c, dtype=fc.dtype), cc.astype(fc.dtype)])
    return A, B, C


def _rows(path: PathInfo, seed: int):
    rng = np.random.default_rng(seed)
    fin, fc = get_format(path.in_fmt), get_format(path.c_fmt)
    parts = [random_rows(path.in_fmt, path.c_fmt, path.instr_k, 6000, rng), _adversarial(path.in_fmt, path.c_fmt,
                                                                                        path.instr_k, rng)]
    bits = rng.integers(0, 1 << 62, size=(3000, 2 * path.instr_k + 1), dtype=np.int64)  # uniform patterns
    parts.append(((bits[:, :path.instr_k] % (1 << fin.storage_bits)).astype(fin.dtype),
                  (bits[:, path.instr_k:2 * path.instr_k] % (1 << fin.storage_bits)).astype(fin.dtype),
                  (bits[:, -1] % (1 << fc.storage_bits)).astype(fc.dtype)))
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def _changed(path: PathInfo):
    """(name, params, canonical params) for every named point and ring-1 variant the pass changes."""
    space = HypothesisSpace.for_path(path, 1)
    out, seen = [], set()
    for name, p in space.points:
        cands = [(name, p)] + [(f"{name}+{','.join(d)}", q) for q, d in space._variants(p, 1)]
        for n, q in cands:
            try:
                q = validate(q)
            except Exception:
                continue
            key = q.semantic_key()
            if key in seen:
                continue
            seen.add(key)
            new = set(inert_parameters(q)) - set(unread_parameters(q))  # the range facts of the pass
            if new:
                out.append((n, q, canonical(q)))
    return out


def _check(path: PathInfo, every: int, seed: int) -> None:
    A, B, C = _rows(path, seed)
    changed = _changed(path)
    assert changed, "the pass should find inert parameters on every one of these paths"
    for name, p, c in changed[::every]:
        d1 = np.asarray(simulate_params(p, A, B, C))
        d2 = np.asarray(simulate_params(c, A, B, C))
        bad = np.nonzero(d1 != d2)[0]
        assert bad.size == 0, (f"{name}: {inert_parameters(p)} changes row {bad[0]} "
                               f"(a={A[bad[0]].tolist()}, b={B[bad[0]].tolist()}, c={int(C[bad[0]])})")


@pytest.mark.parametrize("path", [pytest.param(p, id=f"{p.label}-{p.instr}", marks=[pytest.mark.slow] if i == 0 else [])
                                  for i, p in enumerate(PATHS[:4:3])])
def test_pass_never_changes_an_output_sample(path):
    """Every 16th changed hypothesis of two fp8 paths (the CI check runs the second, 14 s on 2 cores; the first, 34 s,
    and the slow test that takes them all run with the slow tests)."""
    _check(path, 16, 5)


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS, ids=[f"{p.label}-{p.instr}" for p in PATHS])
def test_pass_never_changes_an_output(path):
    _check(path, 1, 7)


def test_hopper_fp8_mma_facts():
    """The facts the fp8 identification needs, on the Hopper model (models/hopper.toml)."""
    # e4m3 products are multiples of 2^-18 and at most 448^2: no fp32 rounding reaches zero, a
    # subnormal or an overflow, so zero_sign and overflow_result are inert (hopper = blackwell there)
    p = resolve("hopper", "e4m3", "fp32", "mma")
    assert inert_parameters(p) == {"zero_sign": "ieee", "overflow_result": "ieee"}
    # 5 carry bits: 16 products below 3.52 * 2^E and the chained C below 2 * 2^E stay below 2^(E+6)
    assert inert_parameters(dataclasses.replace(p, carry_bits=5))["carry_bits"] == "unbounded"
    assert "carry_bits" not in inert_parameters(dataclasses.replace(p, carry_bits=4))
    # e4m3 values converted to fp16 are never fp16 subnormals: subnormal_in is inert
    assert inert_parameters(dataclasses.replace(p, subnormal_in=False)).get("subnormal_in") is True
    # e5m2 subnormals are fp16 subnormals: it matters there
    q = resolve("hopper", "e5m2", "fp32", "mma")
    assert "subnormal_in" not in inert_parameters(dataclasses.replace(q, subnormal_in=False))
    # e5m2 products reach 2^-32 < 2^-24: in fp16 a non-zero sum can round to zero, zero_sign matters
    r = resolve("hopper", "e5m2", "fp16", "mma")
    assert "zero_sign" not in inert_parameters(dataclasses.replace(r, zero_sign="positive"))


def test_uniform_stage_fills_the_carry_bits():
    """hopper vs hopper with 4 carry bits on e4m3 -> fp32 mma: they differ only where one block's sum
    reaches 2^(E+5), i.e. with ten or more of its 16 products near 3.5 * 2^E; the stage with every
    product equal finds such an input (the full 32-product query took minutes before)."""
    from tcsmt.identify.separate import Separator
    from tcsmt.identify.space import Hypothesis
    from tcsmt.solve.solvers import available

    if not available("bitwuzla"):
        pytest.skip("bitwuzla not installed")
    path = PATHS[0]
    p = resolve("hopper", "e4m3", "fp32", "mma")
    h1 = Hypothesis(canonical(p), "hopper", (0,), 0)
    h2 = Hypothesis(canonical(dataclasses.replace(p, carry_bits=4)), "c4", (1,), 1)
    status, row, k, _ = Separator(path, timeout=30, readable=False).separate(h1, h2)
    assert status == "sat" and row is not None and k == 32
    A = np.array([row[0]], dtype=np.uint8)
    B = np.array([row[1]], dtype=np.uint8)
    C = np.array([row[2]], dtype=np.uint32)
    assert simulate_params(h1.params, A, B, C)[0] != simulate_params(h2.params, A, B, C)[0]


@pytest.mark.parametrize("spec,in_fmt,out_fmt,instr,inert", [
    ("ampere", "fp16", "fp32", "mma", False),     # C joins the block: a block of -0 products and C = -0
    ("hopper", "e4m3", "fp16", "wgmma", False),
    ("hopper", "e4m3", "fp32", "mma", True),       # after_instr: the blocks start from +0, +0 + -0 = +0
    ("blackwell", "e5m2", "fp32", "mma", True),
])
def test_plus_is_inert_only_without_all_negative_zero_sums(spec, in_fmt, out_fmt, instr, inert):
    """zero_sign = plus (every zero +0) differs from ieee on a sum of -0 terms only, which IEEE 754 (sec. 6.3)
    makes -0: -0 * 1 on every product and C = -0.  Where a block can sum -0 terms only the pass must keep
    plus; on the after_instr paths no stage can, and plus is inert (the simulator agrees either way)."""
    p = dataclasses.replace(resolve(spec, in_fmt, out_fmt, instr), zero_sign="plus")
    assert ("zero_sign" in inert_parameters(p)) is inert
    fin, fc = get_format(p.in_fmt), get_format(p.c_fmt)
    fb = get_format(p.b_fmt or p.in_fmt)
    A = np.full((1, p.instr_k), 1 << (fin.storage_bits - 1), dtype=fin.dtype)  # -0
    B = np.full((1, p.instr_k), fb.pack_fields(0, fb.bias, 0), dtype=fb.dtype)  # 1.0
    C = np.array([1 << (fc.storage_bits - 1)], dtype=fc.dtype)  # -0
    assert int(simulate_params(p, A, B, C)[0]) == 0
    ieee = int(simulate_params(dataclasses.replace(p, zero_sign="ieee"), A, B, C)[0])
    assert ieee == (0 if inert else 1 << (get_format(p.out_fmt).storage_bits - 1))
    assert int(simulate_params(canonical(p), A, B, C)[0]) == 0


@pytest.mark.parametrize("path", PATHS, ids=[f"{p.label}-{p.instr}" for p in PATHS])
def test_zero_exponent_inert_only_where_no_zero_reaches_a_product(path):
    """MMA-Sim's zero exponent -126 (models/hopper.toml ``zero_exp126``, arXiv 2511.10909) on the Hopper paths:
    on the fp8 mma.sync paths (fp16 operands: products at least 2^-28 in exponent, the chained accumulator
    at least its span's grid, C added after the instruction) no zero addend's exponent (at most
    -126 + 15) reaches a non-zero one's, so the pass drops it, and the simulator gives the same outputs on
    the test rows; on fp16/bf16 -> fp32 (C aligned, fp32 C down to 2^-149) it stays."""
    p = resolve("hopper:zero_exp126", path.in_fmt, path.out_fmt, path.instr)
    assert p.zero_exponent == -126
    inert = inert_parameters(p)
    assert ("zero_exponent" in inert) == (path.in_fmt in ("e4m3", "e5m2"))
    A, B, C = _rows(path, 11)
    # and zero factors beside the largest ones (the highest zero exponents) with the least products
    fin, fc = get_format(path.in_fmt), get_format(path.c_fmt)
    big = fin.pack_fields(0, fin.emax + fin.bias, (1 << fin.frac_bits) - 1 - (1 if fin.specials == "fn" else 0))
    tiny = fin.pack_fields(0, 0, 1)
    K = path.instr_k
    za = np.array([[tiny if i < n else 0 for i in range(K)] for n in range(K + 1)], dtype=fin.dtype)
    zb = np.array([[tiny if i < n else big for i in range(K)] for n in range(K + 1)], dtype=fin.dtype)
    for c in (0, fc.pack_fields(0, 0, 1), fc.pack_fields(1, 0, 1)):
        A, B = np.concatenate([A, za]), np.concatenate([B, zb])
        C = np.concatenate([C, np.full(K + 1, c, dtype=fc.dtype)])
    d1 = np.asarray(simulate_params(p, A, B, C))
    d2 = np.asarray(simulate_params(canonical(p), A, B, C))
    assert np.array_equal(d1, d2)


def test_term_fields_are_what_block_terms_reads():
    """inert caches block_terms' static facts by TERM_FIELDS: every ModelParams field that block_terms (and
    what it calls in semantics.py) reads must be in it, or two models would share a wrong entry."""
    import ast
    import inspect

    from tcsmt.arith import semantics
    from tcsmt.solve.inert import TERM_FIELDS

    tree = ast.parse(inspect.getsource(semantics))
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}

    def reads(name: str, seen: set[str]) -> set[str]:
        if name in seen or name not in funcs:
            return set()
        seen.add(name)
        out = set()
        for node in ast.walk(funcs[name]):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "p":
                out.add(node.attr)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                out |= reads(node.func.id, seen)
        return out

    got = reads("block_terms", set())
    assert got, "block_terms reads its model's parameters"
    assert got <= set(TERM_FIELDS), sorted(got - set(TERM_FIELDS))
