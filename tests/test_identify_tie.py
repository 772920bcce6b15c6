"""identify's ``tie`` stage (tcsmt.identify.separate) and the stage race (tcsmt.solve.solvers.race).

Expected values: the formats' exponent ranges (OCP 8-bit floating point spec v1.0: e4m3 normal
exponents -6..8; IEEE 754 binary16: emax 15, 10 fraction bits), models/hopper.toml's e4m3 -> fp16
mma.sync path (15 extra bits: a window of F = 25 fraction bits, blocks rounded RNE to fp16), and the
hand-worked input of docs/identify.md (products 2^15, 2^4, 2^-12 in one block).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pysmt.shortcuts import BV, And, Equals, Not, Symbol
from pysmt.typing import BVType

from tcsmt.arith.formats import get_format
from tcsmt.arith.registry import resolve
from tcsmt.identify.separate import Separator, exponent_sets, tie_ranges
from tcsmt.identify.space import Hypothesis, PathInfo
from tcsmt.sim.simulator import simulate_params
from tcsmt.solve.inert import canonical
from tcsmt.solve.solvers import available, race, solve

PATH = PathInfo("e4m3", "fp16", "fp16", "mma", 32, "m16n8k32")


def _pair(**change):
    p = resolve("hopper", "e4m3", "fp16", "mma")
    return (Hypothesis(canonical(p), "hopper", (0,), 0),
            Hypothesis(canonical(dataclasses.replace(p, **change)), str(change), (1,), 1))


def test_tie_ranges_e4m3_fp16():
    """T = 14 (fp16 emax 15 less one: 16 products of 2^14 stay finite); the tie one binade either side of
    2^(14 - 10 - 1); the tails around the window's last bit 2^(14 - 25), clipped at 2^-12 (the least
    product of normal e4m3 factors, 2^-6 * 2^-6)."""
    h1, h2 = _pair(extra_bits="exact")
    assert tie_ranges(h1, h2) == [(14, 14), (2, 4), (-12, -10), (-12, -10)]
    e4m3 = get_format("e4m3")
    assert exponent_sets(e4m3, e4m3, 14, 14) == (6, [8])
    assert exponent_sets(e4m3, e4m3, -12, -10) == (-6, [-6, -5, -4])
    h3, h4 = _pair(align="rne")
    exact = dataclasses.replace(h1.params, extra_bits="exact")
    both_exact = (Hypothesis(exact, "a", (0,), 0), Hypothesis(exact, "b", (0,), 0))
    assert tie_ranges(*both_exact) is None  # no window: nothing for the stage to tie
    assert tie_ranges(h3, h4) == tie_ranges(h1, h2)


def test_hand_found_input_separates_the_exact_window():
    """docs/identify.md: 2^15 + 2^4 + 2^-12 in one block. hopper's window (last bit 2^-10) drops 2^-12, the
    sum 2^15 + 2^4 is a tie between 2^15 and 2^15 + 2^5, RNE keeps 2^15 (0x7800); the exact sum lies above
    the tie and rounds to 2^15 + 2^5 (0x7801)."""
    e4m3 = get_format("e4m3")
    a = np.zeros((1, 32), dtype=np.uint8)
    b = np.zeros((1, 32), dtype=np.uint8)
    for slot, (ea, eb) in zip((0, 1, 4), ((8, 7), (2, 2), (-6, -6))):
        a[0, slot] = e4m3.pack_fields(0, ea + e4m3.bias, 0)
        b[0, slot] = e4m3.pack_fields(0, eb + e4m3.bias, 0)
    c = np.zeros(1, dtype=np.uint16)
    h1, h2 = _pair(extra_bits="exact")
    assert int(simulate_params(h1.params, a, b, c)[0]) == 0x7800
    assert int(simulate_params(h2.params, a, b, c)[0]) == 0x7801


@pytest.mark.parametrize("change", [{"extra_bits": "exact"}, {"align": "floor"}])
def test_tie_stage_separates_what_the_full_query_did_not(change):
    """Two of the pairs the H100 run of 2026-11-24 left unseparated at 60 s each (docs/identify.md): the tie
    stage alone finds an input, and the simulator confirms it separates them."""
    if not available("bitwuzla"):
        pytest.skip("bitwuzla not installed")
    h1, h2 = _pair(**change)
    sep = Separator(PATH, "staged", 60, readable=False)
    tie = sep._tie(h1, h2)
    assert tie is not None
    differ = Not(Equals(sep._term(h1), sep._term(h2)))
    ans = solve(sep._query("tie", differ, tie), sep._syms, "bitwuzla", 60)
    assert ans.status == "sat"
    A, B, C = (np.array([x], dtype=d) for x, d in zip(sep._row("tie", ans.model), (np.uint8, np.uint8, np.uint16)))
    assert (A != 0).sum() <= 4
    assert simulate_params(h1.params, A, B, C)[0] != simulate_params(h2.params, A, B, C)[0]


def test_race_takes_the_first_input_and_only_a_proof_jobs_unsat():
    if not available("bitwuzla"):
        pytest.skip("bitwuzla not installed")
    x = Symbol("race_x", BVType(8))
    syms = {"x": x}
    unsat = And(Equals(x, BV(3, 8)), Equals(x, BV(4, 8)))
    label, ans = race([("restricted", unsat, "bitwuzla", 5.0), ("open", Equals(x, BV(5, 8)), "bitwuzla", 5.0)],
                      syms, 10.0, proofs={"open"})
    assert (label, ans.status, ans.model["x"]) == ("open", "sat", 5)
    label, ans = race([("restricted", unsat, "bitwuzla", 5.0)], syms, 10.0, proofs=set())
    assert (label, ans.status) == (None, "timeout")  # a restriction's unsat proves nothing
    label, ans = race([("full", unsat, "bitwuzla", 5.0)], syms, 10.0, proofs={"full"})
    assert (label, ans.status) == ("full", "unsat")
