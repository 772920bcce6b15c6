"""cuBLAS's CUDA-core FFMA GEMM kernels (``cutlass_80_simt_sgemm``, sm80 ``xmma ... ffma``) under tf32 and on fp16
inputs: the catalog rule (:func:`tcsmt.library.rules.ffma_entry`) gives them the serial fp32 FFMA chain on the inputs
as they are, and the committed fresh GPU outputs of every such call (``catalog_samples`` files: seeded inputs,
sampled outputs) replay bit for bit under the plan it makes, while inputs rounded to tf32 first (what the tensor-core
tf32 chain takes) give other bits."""
from __future__ import annotations

import ast
import gzip
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tcsmt.hwcheck.library_calls import make_inputs
from tcsmt.library.plans import TORCH_DTYPES, plan_from_fields
from tcsmt.library.replay import replay_call
from tcsmt.library.rules import CUDA_CORE_FFMA, checked_entry, ffma_entry
from tools.library.catalog_samples import sampled_call

LIB = Path(__file__).resolve().parents[1] / "evidence" / "library"
SAMPLE_FILES = ("h100_catalog_samples.json.gz", "h200_catalog_samples_h100_list.json.gz", "h200_catalog_samples.json.gz")
"""The fresh-output files holding FFMA-kernel calls with tf32 on or fp16 inputs (drawn when the catalogs answered
them with the tensor-core chain; README, "Fresh outputs of answered calls")."""


@cache
def ffma_calls() -> tuple[tuple[str, dict[str, Any]], ...]:
    out = []
    for name in SAMPLE_FILES:
        with gzip.open(LIB / name, "rt") as f:
            doc = json.load(f)
        for item in doc["calls"]:
            kernels = item["kernels"] if isinstance(item["kernels"], list) else ast.literal_eval(item["kernels"])
            call, _ = sampled_call(item)
            if any(CUDA_CORE_FFMA.search(k) for k in kernels) and (call.tf32 or call.a_dtype == "float16"):
                out.append((name, dict(item, kernels=[k for k in kernels if not k.startswith("Memcpy")])))
    return tuple(out)


def converter_entry(item: dict[str, Any]) -> dict[str, Any]:
    """The fields the converter gives such a call before the rule: the tensor-core chain of its input format."""
    call, _ = sampled_call(item)
    fmt = "tf32" if call.tf32 else TORCH_DTYPES[call.a_dtype]
    return {"op": call.op, "a_dtype": call.a_dtype, "b_dtype": call.b_dtype, "out_dtype": call.out_dtype,
            "tf32": call.tf32, "split_k": 1, "epilogue": [], "sources": ["test"],
            "chain": {"arch": "hopper", "in_fmt": fmt, "out_fmt": "fp32", "instr": "cublas"}}


def tf32_rounded(bits: np.ndarray) -> np.ndarray:
    """fp32 patterns rounded to tf32 (10 fraction bits) with RNE."""
    b = bits.astype(np.uint64)
    low, lsb = b & 0x1FFF, (b >> 13) & 1
    up = (low > 0x1000) | ((low == 0x1000) & (lsb == 1))
    return ((b & ~np.uint64(0x1FFF)) + np.where(up, np.uint64(0x2000), np.uint64(0))).astype(np.uint32)


def test_the_sample_files_hold_both_kinds_on_both_gpus() -> None:
    calls = ffma_calls()
    kinds = {(name[:4], sampled_call(item)[0].a_dtype) for name, item in calls}
    assert kinds == {("h100", "float32"), ("h100", "float16"), ("h200", "float32"), ("h200", "float16")}
    assert len(calls) == 26


def test_rule_gives_the_fp32_ffma_chain_and_leaves_other_kernels() -> None:
    _, item = next(c for c in ffma_calls() if sampled_call(c[1])[0].tf32)
    entry = ffma_entry({**converter_entry(item), "in_round": "rne"}, item["kernels"])
    assert entry["chain"] == {"arch": "hopper", "in_fmt": "fp32", "out_fmt": "fp32", "instr": "simt_ffma"}
    assert "in_round" not in entry
    other = converter_entry(item)
    assert ffma_entry(other, ["nvjet_sm90_tst_64x16_64x16_4x2_h_bz_NNT"]) is other
    bf16 = {**converter_entry(item), "a_dtype": "bfloat16"}
    assert ffma_entry(bf16, item["kernels"]) is bf16  # no bf16 call sampled: left to the refusal


@pytest.mark.parametrize("index", range(26))
def test_sampled_outputs_replay_under_the_rule(index: int) -> None:
    name, item = ffma_calls()[index]
    call, vc = sampled_call(item)
    entry = checked_entry(converter_entry(item), {"why": None}, [call.M, call.N, call.K, call.batch],
                          item["kernels"], name[:4], "test")
    assert "why" not in entry, entry
    plan = plan_from_fields(entry, call, name[:4], "", "", "test")
    inputs = make_inputs(vc, int(item["seed"]))
    r = replay_call(vc, inputs, plan, 4096)
    assert r.checked == len(item["samples"]) and not r.run_error
    assert not r.mismatches, f"{name}: {item['spec']}: {len(r.mismatches)} of {r.checked} differ"
    if call.tf32:  # the tf32 reading: the same chain on inputs rounded to tf32 first
        rounded = {k: tf32_rounded(v) for k, v in inputs.items()}
        assert replay_call(vc, rounded, plan, 4096).mismatches


def test_bf16_on_an_ffma_kernel_stays_refused() -> None:
    _, item = next(c for c in ffma_calls() if sampled_call(c[1])[0].a_dtype == "float16")
    call, _ = sampled_call(item)
    entry = {**converter_entry(item), "a_dtype": "bfloat16", "b_dtype": "bfloat16", "out_dtype": "bfloat16",
             "chain": {"arch": "hopper", "in_fmt": "bf16", "out_fmt": "fp32", "instr": "cublas"}}
    got = checked_entry(entry, {"why": None}, [call.M, call.N, call.K, call.batch], item["kernels"], "h100", "t")
    assert re.search("CUDA-core FFMA kernel", got["why"])
