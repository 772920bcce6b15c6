"""Operand layouts (tcsmt.library.layouts), the recorded layout variants and their use in the capture replay, the
settings key's deterministic flag, runs of residue classes in catalogs, and the CUDA-core GEMV kernels' refusal.

Expected values come from the committed evidence: ``evidence/h100_model_capture/llama_fwd.json`` (the strides torch
gave cuBLAS in a LLaMA forward on the H100), ``evidence/library/h100_layout_variants.json`` (the variants' plans
against their row-major twins, from ``evidence/library/recordings/h100_layout_variants.json.gz``) and the kernel
names of ``evidence/library/recordings/h100_attn_families.json.gz``."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tcsmt.errors import TcsmtError
from tcsmt.library.catalog_runs import plan_runs
from tcsmt.library.checks import make_call
from tcsmt.library.gemm_replay import call_of
from tcsmt.library.layouts import BATCH_BROADCAST, ROWS_INTERLEAVED, VARIANTS_FILE, covered, operand_layout
from tcsmt.library.plans import plans_dir
from tcsmt.library.rules import UNREAD_K_ORDER
from tcsmt.library.settings import parse_settings_key, settings_from_values, settings_key

EVIDENCE = Path(__file__).resolve().parents[1] / "evidence"
SETTINGS = {"preferred_blas_library": "_BlasBackend.Cublas", "allow_tf32": False,
            "allow_bf16_reduced_precision_reduction": True}


def _capture_bmm(shape_a: list[int], stride_a: list[int]) -> dict:
    """The first bmm of the captured LLaMA forward whose A has this shape and these strides."""
    doc = json.loads((EVIDENCE / "h100_model_capture" / "llama_fwd.json").read_text())
    return next(c for c in doc["calls"] if c["op"] == "bmm" and c["A"]["shape"] == shape_a
                and c["A"]["stride"] == stride_a)


def test_operand_layouts_of_the_captured_model():
    q = _capture_bmm([32, 7, 128], [128, 4096, 1])  # the batch-1 query of prefill 1x7: (7, 32, 128) viewed (32, 7, 128)
    assert operand_layout(q["A"]["shape"], q["A"]["stride"]) == ROWS_INTERLEAVED
    assert operand_layout(q["B"]["shape"], q["B"]["stride"]) == "t"  # K^T, a transposed view
    rope = _capture_bmm([1, 64, 1], [64, 1, 1])
    assert operand_layout(rope["A"]["shape"], rope["A"]["stride"]) == "n"
    assert operand_layout([4, 64, 1], [0, 1, 1]) == BATCH_BROADCAST  # inv_freq expanded over a batch of 4
    assert operand_layout([4, 7, 128], [128, 512, 1]) == ROWS_INTERLEAVED  # (7, 4, 128) viewed (4, 7, 128)
    assert operand_layout([4, 7, 128], [128, 640, 1]) == ""  # rows padded beyond the batch: another layout
    assert operand_layout([2, 3, 4], [24, 4, 1]) == ""  # batches apart: not packed
    assert operand_layout([3, 4], [8, 1]) == ""  # a column slice of a wider matrix
    assert operand_layout([3, 4], [1, 3]) == "t" and operand_layout([1, 4], [99, 1]) == "n"


def test_shipped_variants_are_the_evidence():
    """models/library/layout_variants.json holds, per GPU, exactly the calls its evidence file found equal."""
    ship = json.loads((plans_dir() / VARIANTS_FILE).read_text())
    for gpu, entries in ship["gpus"].items():
        ev = json.loads((EVIDENCE / "library" / f"{gpu}_layout_variants.json").read_text())
        covered_calls = sum((hi - lo) // step + 1 for e in entries for lo, hi, step in e["equal"])
        assert covered_calls == sum(t["equal"] for t in ev["totals"].values())
    ev = json.loads((EVIDENCE / "library" / "h100_layout_variants.json").read_text())
    assert ev["totals"] == {"rows_interleaved": {"calls": 163840, "equal": 163840},
                            "batch_broadcast": {"calls": 24576, "equal": 24576}}


def test_covered_only_where_recorded():
    call = make_call("bmm", 7, 7, 128, batch=32, a_dtype="bfloat16", b_t=True)
    assert "h100_layout_variants" in covered(ROWS_INTERLEAVED, call, "h100")
    assert covered(ROWS_INTERLEAVED, make_call("bmm", 4097, 4097, 128, batch=32, a_dtype="bfloat16", b_t=True),
                   "h100") is None  # beyond the recorded sequence lengths
    assert covered(ROWS_INTERLEAVED, make_call("bmm", 7, 7, 128, batch=33, a_dtype="bfloat16", b_t=True),
                   "h100") is None  # a head count not recorded
    assert covered(ROWS_INTERLEAVED, call, "a100") is None
    rope = make_call("bmm", 64, 250, 1, batch=4, a_dtype="float32")
    assert covered(BATCH_BROADCAST, rope, "h100") is not None
    assert covered(BATCH_BROADCAST, make_call("bmm", 64, 250, 1, batch=4, a_dtype="float32", tf32=True),
                   "h100") is None  # recorded with tf32 off only


def test_replay_keys_a_covered_variant_as_row_major():
    q = _capture_bmm([32, 7, 128], [128, 4096, 1])
    calls, why, note = call_of(q, SETTINGS, "h100")
    assert why == "" and calls[0].a_t is False and calls[0].b_t is True and "rows interleaved" in note
    calls, why, note = call_of(q, SETTINGS, "a100")
    assert calls == [] and "no recording of a100 shows it planned as the row-major layout" in why
    odd = {**q, "A": {**q["A"], "stride": [128, 5000, 1]}}
    calls, why, _ = call_of(odd, SETTINGS, "h100")
    assert calls == [] and why.startswith("operand layout not modelled")


def test_deterministic_is_part_of_the_settings_key():
    assert settings_key("bfloat16", deterministic=True) == "deterministic=on"
    key = settings_key("bfloat16", cublas_workspace=":4096:8", deterministic=True)
    assert key == "CUBLAS_WORKSPACE_CONFIG=:4096:8,deterministic=on"
    assert settings_key("bfloat16", **parse_settings_key(key)) == key
    assert settings_from_values("bfloat16", {**SETTINGS, "deterministic_algorithms": True}) == "deterministic=on"
    assert settings_from_values("bfloat16", SETTINGS) == "default"
    with pytest.raises(TcsmtError, match="deterministic=on is the only value"):
        parse_settings_key("deterministic=off")


def test_plan_runs_cover_each_count_once():
    rng = random.Random(3)
    for _ in range(300):
        ts = sorted(rng.sample(range(1, 300), rng.randint(1, 120)))
        by_t = {t: (t % rng.choice([2, 4, 8]) == 0) + rng.choice([0, 0, 2]) for t in ts}
        got: dict[int, int] = {}
        for lo, hi, step, pid in plan_runs(by_t):
            for t in range(lo, hi + 1, step):
                assert t not in got
                got[t] = pid
        assert got == by_t
    # a decode product's pattern (the H100's q K^T over the KV length): one plan at multiples of 8, another elsewhere
    by_t = {t: 5 if t % 8 == 0 else 94 for t in range(33, 4097)}
    assert len(plan_runs(by_t)) == 5  # residues mod 4: three runs of the one plan, then mod 8 for 4 and 0


def test_gemv_kernels_are_found_after_their_return_type():
    """cuBLAS's gemvx kernel demangles with its return type first (kernel names of the recorded attention products,
    evidence/library/recordings/h100_attn_families.json.gz); its K order is not read, so its plans are refused."""
    name = ("std::enable_if<true, void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, __nv_bfloat16, "
            "__nv_bfloat16, float, true, true, true, false, 7, false, cublasGemvParamsEx<int, "
            "cublasGemvTensorStridedBatched<__nv_bfloat16 const>")
    m = UNREAD_K_ORDER.search(name.split("<")[0]) or UNREAD_K_ORDER.search(name)
    assert m is not None and m.group(1) == "gemvx"
    assert UNREAD_K_ORDER.search("gemv2T_kernel_val").group(1) == "gemv2T_kernel_val"
    assert UNREAD_K_ORDER.search("nvjet_sm90_tst_128x64_64x8_1x1_v_bz_TNT") is None


@pytest.mark.parametrize("program", ["llama_fwd", "llama_bwd", "fp8"])
def test_every_captured_whole_model_call_is_answered(program):
    """Every GEMM call of the captured LLaMA-3-8B-width model (prefill, decode, one training step) and of the fp8
    stack (``evidence/h100_model_capture/``) gets a plan from the shipped H100 catalog, the decode products on the
    ``gemvx`` kernels included: their recording holds each launch's dealing (``gemv_dealing``,
    tests/test_gemv_launch_dealing.py), where the per-shape rule alone refused the q.K^T at KV 1, 6 and 7.  The bits of
    the answers are checked by the sampled replay (``evidence/h100_model_replay_*.json``) and on the GPU
    (``evidence/h100_model_facade/``)."""
    from tcsmt.library.gemm_replay import answer_of
    doc = json.loads((EVIDENCE / "h100_model_capture" / f"{program}.json").read_text())
    refused = [(rec["n"], row["refused"]) for rec in doc["calls"]
               for ans, row in [answer_of(rec, doc["settings"], "h100", ())] if ans is None]
    assert not refused, refused[:3]
