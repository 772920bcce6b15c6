"""Named queries (queries/*.toml): loading, the instruction a query asks about, and the accumulator-bits query."""
from __future__ import annotations

import pytest

from tcsmt import TcsmtError
from tcsmt.query import list_queries, load_query, run_feature, with_instr


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
