"""tcsmt verify --compare, equal results of one chain of piece products on two paths (chain_equal.path_equal):
markidis on fp16 against tf32x3 on tf32, and the semantics helpers it reads (redecoded, block_exponent)."""
from __future__ import annotations

import dataclasses

import numpy as np

from tcsmt import verify as V
from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import get_format
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.verify.chain_equal import path_equal
from tcsmt.verify.compare import EQUAL
from tcsmt.verify.evaluate import params_for, random_inputs, simulate_scheme

NB = NumpyBackend()
FP16, TF32 = get_format("fp16"), get_format("tf32")


def test_redecoded_is_the_tf32_decoding_of_every_finite_fp16_value():
    pats = np.arange(1 << 16, dtype=np.int64)
    d16 = sem.decode(NB, FP16, pats)
    finite = ~(np.asarray(d16.nan).astype(bool) | np.asarray(d16.inf).astype(bool))
    d32 = sem.decode(NB, TF32, sem.convert(NB, pats, FP16, TF32, "rne"))
    r = sem.redecoded(NB, d16, TF32)
    for field in ("sig", "e", "neg"):
        got, want = np.asarray(getattr(r, field))[finite], np.asarray(getattr(d32, field))[finite]
        assert np.array_equal(got.astype(np.int64), want.astype(np.int64)), field


def _paths(arch: str):
    return params_for("markidis", arch), params_for("tf32x3", arch)


def test_markidis_and_tf32x3_proven_equal_on_one_to_two():
    # Hopper: one alignment per block; CDNA3: products, then their sum and C (two grids per block)
    dom = V.parse_range("1..2")
    for arch in ("hopper", "cdna3"):
        log: list = []
        ok, asked = path_equal(("markidis", "tf32x3"), _paths(arch), 2, dom, "auto", 10, log)
        assert ok and asked == len(log) == 7 and all(line.status == "unsat" for line in log), arch
        kinds = [line.statement.split(":")[0] for line in log]
        assert kinds == ["same-decoding lemma"] * 2 + ["grid lemma"] * 2 + ["exponent lemma"] * 3
        # what the proof claims, on rows: the same fp32 pattern from both schemes
        a, b = random_inputs(np.random.default_rng(3), 20000, 2, dom, "loguniform")
        p1, p2 = _paths(arch)
        assert np.array_equal(simulate_scheme("markidis", p1, a, b), simulate_scheme("tf32x3", p2, a, b))


def test_path_equal_refuses_where_the_pieces_differ():
    # on 2^-14..2^14 a tf32 residual keeps bits the fp16 one rounds away: the same-decoding lemma is refuted
    log: list = []
    ok, _ = path_equal(("markidis", "tf32x3"), _paths("hopper"), 2, V.parse_range("2^-14..2^14"), "auto", 10, log)
    assert not ok and log[-1].status == "sat" and log[-1].statement.startswith("same-decoding")


def test_exponent_lemma_refuted_where_a_grid_loses_bits():
    # with no extra bits on the tf32 path (F = 23 against the fp16 path's 25) the grids 2^(E - F) differ for every
    # E, and for the heads' E (0 or 1) neither reaches 2^-33: the exponent lemma must not be proven
    p1, p2 = _paths("hopper")
    log: list = []
    ok, _ = path_equal(("markidis", "tf32x3"), (p1, dataclasses.replace(p2, extra_bits=0)), 2,
                       V.parse_range("1..2"), "auto", 10, log)
    assert not ok and log[-1].statement.startswith("exponent lemma") and log[-1].status == "sat"


def test_block_grids_of_an_after_sum_block():
    # CDNA3 (after_sum, F = 24, sum_frac_bits 31): products at E_p - 24, then their sum and C at M - 24; products
    # 1.5 * 1 and 2^-14 * 1 with C = 2^3: E_p = 0 (raw exponent sum), M = 3
    p = params_for("markidis", "cdna3")
    one, big, tiny = 0x3C00, 0x3E00, 0x0400  # fp16 1, 1.5, 2^-14
    prods = sem.block_products(NB, p, [np.array([big]), np.array([tiny])], [np.array([one]), np.array([one])])
    pterms, c_term, _ = sem.block_addends(NB, p, prods, np.array([0x41000000]), get_format("fp32"))
    grids = [int(np.asarray(g)[0]) for g in sem.block_grids(NB, p, pterms, c_term)]
    assert grids == [0 - 24, 3 - 24]
    assert sem.block_grids(NB, params_for("markidis", "hopper"), pterms, c_term) is not None


def test_compare_answers_the_one_to_two_cells_by_the_composed_proof():
    # either order of the two schemes: the fp16 pieces are redecoded in tf32
    for pair in (("markidis", "tf32x3"), ("tf32x3", "markidis")):
        EQUAL.clear()  # each order proves it afresh
        r = V.compare(*pair, "ampere", 2, V.parse_range("1..2"), timeout=10)
        assert r.status == "impossible" and "exponent lemmas" in r.how, pair
