"""The split-K layout probes (evidence/library_plans.md, "Layouts"): the committed files
evidence/library/{h100,h200}_layout_probes.json judge every probe again to the same verdict, and each variant's
verdict follows from its probes.

Expected values: the device runs of 2026-11-26 (cuBLAS 13.1.0 through torch 2.11.0+cu130), e.g. the wgrad call
``mm(A.t(), B)`` fp16 768x768x8961 (kernel ``..._splitK_NTN``, S = 2) splits K at 4480 where the family's rule
says 4544, and the nt cutlass inplace call 3854x1109x1600 (S = 3) at 536 (grain 8) where the rule's grain is 32.
"""
from __future__ import annotations

import json

import pytest
from conftest import REPO, evidence_json

from tools.library import layout_judge as J
from tools.library.layout_probes import k_class, layout_tag

LIB = REPO / "evidence" / "library"


@pytest.fixture(scope="module")
def families() -> dict:
    return evidence_json("h100_cublas_plans.json.gz")["families"]


def test_layout_tags_and_k_classes() -> None:
    assert layout_tag(["nvjet_sm90_tst_64x32_64x16_1x1_h_bz_splitK_NTT", "cublasLt::splitKreduce_kernel<...>"]) == "NTT"
    assert layout_tag(["cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_nt_align2>"]) == "nt"
    assert layout_tag(["gemvx"]) is None
    assert [k_class(K) for K in (1600, 1440, 1000, 8961, 8969)] == \
        ["K%64=0", "K%32=0", "K%8=0", "K%8!=0", "K%8!=0 K%64>=8"]


def test_chunk_rules_name_what_the_bits_read() -> None:
    assert J.chunk_starts(8961, 2, 64) == [0, 4544]
    assert "G=64 S=2 on K floored to a multiple of 8 (the tail in the last slice)" in J.chunk_rules(8961, [0, 4480])
    assert J.chunk_rules(1600, [0, 536, 1072]) == ["G=4 S=3", "G=8 S=3"]


@pytest.mark.parametrize(("gpu", "name", "probes", "agree"), [("h100", "NVIDIA H100 80GB HBM3", 116, 108),
                                                               ("h200", "NVIDIA H200", 192, 164)])
def test_verdicts_follow_from_the_committed_probes(families: dict, gpu: str, name: str, probes: int,
                                                   agree: int) -> None:
    doc = json.loads((LIB / f"{gpu}_layout_probes.json").read_text())
    assert (doc["gpu"], doc["driver"], doc["torch"], doc["cublas"], doc["cublaslt"]) == \
        (name, "580.159.04", "2.11.0+cu130", "13.1.0", "130100")
    assert len(doc["probes"]) == probes and sum(p["agrees"] for p in doc["probes"]) == agree
    for p in doc["probes"]:
        ok, why, _read = J.judge(p, families)
        assert (ok, why) == (p["agrees"], p["why_not"]), p["config"]
    assert len(doc["variants"]) == 20
    for v in doc["variants"]:
        mine = [p for p in doc["probes"] if p["config"] == f"{v['family']} | {v['layout']}"]
        assert (v["probes"], v["agree"]) == (len(mine), sum(p["agrees"] for p in mine))
        assert v["split_k"] == sorted({int(p["recorded"]["split_k"]) for p in mine})
        want = "not probed" if not mine else "confirmed" if v["agree"] == v["probes"] else "refuted"
        assert v["verdict"] == want


def test_findings() -> None:
    """Which variants the bits refuted, and what they read for the calls named in the module docstring."""
    docs = {g: json.loads((LIB / f"{g}_layout_probes.json").read_text()) for g in ("h100", "h200")}
    refuted = {g: sorted(f"{v['family']} {v['layout']}" for v in d["variants"] if v["verdict"] == "refuted")
               for g, d in docs.items()}
    assert "nvjet_sm90_16bit_splitK NTN" in refuted["h100"] and "nvjet_sm90_16bit_splitK TNN" not in refuted["h200"]
    assert all(f"nvjet_sm90_16bit_splitK {t}" not in refuted[g] for g in docs for t in ("NNN", "NNT", "TNN", "TNT"))
    assert all(f"nvjet_sm90_fp8_splitK {t}" not in refuted[g] for g in docs for t in ("TNN", "TNT"))
    for d in docs.values():
        by_call = {(p["M"], p["N"], p["K"], p["config"]): p for p in d["probes"]}
        p = by_call[(768, 768, 8961, "nvjet_sm90_16bit_splitK | NTN")]
        assert (p["starts"], p["read"]["rule_starts"]) == ([0, 4480], [0, 4544])
        p = by_call[(3854, 1109, 1600, "cutlass_sm80_16bit_splitK_inplace | nt")]
        assert (p["starts"], p["read"]["rule_starts"]) == ([0, 536, 1072], [0, 544, 1088])
