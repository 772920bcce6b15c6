"""Kernels whose arithmetic no decision read are refused, not answered with another kernel's K-chain: the
segment-K tf32 kernels and the CUDA-core FFMA kernels outside the calls their chain was decided on.  Found by
fresh H100 outputs of calls the catalog answered (evidence/library/h100_catalog_samples.json, made by
tools/device/catalog_sample_run.py and ``python -m tools.library.catalog_samples replay``): every one of 7
``segment_k_on`` calls had outputs that differ from one K-chain (4 to 123 of 128), every ``segment_k_off`` call agreed;
tf32 calls on FFMA kernels were answered with a tf32 tensor-core chain."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tcsmt.errors import TcsmtError
from tcsmt.library.lookup import answer, parse_record_spec
from tcsmt.library.rules import checked_entry, unread_kernel_arithmetic

REPO = Path(__file__).resolve().parents[1]
TF32_CHAIN = {"arch": "hopper", "in_fmt": "tf32", "out_fmt": "fp32", "instr": "cublas"}
SEGMENT_ON = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x64x32_warpgroupsize1x1x1_execute_segment_k_on_kernel__5x_cublas"
SEGMENT_OFF = SEGMENT_ON.replace("segment_k_on", "segment_k_off")
SIMT = "cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>"
FFMA_16 = "sm80_xmma_gemm_f16f16_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna2_alignc2_execute_kernel__5x_cublas"


def test_segment_k_kernels_are_refused_and_their_twins_are_not():
    entry = {"op": "mm", "a_dtype": "float32", "out_dtype": "float32", "tf32": True, "chain": TF32_CHAIN}
    assert "segment-K" in unread_kernel_arithmetic(entry, [SEGMENT_ON])
    assert unread_kernel_arithmetic(entry, [SEGMENT_OFF]) == ""


def test_ffma_kernels_keep_their_chain_only_where_it_was_decided():
    tf32 = {"op": "mm", "a_dtype": "float32", "out_dtype": "float32", "tf32": True, "chain": TF32_CHAIN}
    why = unread_kernel_arithmetic(tf32, [SIMT])
    assert "tf32 on" in why and "\n" not in why
    fp16 = {"op": "bmm", "a_dtype": "float16", "out_dtype": "float16",
            "chain": {"arch": "hopper", "in_fmt": "fp16", "out_fmt": "fp32", "instr": "cublas"}}
    assert "float16 inputs" in unread_kernel_arithmetic(fp16, [FFMA_16])
    decided = {"op": "mm", "a_dtype": "float32", "out_dtype": "float32", "tf32": False,
               "chain": {"arch": "hopper", "in_fmt": "fp32", "out_fmt": "fp32", "instr": "simt_ffma"}}
    assert unread_kernel_arithmetic(decided, [SIMT]) == ""


def test_checked_entry_refuses_with_the_reason():
    entry = {"op": "mm", "a_dtype": "float32", "out_dtype": "float32", "tf32": True, "split_k": 1, "epilogue": [],
             "chain": TF32_CHAIN, "kernels": ["x"], "sources": ["t"]}
    got = checked_entry(entry, {"op": "mm"}, [64, 64, 512, 1], [SEGMENT_ON], "h100", "t")
    assert got["op"] == "mm" and "segment-K" in got["why"]


def test_the_shipped_catalog_refuses_or_splits_the_sampled_calls_it_had_wrong():
    """The calls of the committed H100 samples whose outputs differed from one K-chain are refused by the library
    now, or answered with their launch's segment-K plan (a launch form the GPU checks covered), whose outputs are the
    GPU's samples bit for bit."""
    from tcsmt.hwcheck.library_calls import make_inputs
    from tcsmt.library.replay import replay_call
    from tools.library.catalog_samples import sampled_call

    raw = json.load(gzip.open(REPO / "evidence" / "library" / "h100_catalog_samples.json.gz", "rt"))
    wrong = [c for c in raw["calls"] if "segment_k_on" in c["stratum"][0]]
    assert len(wrong) == 7
    split = 0
    for c in wrong:
        try:
            ans = answer(parse_record_spec(c["spec"]), "h100", plans_dirs=())
        except TcsmtError as exc:
            assert "segment-K" in str(exc)
            continue
        assert ans.plan.segment_k is not None, c["spec"]
        _call, vc = sampled_call(c)
        r = replay_call(vc, make_inputs(vc, int(c["seed"])), ans.plan, 64)
        assert r.checked == 64 and not r.mismatches and not r.run_error, c["spec"]
        split += 1
    assert split >= 1  # the 2026-11-28 catalogs answer some of them (catalog_samples_replayed_k_iteration_catalogs.json)


def test_linear_with_bias_on_a_cutlass_split_k_kernel_is_refused():
    """``evidence/library/h200_catalog_samples_rebuilt.json.gz``: linear fp32 (tf32) 27 x 1024 x 8192 with a bias on
    ``cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4``, split in place, gave 105 of 128 outputs other than
    RN32(y + bias), which was decided on nvjet and unsplit sm80 CUTLASS calls only; the linear-bias decision now
    names those classes, and this call is refused."""
    with pytest.raises(TcsmtError, match="epilogue"):
        answer(parse_record_spec("linear 27x1024x8192 float32 tf32=1 bias=1"), "h200", plans_dirs=())
