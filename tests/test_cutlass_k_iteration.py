"""How cuBLAS's CUTLASS 2.x tf32 and WMMA kernels iterate K: residue first, K tile from the kernel name.

A slice of L k's with L mod T = m > 0 (T the threadblock tile's K in the kernel's name) runs its first m k's, then
T - m zero products, then whole tiles; the K-chain's blocks are counted over that sequence.  Decided by
``python -m tools.library.decide`` from 301 fresh H100 calls the catalogs refused because their K residue cuts a
block of the chain (``evidence/library/h100_k_iteration_samples.json.gz``: ``tools/device/catalog_sample_run.py`` on
``tools/device/h100_k_iteration_list.json``, 2,048 sampled outputs a call; ``evidence/library/k_iteration_samples.json.gz``
is its ``catalog_samples as-more`` form, which the decisions name): tf32 ``cutlass_80_tensorop_s1688gemm`` 120,832 of
120,832 outputs (blocks from the slice start: 39,793), sm80 WMMA ``s161616gemm`` 300,550 of 300,550 (295,676), sm75
fp16 WMMA 153,048 of 153,048 (152,786).
"""
from __future__ import annotations

import dataclasses
import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tcsmt.hwcheck.library_calls import make_inputs
from tcsmt.library.replay import replay_call
from tcsmt.sim.inputs import read_json
from tools.library.catalog_samples import as_more
from tools.library.decide import _call_of, at_own_scalars, plans_for

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "evidence" / "library"
REGEX = r"^cutlass::Kernel2<cutlass_(80_tensorop_s1688gemm|80_wmma_tensorop_\w*s161616gemm|75_wmma_tensorop_\w*s161616gemm)"
CLASSES = {  # the decisions' kernel patterns, the calls of each in the decide input, the outputs that agreed
    r"^cutlass::Kernel2<cutlass_80_tensorop_s1688gemm": (59, "120832 of 120832"),
    r"^cutlass::Kernel2<cutlass_80_wmma_tensorop_\w*s161616gemm": (164, "300550 of 300550"),
    r"^cutlass::Kernel2<cutlass_75_wmma_tensorop_\w*s161616gemm": (78, "153048 of 153048"),
}


@cache
def device_file() -> dict[str, Any]:
    with gzip.open(LIB / "h100_k_iteration_samples.json.gz", "rt") as f:
        return json.load(f)


@cache
def more() -> dict[str, Any]:
    with gzip.open(LIB / "k_iteration_samples.json.gz", "rt") as f:
        return json.load(f)


def test_the_decide_input_is_the_device_file_filtered() -> None:
    made = as_more(device_file(), REGEX)
    assert made["calls"] == more()["calls"] and made["runs"] == more()["runs"]
    assert len(made["calls"]) == 301 and {c["gpu"] for c in made["calls"]} == {"NVIDIA H100 80GB HBM3"}


def _shipped_decision(pattern: str) -> dict[str, Any]:
    rules = json.loads((ROOT / "models" / "library" / "h100_cublas13_rules.json").read_text())
    found = [d for d in rules["decisions"]["decisions"] if d["match"].get("kernel_regex") == pattern
             and "k_tile_regex" in d["set"] and "fresh calls whose K residue cuts a block" in d["evidence"]]
    assert len(found) == 1, pattern
    return found[0]


@pytest.mark.parametrize("pattern", sorted(CLASSES))
def test_the_decisions_are_in_the_shipped_rules(pattern: str) -> None:
    d = _shipped_decision(pattern)
    assert CLASSES[pattern][1] in d["evidence"] and "k_iteration_samples.json.gz" in d["evidence"]


@cache
def plans() -> dict:
    raw = read_json(ROOT / "evidence" / "h100_cublas_plans.json.gz")
    decisions = json.loads((ROOT / "evidence" / "h100_library_decisions.json").read_text())["decisions"]
    r0 = more()["runs"][0]
    doc = dict(more(), gpu=r0["gpu"], **{k: r0.get(k) for k in ("torch", "cuda", "cublas", "cublaslt")},
               calls=_picked())
    return plans_for(raw, doc, decisions, "k_iteration_samples.json.gz")


@cache
def _picked() -> list[dict[str, Any]]:
    """Two small calls of each class whose residue-first plan and slice-start plan differ on a sample."""
    import re
    out = []
    for pattern in sorted(CLASSES):
        calls = sorted((c for c in more()["calls"] if re.search(pattern, c["kernels"][0])),
                       key=lambda c: (c["M"] + c["N"]) * c["K"] * c.get("batch", 1))
        out += [c for c in calls if c["seed"] in PICKED_SEEDS][:2]
    return out


PICKED_SEEDS = {11580, 10786, 10139, 10743, 10068, 10289}
"""Seeds of six calls (two a class) on which blocks from the slice start give other bits than the GPU's."""


@pytest.mark.parametrize("index", range(6))
def test_residue_first_gives_every_sample_and_slice_start_blocks_do_not(index: int) -> None:
    call = _picked()[index]
    found = [p for p in plans().get(_call_of(call).key(), []) if list(p.kernels) == list(call["kernels"])]
    assert found, call["kernels"]
    plan = at_own_scalars(found[0], call)
    assert plan.k_tile in (16, 32, 64, 128) and call["K"] % plan.k_tile
    inputs = make_inputs(call, int(call["seed"]))
    r = replay_call(call, inputs, plan)
    assert r.checked == len(call["samples"]) and not r.mismatches and not r.run_error
    rival = replay_call(call, inputs, dataclasses.replace(plan, k_tile=0))
    assert rival.mismatches
