"""tcsmt verify --compare: the simulator search, the proof that two results are equal, and what each answer claims."""
from __future__ import annotations

import numpy as np

from tcsmt import verify as V
from tcsmt.verify.compare import EQUAL, candidate_rows, search_rows, zero_pieces


def test_candidate_rows_are_fixed_and_in_the_domain():
    dom = V.parse_range("2^-36..2^-14")
    a, b = candidate_rows(3, dom)
    a2, b2 = candidate_rows(3, dom)
    assert np.array_equal(a, a2) and np.array_equal(b, b2)  # seeded: the same rows on every run
    for x in (a, b):
        mag = x.astype(np.int64) & 0x7FFFFFFF
        assert mag.min() >= dom.lo_pattern and mag.max() <= dom.hi_pattern


def test_cdna2_ootomo_worse_than_markidis_at_a_subnormal_midpoint():
    # x = 2^-25 + 2^-40 rounds up to fp16's 2^-24, which CDNA2 reads as zero (it flushes subnormal inputs);
    # Ootomo-Yokota's scaled residual 2^11 (x - 2^-24) rounds to fp16's -2^-14, so it adds -x_h y without the
    # +x_h y Markidis also drops: with y = 2^-14 its error is twice Markidis's (every value replayed exactly)
    r = V.compare("ootomo", "markidis", "cdna2", 2, V.parse_range("2^-36..2^-14"), timeout=10)
    assert r.status == "found" and r.how == "simulator search"
    assert r.witness.errors["ootomo"] > r.witness.errors["markidis"] > 0


def test_documented_cell_found_by_the_simulator_and_replayed():
    # the cell of `tcsmt verify --compare ootomo markidis --arch volta` that timed out at the default 10 s
    # per query: Ootomo-Yokota less accurate than Markidis on 2^-36..2^-14, K = 2
    r = V.compare("ootomo", "markidis", "volta", 2, V.parse_range("2^-36..2^-14"), timeout=10)
    assert r.status == "found" and r.how == "simulator search" and r.queries == 0
    w = r.witness
    assert w.errors["ootomo"] > w.errors["markidis"]  # exact rationals, recomputed by replay
    again = V.replay(["ootomo", "markidis"], V.params_for("markidis", "volta"), w.a, w.b, relative=False)
    assert again.errors == {k: w.errors[k] for k in ("ootomo", "markidis")}


def test_equal_results_proven_and_shared_by_both_directions():
    # below 2^-24 every Markidis residual fp16(x - x_h) is 0 (|x - x_h| is at most half of fp16's smallest
    # subnormal), so markidis-full's extra product R_A.R_B adds nothing: the results are equal, and neither
    # scheme can be the less accurate; the one proof serves both directions
    dom = V.parse_range("2^-30..2^-26")
    assert zero_pieces("markidis", dom, "auto", 60) == ([1], 1)
    w, same = search_rows("markidis", "markidis-full", "turing", 1, dom)
    assert w is None and same
    EQUAL.clear()
    r1 = V.compare("markidis", "markidis-full", "turing", 1, dom, timeout=60)
    r2 = V.compare("markidis-full", "markidis", "turing", 1, dom, timeout=60)
    assert r1.status == r2.status == "impossible" and "equal" in r1.how
    # two lemmas "the residual is zero on the domain" (one per scheme) and the equality query, asked once
    assert r1.queries == r2.queries == 3 and len(EQUAL) == 1
