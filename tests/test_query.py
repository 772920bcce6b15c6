"""Named queries (queries/*.toml): loading, the instruction a query asks about, and the accumulator-bits query."""
from __future__ import annotations

import pytest

from tcsmt import TcsmtError
from tcsmt.solve.query import list_queries, load_query, run_feature, with_instr


def test_every_named_query_loads_and_names_a_known_path():
    for q in list_queries():
        with_instr(q, q.model, None)  # the query's own instruction exists on its own model's path
        assert len(q.hypotheses) >= 2 or q.kind == "monotonicity"


def test_query_instruction_follows_the_model():
    q = load_query("accumulator-bits")
    assert q.instr == "wgmma"
    assert with_instr(q, "hopper", None).instr == "wgmma"
    assert with_instr(q, "hopper:carry_bits=5", None).instr == "wgmma"
    # Blackwell has no wgmma: the model's own e4m3 -> fp32 path (mma) is asked instead
    assert with_instr(q, "blackwell", None).instr is None
    with pytest.raises(TcsmtError, match="blackwell has no path e4m3 -> fp32 with --instr 'wgmma'"):
        with_instr(q, "blackwell", "wgmma")


@pytest.mark.slow
def test_accumulator_bits_of_hopper_fp8_wgmma_is_13():
    """Hopper wgmma fp8 -> fp32 keeps 13 fraction bits (seed 004; Khattak & Mikaitis H100/H200 vectors):
    the query separates 13 / 23 / 25 / exact and the hopper model matches the 13-bit hypothesis."""
    res = run_feature(load_query("accumulator-bits"), None, "auto", 120.0)
    assert not res.unanswered
    assert res.agrees_with == ["hopper:extra_bits=-10,block_frac_bits=13"]


def _witness_replays(pair) -> None:
    """A found pair's input gives the two readings different outputs in the simulator (discriminate replays it)."""
    o = pair.outcome
    assert o.status == "found" and o.cases
    out = o.cases[0].outputs
    assert out[pair.left] != out[pair.right]


def test_scale_entry_query_finds_products_vs_block_sum():
    """the users' question "where does the scale enter": on tcgen05 kind::mxf8f6f4 (e4m3) two products of one
    scale block separate scales on each product (MMA-Sim, arithmetic.py lines 132-156: exponent
    e(a)+e(b)+e(sa)+e(sb)) from scales on the block's exact sum; the blackwell model is MMA-Sim's reading."""
    q = load_query("scale-entry")
    assert q.k == 2 and not q.minimize
    res = run_feature(q, None, "auto", 60.0)
    assert not res.unanswered and len(res.pairs) == 1
    _witness_replays(res.pairs[0])
    assert res.agrees_with == ["blackwell:scale_apply=products"]
    case = res.pairs[0].outcome.cases[0]
    assert len(case.sa) == len(case.sb) == 1  # the witness carries its scales


def test_fast_accum_promotion_query():
    """the users' question "is fast accumulation promotion-free": at K = 160 one input separates never promoting
    from promoting every 128 products; the H100 model of use_fast_accum=True (models/hopper.toml, scaled_mm_fast,
    evidence/h100_library_fp8.json) is the promotion-free reading, that of use_fast_accum=False the
    promoting one."""
    q = load_query("fast-accum-promotion")
    res = run_feature(q, None, "auto", 60.0)
    assert not res.unanswered and len(res.pairs) == 1
    _witness_replays(res.pairs[0])
    assert res.agrees_with == ["hopper:instr_k=0,c_mode=aligned"]
    slow = run_feature(with_instr(q, "hopper", "scaled_mm"), None, "auto", 60.0)
    assert slow.agrees_with == ["hopper:instr_k=128,c_mode=after_instr,c_round=rne"]
