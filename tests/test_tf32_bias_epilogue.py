"""tf32 ``linear`` with a bias on cuBLAS's sm90 ``xmma`` ``segment_k_off`` kernels: the bias is added after the K-chain,
RN32(y + bias).  Decided by ``python -m tools.library.decide`` from 50 fresh H100 calls
(``evidence/library/h100_tf32_bias_samples.json.gz``, run by ``tools/device/catalog_sample_run.py`` on
``tools/device/tf32_bias_list.json``; ``evidence/library/tf32_bias_samples.json.gz`` is its ``catalog_samples as-more``
form, which the decisions name)."""
from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

from tcsmt.hwcheck.library_calls import make_inputs
from tcsmt.library.plans import plan_from_fields
from tcsmt.library.replay import replay_call
from tools.library.addmm_samples import c_init_outputs
from tools.library.catalog_samples import as_more, sampled_call

LIB = Path(__file__).resolve().parents[1] / "evidence" / "library"
REGEX = r"^sm90_xmma_gemm_f32f32_tf32f32_f32_\w+_segment_k_off_"


@cache
def raw() -> dict[str, Any]:
    with gzip.open(LIB / "h100_tf32_bias_samples.json.gz", "rt") as f:
        return json.load(f)


@cache
def more() -> dict[str, Any]:
    with gzip.open(LIB / "tf32_bias_samples.json.gz", "rt") as f:
        return json.load(f)


def test_the_decide_input_is_the_device_file_filtered() -> None:
    made = as_more(raw(), REGEX)
    assert made["calls"] == more()["calls"] and made["runs"] == more()["runs"]
    assert len(made["calls"]) == 50


def decided() -> dict[str, Any]:
    """The fields the shipped rules' decision for these kernels sets."""
    rules = json.loads((LIB.parents[1] / "models" / "library" / "h100_cublas13_rules.json").read_text())
    found = [d for d in rules["decisions"]["decisions"] if d["match"].get("kernel_regex") == REGEX]
    assert len(found) == 1 and "6400 of 6400" in found[0]["evidence"]
    return dict(found[0]["set"])


def test_the_decision_is_in_the_shipped_rules() -> None:
    assert decided() == {"epilogue": ["bias"]}


def _item_of(index: int) -> dict[str, Any]:
    """The device file's entry of the index-th call of the decide input (its seed names it)."""
    seed = int(more()["calls"][index]["seed"])
    return next(c for c in raw()["calls"] if int(c["seed"]) == seed)


def test_sampled_outputs_replay_under_the_decision_and_the_rival_differs() -> None:
    """Every 7th call: all its samples under the decided epilogue; the bias as the chain's initial value instead
    gives other bits on some of them (over all 50 calls: 2,602 of 6,400 agree)."""
    rival_differs = 0
    for index in range(0, 50, 7):
        call, vc = sampled_call(_item_of(index))
        inputs = make_inputs(vc, int(_item_of(index)["seed"]))
        entry = {"op": "linear", "a_dtype": "float32", "tf32": True, "bias": True, "split_k": 1, "in_round": "rne",
                 "chain": {"arch": "hopper", "in_fmt": "tf32", "out_fmt": "fp32", "instr": "cublas"},
                 "sources": ["t"], **decided()}
        plan = plan_from_fields(entry, call, "h100", "", "", "test")
        r = replay_call(vc, inputs, plan, 256)
        assert r.checked == len(vc["samples"]) and not r.mismatches and not r.run_error, vc
        got = c_init_outputs(vc, inputs, plan)
        rival_differs += sum(g != int(str(s[-1]), 16) for g, s in zip(got, vc["samples"]))
    assert rival_differs > 0
