"""The K-chain of cuBLAS's sm75 CUTLASS 16-bit kernels on the H100, decided from whole calls.

Expected values: ``evidence/library/h100_sm75_cutlass_chain_probe.json`` (+ ``.npz``): torch.bmm calls on the H100
(cuBLAS 13.1, torch 2.11) whose only kernel was ``cutlass_75_tensorop_*s1688gemm_*`` (mma m16n8k8) or
``cutlass_75_wmma_tensorop_*s161616gemm_*``, every output of two batches kept; ``evidence/h100_library_decisions.json``
holds the decisions ``python -m tools.library.decide --probe ...`` made from them.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tcsmt.sim.inputs import read_json
from tools.library import chain_probe
from tools.library.decide import _call_of, plans_for

EVIDENCE = Path(__file__).resolve().parents[1] / "evidence"
PROBE = EVIDENCE / "library" / "h100_sm75_cutlass_chain_probe.json"


@pytest.fixture(scope="module")
def probe():
    return chain_probe.load(PROBE)


@pytest.fixture(scope="module")
def plans(probe):
    raw = read_json(EVIDENCE / "h100_cublas_plans.json.gz")
    decisions = json.loads((EVIDENCE / "h100_library_decisions.json").read_text())["decisions"]
    return plans_for(raw, probe[0], decisions, PROBE.name)


def _plan(plans, call):
    found = [p for p in plans.get(_call_of(call).key(), []) if list(p.kernels) == list(call["kernels"])]
    assert found and len({p.arithmetic() for p in found}) == 1, call["arrays"]  # calls of one key and kernels agree
    return found[0]


@pytest.mark.parametrize("tag", ["wide33f32", "normal47f32", "h_wide33f32", "b_tn_wide33f32", "b_nt_wide47f32",
                                 "b_nt_wide33f32", "probs47"])
def test_decided_plans_give_every_probed_output(probe, plans, tag):
    doc, arrays = probe
    call = next(c for c in doc["calls"] if c["arrays"] == tag)
    plan = _plan(plans, call)
    ok = chain_probe.replay(call, arrays, plan)
    assert ok.all(), f"{tag}: {int((~ok).sum())} of {ok.size} outputs differ"
    if "s1688gemm" in call["kernels"][0]:
        assert plan.chain.block_k == 8 and plan.k_tile == 32
    else:  # the WMMA kernel: blocks of 16, its name's K tile (32x32_32x1: 32 k's)
        assert plan.chain.block_k == 16 and plan.k_tile == 32


def test_the_wgmma_chain_is_refuted_on_these_kernels(probe, plans):
    """Blocks of 16 from k = 0 (the chain of the sm90 kernels, which the catalogs gave these calls before): about
    half of the fp32 outputs of a K = 33 call differ (H100, wide inputs)."""
    import dataclasses

    doc, arrays = probe
    call = next(c for c in doc["calls"] if c["arrays"] == "wide33f32")
    plan = _plan(plans, call)
    wrong = dataclasses.replace(plan, chain=dataclasses.replace(plan.chain, block_k=16), k_tile=0)
    ok = chain_probe.replay(call, arrays, wrong)
    assert 0.3 < 1 - ok.mean() < 0.7
