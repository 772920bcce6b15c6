"""Predicted plans beyond the recorded token counts (tcsmt.library.predict) and the study that chose the rule.

Expected values come from the shipped H100 catalog (models/library/h100_cublas13_catalog.sqlite, recorded with
torch 2.11 / cuBLAS 13.1 at every token count 1..16384: evidence/library/recordings/h100_layers_16bit.json.gz):
LLaMA-3-8B's down projection (linear, N = 4096, K = 14336, bf16) runs no split-K from M = 241 to 16384; BERT's
LM-head input gradient (mm, N = 768, K = 30522) changes plan at M = 15361.  The held-out figures the rule rests
on are evidence/library/prediction_study.json (tools/library/prediction_study.py).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tcsmt.errors import TcsmtError
from tcsmt.library.lookup import answer
from tcsmt.library.plans import Call
from tcsmt.library.predict import REACH, STRETCH_START, VARY
from tools.library import prediction_study as study

REPO = Path(__file__).resolve().parents[1]


def _call(op: str, M: int, N: int, K: int, **kw) -> Call:
    return Call(op, M, N, K, "bfloat16", "bfloat16", "bfloat16", **kw)


def test_beyond_the_recorded_counts_the_top_plan_is_predicted():
    top = answer(_call("linear", 16384, 4096, 14336), "h100")
    assert top.kind == "recorded catalog"
    for m in (16385, 20000, REACH * 16384):
        ans = answer(_call("linear", m, 4096, 14336), "h100")
        assert ans.kind == "predicted"
        assert ans.plan.arithmetic() == top.plan.arithmetic() and ans.plan.call.M == m
        assert "M = 241..16384" in ans.evidence[0] and "prediction_study.json" in ans.evidence[0]


@pytest.mark.parametrize(("call", "why"), [
    (_call("linear", REACH * 16384 + 1, 4096, 14336), "continuation goes up to 2 x 16384"),
    (_call("mm", 20000, 768, 30522), "holds only from M = 15361"),
    # a weight gradient beyond its recorded counts varies K, which the rule leaves alone (wrong there)
    (_call("mm", 768, 768, 20000, a_t=True), "not recorded"),
])
def test_no_prediction_outside_the_rule(call, why):
    with pytest.raises(TcsmtError, match=why):
        answer(call, "h100")


def _runs(*spans: tuple[int, int, str | None]) -> study.Recorded:
    rec = study.Recorded.__new__(study.Recorded)
    rec.families = {1: json.dumps(["mm"])}
    rec.runs = [(1, VARY, 64, 64, lo, hi, 1, a) for lo, hi, a in spans]
    return rec


def test_the_study_counts_a_continuation_that_the_recording_contradicts():
    cut, reach = study.CUT, REACH * study.CUT
    start = int(STRETCH_START * cut) + 1
    s1, s2 = json.dumps({"split_k": 1}), json.dumps({"split_k": 2})
    right = study.continuation(_runs((1, start - 1, s2), (start, reach, s1)), VARY)
    assert (right["layers_answered"], right["layers_wrong"]) == (1, 0)
    wrong = study.continuation(_runs((1, start - 1, s2), (start, cut + 10, s1), (cut + 11, reach, s2)), VARY)
    assert (wrong["layers_answered"], wrong["layers_wrong"]) == (1, 1)
    short = study.continuation(_runs((1, start, s2), (start + 1, reach, s1)), VARY)
    assert (short["layers_answered"], short["layers_wrong"]) == (0, 0)


def test_the_committed_study_backs_the_rule():
    doc = json.loads((REPO / "evidence" / "library" / "prediction_study.json").read_text())
    for s in doc["studies"]:
        applied = s["continuation"]
        assert applied["applied"] and applied["layers_wrong"] == 0 and applied["layers_answered"] > 1000
        assert s["continuation_weight_gradients"]["layers_wrong"] > 0
        assert s["tree"]["wrong"] > 0 and s["dominance"]["calls_contradicting"] > 0
