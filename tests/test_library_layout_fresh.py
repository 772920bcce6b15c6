"""The fresh layout probes of the refined split-K slice rule (evidence/library_plans.md, "Fresh probes of the
refined rule"): the committed files evidence/library/{h100,h200}_layout_probes_fresh.json judge every probe again
to the same verdicts, every sm80 CUTLASS variant reads the refined rule (128 bytes where K fills whole chunks in
nn / tn, else 16 bytes) and not the family's, the nvjet NTN / NTT variants read neither, the fresh probes of K floored
to 2 in NTN / NTT (evidence/library/h100_layout_probes_kfloor2.json) all read that, and the catalogs' variant rules
follow.  A plan's ``k_floor`` cuts K as its docstring says.

Expected values: the device runs of 2026-11-26 (nvidia-h100-x1 and nvidia-h200, cuBLAS 13.1.0 through torch
2.11.0+cu130): e.g. the tf32 nn call 3508x3769x2888 of the 16-bit inplace family (S = 2) cuts at 1444 (grain 4),
the family rule says 1448; the NTN fp16 call 768x768x8962 (S = 2) cuts at 4544, the floor-8 rule says 4480.
"""
from __future__ import annotations

import json

import pytest
from conftest import REPO, evidence_json

from tcsmt.library.families import slice_rule_fields
from tcsmt.library.plans import Call, Plan
from tcsmt.library.rules import variant_rules
from tools.library import layout_judge as J

LIB = REPO / "evidence" / "library"


@pytest.fixture(scope="module")
def plans() -> dict:
    return evidence_json("h100_cublas_plans.json.gz")


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_fresh_verdicts(plans: dict, gpu: str) -> None:
    doc = json.loads((LIB / f"{gpu}_layout_probes_fresh.json").read_text())
    fams = plans["families"]
    assert len(doc["probes"]) == 81
    for p in doc["probes"]:
        fam, tag = p["config"].split(" | ")
        ok, _why, _read = J.judge(p, fams, J.refined_rule(fam, tag))
        assert ok == p["agrees"]
        assert J.judge(p, fams)[0] == p["agrees_family_rule"]
    verdicts = {(v["family"], v["layout"]): (v["verdict"], v["family_rule_verdict"]) for v in doc["variants"]}
    cutlass = {k: v for k, v in verdicts.items() if k[0].startswith("cutlass_sm80_")}
    assert len(cutlass) == 10 and set(cutlass.values()) == {("confirmed", "refuted")}
    assert verdicts[("nvjet_sm90_16bit_splitK", "NTN")] == verdicts[("nvjet_sm90_16bit_splitK", "NTT")] == \
        ("refuted", "refuted")
    by_call = {(p["M"], p["N"], p["K"], p["a_dtype"], p["config"]): p["starts"] for p in doc["probes"]}
    if gpu == "h100":
        assert by_call[(3508, 3769, 2888, "float32", "cutlass_sm80_16bit_splitK_inplace | nn")] == [0, 1444]
    assert by_call[(768, 768, 8962, "float16", "nvjet_sm90_16bit_splitK | NTN")] == [0, 4544]


def test_variant_rules_follow(plans: dict) -> None:
    docs = [(p.name, json.loads(p.read_text())) for p in sorted(LIB.glob("h100_layout_probes*.json"))]
    rules = variant_rules(plans, plans["families"], docs)
    assert list(rules[("cutlass_sm80_16bit_splitK_inplace", "nn")]) == ["grain_bytes=[128, 16]"]  # family rule refuted
    assert list(rules[("cutlass_sm80_16bit_splitK_inplace", "nt")]) == ["grain_bytes=[16, 16]"]
    assert list(rules[("cutlass_sm80_fp32_splitK", "nn")]) == ["family"]
    assert list(rules[("nvjet_sm90_16bit_splitK", "TNN")]) == ["family"]
    # family rule and floor 8 refuted (h100_layout_probes_fresh.json), floor 2 confirmed (h100_layout_probes_kfloor2.json)
    assert rules[("nvjet_sm90_16bit_splitK", "NTN")] == rules[("nvjet_sm90_16bit_splitK", "NTT")] == \
        {"k_floor=2": {"k_floor": 2, "grain": 64}}
    shipped = json.loads((REPO / "models" / "library" / "h100_cublas13_rules.json").read_text())["layout_rules"]
    assert {(f, t, k) for f, t, k, _r in shipped} == {(f, t, k) for (f, t), rs in rules.items() for k in rs}


def test_floor_two_probes_of_the_weight_gradient_layouts(plans: dict) -> None:
    """evidence/library/h100_layout_probes_kfloor2.json (nvidia-h100-x1, 2026-11-26): 16 fresh NTN / NTT probes at
    K % 64 = 1, where K floored to 2 and the family's rule cut differently, judged again to the same verdicts: every
    one reads K floored to 2 (768x768x9089, S = 2, cuts at 4544; the family rule at 4608), none the family rule."""
    doc = json.loads((LIB / "h100_layout_probes_kfloor2.json").read_text())
    fams = plans["families"]
    assert len(doc["probes"]) == 16
    for p in doc["probes"]:
        fam, tag = p["config"].split(" | ")
        assert tag in ("NTN", "NTT") and p["K"] % 64 == 1
        assert J.judge(p, fams, J.refined_rule(fam, tag, 2))[0] is p["agrees"] is True
        assert J.judge(p, fams)[0] is p["agrees_family_rule"] is False
    assert {(v["layout"], v["verdict"], v["family_rule_verdict"]) for v in doc["variants"]} == \
        {("NTN", "confirmed", "refuted"), ("NTT", "confirmed", "refuted")}
    by_call = {(p["M"], p["N"], p["K"], p["a_dtype"]): p["starts"] for p in doc["probes"]}
    assert by_call[(768, 768, 9089, "bfloat16")] == [0, 4544]
    assert J.rule_starts(fams["nvjet_sm90_16bit_splitK"], 9089, 2) == [0, 4608]


def test_slice_rule_fields_and_k_floor() -> None:
    nn = {"grain_bytes": [128, 16]}
    assert slice_rule_fields({}, nn, 2176, "bfloat16", "t") == {"grain": 64, "k_floor": 0}
    assert slice_rule_fields({}, nn, 544, "bfloat16", "t") == {"grain": 8, "k_floor": 0}
    assert slice_rule_fields({}, nn, 2888, "float32", "t") == {"grain": 4, "k_floor": 0}
    assert slice_rule_fields({"grain": 64}, {"k_floor": 8}, 8961, "float16", "t") == {"grain": 64, "k_floor": 8}
    call = Call("mm", 8, 8, 8961, "float16", "float16", "float16")
    p = Plan.__new__(Plan)  # slice_ranges reads only the call's K and the slice fields
    for k, v in {"call": call, "split_k": 2, "grain": 64, "k_floor": 8, "slices": "contiguous",
                 "remainder": "last"}.items():
        object.__setattr__(p, k, v)
    r = p.slice_ranges()
    assert (r[0][0], r[0][-1], r[1][0], r[1][-1]) == (0, 4479, 4480, 8960)  # the tail k 8960 in the last slice
    object.__setattr__(p, "k_floor", 0)
    assert p.slice_ranges()[1][0] == 4544
    assert J.floored_starts(8961, 2, 64, 8) == [0, 4480]
