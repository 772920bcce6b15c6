"""Chains that restart inside a thread (the plan field ``segment``), and the kernels of LM heads at few tokens.

``gemv2T_kernel_val`` (GPT-2's and BERT's LM heads at one token) sums each of its 16 threads' k's of every block of 512
from +0 and adds the block sums in order (the FPRev probes of evidence/library/<gpu>_gemv_probes_ends.json.gz and
_bias.json.gz); BERT's LM heads with their bias run on ``gemvx`` (bf16) and ``gemv2T_kernel_val`` (fp16) through
cuBLASLt's EPILOGUE_BIAS (evidence/library/gemv_bias_samples.json.gz, sampled outputs of both GPUs); at 2 to 16 tokens
GPT-2's runs ``gemmSN_TN_kernel`` variants and BERT's an sm80 CUTLASS WMMA kernel with the bias
(<gpu>_gemv_probes_gemmsn.json.gz, wmma_bias_samples.json.gz)."""
from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.library_calls import make_inputs
from tcsmt.library.call_plans import _epilogue
from tcsmt.library.evaluate import evaluate_pairs
from tcsmt.library.gemv_rules import gemv_orders
from tcsmt.library.plans import call_from_entry, plan_from_fields
from tcsmt.library.replay import replay_call

REPO = Path(__file__).resolve().parents[1]


def _plan(K: int, segment: int, epilogue: list[str], out_dtype: str = "bfloat16"):
    raw = {"op": "linear", "a_dtype": "bfloat16", "out_dtype": out_dtype, "bias": bool(epilogue), "split_k": 16,
           "grain": 1, "slices": "interleaved", "reduce": "fp32_forward", "epilogue": epilogue, "segment": segment,
           "chain": {"arch": "hopper", "in_fmt": "bf16", "out_fmt": "fp32", "instr": "simt_ffma"},
           "sources": ["test"]}
    return plan_from_fields(raw, call_from_entry(raw, [1, 1, K, 1], "test"), "h100", "", "", "test")


def _bf16(x: np.ndarray) -> np.ndarray:
    """float32 values to bf16 patterns, RNE (no NaN among them)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _reference(a: np.ndarray, b: np.ndarray, bias: np.ndarray, threads: int = 16, block: int = 32) -> np.ndarray:
    """The two-level order in IEEE float32 (numpy): thread t takes k = t mod 16, its k's of each block of 512 (32 a
    thread) chained by FFMA from +0 (a bf16 product is exact in fp32, so FFMA is one float32 add), the block sums added
    to the thread's sum in order, the 16 thread sums serially from thread 0, the bias added, RNE to bf16."""
    n, K = a.shape
    prod = (_value(a) * _value(b.T)).astype(np.float32)
    total = np.zeros(n, dtype=np.float32)
    for t in range(threads):
        ks = list(range(t, K, threads))
        thread = None
        for s in range(0, len(ks), block):
            acc = np.zeros(n, dtype=np.float32)
            for k in ks[s:s + block]:
                acc = (acc + prod[:, k]).astype(np.float32)
            thread = acc if thread is None else (thread + acc).astype(np.float32)
        total = thread if t == 0 else (total + thread).astype(np.float32)
    return _bf16((total + _value(bias)).astype(np.float32))


@pytest.mark.parametrize("K", [513, 768, 1024, pytest.param(2792, marks=pytest.mark.slow)])  # 2792: 9 s, slow set
def test_a_segment_plan_is_the_thread_sums_of_block_sums(K):
    rng = np.random.default_rng(K)
    n = 300
    a = _bf16(rng.standard_normal((n, K)).astype(np.float32))
    b = _bf16(rng.standard_normal((K, n)).astype(np.float32))
    bias = _bf16(rng.standard_normal(n).astype(np.float32))
    bias32 = (bias.astype(np.uint32) << 16).astype(np.int64)
    got = np.asarray(evaluate_pairs(_plan(K, 32, ["bias"]), a, b, bias=bias32)).astype(np.uint16)
    assert np.array_equal(got, _reference(a, b, bias))
    # the restarts change some fp32 sums (a thread's second segment of one k never does: K = 513 has one)
    fp32 = [np.asarray(evaluate_pairs(_plan(K, s, [], "float32"), a, b)) for s in (32, 0)]
    assert (fp32[0] != fp32[1]).any() == (K > 513)


def test_a_segment_as_long_as_the_threads_k_is_no_restart():
    plan = _plan(512, 32, [])
    assert plan.segments(list(range(0, 512, 16))) == [list(range(0, 512, 16))]
    assert plan.segments(list(range(0, 768, 16)))[1] == list(range(512, 768, 16))
    assert plan.arithmetic() != _plan(512, 0, []).arithmetic()


def test_segment_with_k_tile_is_refused():
    raw = {"op": "mm", "a_dtype": "bfloat16", "split_k": 1, "k_tile": 32, "segment": 64, "sources": ["test"],
           "chain": {"arch": "hopper", "in_fmt": "bf16", "out_fmt": "fp32", "instr": "cublas"}}
    with pytest.raises(TcsmtError, match="segment and k_tile"):
        plan_from_fields(raw, call_from_entry(raw, [1, 1, 256, 1], "t"), "h100", "", "", "t")


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_the_order_table_holds_gemv2T_beyond_512_with_restarts(gpu):
    """models/library/<gpu>_gemv_orders.json.gz (tools/library/gemv_orders.py on the committed probes): the bf16 and fp16
    ``gemv2T_kernel_val`` with block [128] hold 16 threads, single k's, serial thread sums, and restarts every 32 of a
    thread's k's at BERT's and GPT-2's hidden sizes 768 and 1024 (the LM heads, with and without a bias)."""
    found = {}
    for (kernel, block), entries in gemv_orders(gpu).items():
        if kernel.startswith("gemv2T_kernel_val") and block == (128, 1, 1):
            for e in entries:
                for K in e["K"]:
                    found.setdefault((kernel.split(",")[2].strip(), kernel.split(", ")[11], K), e)
    for dt in ("__half", "__nv_bfloat16"):
        for bias in ("true", "false"):
            for K in (768, 1024):
                e = found.get((dt, bias, K))
                if dt == "__half" and bias == "false" and K == 1024:
                    continue  # not a recorded call: GPT-2's LM head is 768 wide; BERT's fp16 heads carry a bias
                assert e is not None, (dt, bias, K)
                assert (e["lanes"], e["grain"], e["reduce"], e.get("segment")) == (16, "1", "fp32_forward", 32)


@cache
def _bias_samples() -> dict:
    with gzip.open(REPO / "evidence" / "library" / "gemv_bias_samples.json.gz", "rt") as f:
        return json.load(f)


@pytest.mark.parametrize("gpu", ["h100", pytest.param("h200", marks=pytest.mark.slow)])  # CI time
def test_bert_lm_heads_at_one_token_replay_bit_for_bit(gpu):
    """Every sampled output of the 20 calls per GPU (bf16 on gemvx, fp16 on gemv2T_kernel_val; normal, wide and
    c_cancel inputs) under the shipped catalog's plan: the order read by the probes, RN32(y + bias), RNE to the
    output."""
    from tcsmt.library.lookup import lookup
    from tcsmt.library.plans import Call

    name = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200"}[gpu]
    calls = [c for c in _bias_samples()["calls"] if c["gpu"] == name]
    assert len(calls) == 20
    checked = 0
    for c in calls[::4]:  # both widths, both dtypes and every input kind among them (CI time; decide reads all 20)
        call = Call("linear", c["M"], c["N"], c["K"], c["a_dtype"], c["a_dtype"], c["a_dtype"], bias=True)
        plan = lookup(call, gpu)
        assert plan.epilogue == ("bias",) and plan.split_k in (8, 16)
        r = replay_call(c, make_inputs(c, int(c["seed"])), plan)
        assert not r.run_error and not r.mismatches, (c["a_dtype"], c["K"], c["dist"], r.mismatches[:3])
        checked += r.checked
    assert checked == 5 * 256


def test_a_gemv_call_takes_no_epilogue_decided_on_other_kernels():
    """A decision whose match names no kernels (made on GEMM kernels) leaves a GEMV call's epilogue unknown; one that
    names the GEMV kernel sets it."""
    call = {"op": "addmm", "alpha": 2.0, "beta": 1.0, "split_k": 1,
            "kernels": ["std::enable_if<true, void>::type internal::gemvx::kernel<int, int, float>"]}
    generic = [{"match": {"op": "addmm", "alpha_is_1": False}, "set": {"epilogue": ["alpha_beta_c"]}, "evidence": "x"}]
    steps, why = _epilogue(call, None, generic)
    assert steps is None and "GEMV" in why
    named = [{"match": {"op": "addmm", "kernel_regex": "gemvx"}, "set": {"epilogue": ["alpha_beta_c"]},
              "evidence": "x"}]
    assert _epilogue(call, None, named)[0] == ["alpha_beta_c"]
    gemm = dict(call, kernels=["nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"])
    assert _epilogue(gemm, None, generic)[0] == ["alpha_beta_c"]


def test_a_last_restart_of_one_k_is_no_restart():
    """A thread's last segment of one k adds its exact product (16-bit inputs: exact in fp32) alone from +0 and then to
    the thread's sum, which is the chain's one FFMA: the order tool counts the two as one sum (so 4 threads of 17 k's
    at K = 65 with restarts every 16 are the single chains the probes read), and the plans give equal fp32 bits; two
    k's after the restart are another sum."""
    from tools.library.gemv_orders import canonical_order

    assert canonical_order(65, 4, 1, "halving", 16) == canonical_order(65, 4, 1, "halving", 0)
    assert canonical_order(70, 4, 1, "halving", 16) != canonical_order(70, 4, 1, "halving", 0)  # 18 k's a thread
    rng = np.random.default_rng(65)
    a = _bf16(rng.standard_normal((500, 65)).astype(np.float32))
    b = _bf16(rng.standard_normal((65, 500)).astype(np.float32))

    def plan(seg: int):
        raw = {"op": "bmm", "a_dtype": "bfloat16", "out_dtype": "float32", "split_k": 4, "grain": 1,
               "slices": "interleaved", "reduce": "halving", "segment": seg, "sources": ["test"],
               "chain": {"arch": "hopper", "in_fmt": "bf16", "out_fmt": "fp32", "instr": "simt_ffma"}}
        return plan_from_fields(raw, call_from_entry(raw, [1, 1, 65, 1], "t"), "h100", "", "", "t")

    assert np.array_equal(np.asarray(evaluate_pairs(plan(16), a, b)), np.asarray(evaluate_pairs(plan(0), a, b)))


def test_library_discriminate_separates_a_restart_inside_an_interleaved_slice():
    """Two plans that differ only in the restarts: the slice probe puts its small term at the slice's own previous k
    (S k's back in an interleaved slice), so a row at k = 496, 512, 528 tells them apart (restarting at k = 512 keeps
    the 2^-20 product that L = 2^20 swamps in one chain)."""
    from tcsmt.library.discriminate import parse_call, plans_for, separate

    pa, pb = plans_for(parse_call("mm:1x64x768:bfloat16"), "h100", "split_k=16,slices=interleaved,grain=1",
                       "split_k=16,slices=interleaved,grain=1,segment=32")
    sep = separate(pa, pb)
    assert sep is not None and sep.out_a != sep.out_b and "k = 512" in sep.how


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_gpt2_lm_head_small_m_kernels_restart_every_16(gpu):
    """GPT-2's LM head at 2 to 7 tokens runs five ``gemmSN_TN_kernel`` variants (the recordings); their probes
    (evidence/library/<gpu>_gemv_probes_gemmsn.json.gz) give each one order at K = 768: 16 threads of single k's, each
    restarting from +0 after every 16 of its k's, the thread sums serial from thread 0."""
    got = {kernel: [(e["lanes"], e["grain"], e["reduce"], e.get("segment")) for e in entries if 768 in e["K"]]
           for (kernel, block), entries in gemv_orders(gpu).items() if kernel.startswith("gemmSN_TN_kernel<float, 128,")
           and any(768 in e["K"] for e in entries)}  # variants probed at other K only (random shapes') aside
    assert len(got) >= 5
    assert all(set(v) == {(16, "1", "fp32_forward", 16)} for v in got.values()), got  # probes' and scans' entries


@pytest.mark.parametrize("gpu", ["h100", pytest.param("h200", marks=pytest.mark.slow)])  # CI time
def test_fresh_outputs_of_the_lm_heads_at_one_token_replay(gpu):
    """The named calls of the fresh run (evidence/library/<gpu>_catalog_samples_gemv.json.gz: GPT-2's LM head at one
    token in bf16 and fp16, BERT-base's with its bias on cancelling inputs) under the shipped catalog, every sample."""
    from tools.library.catalog_samples import sampled_call

    with gzip.open(REPO / "evidence" / "library" / f"{gpu}_catalog_samples_gemv.json.gz", "rt") as f:
        items = [i for i in json.load(f)["calls"] if int(i["seed"]) >= 15001]
    assert len(items) == 4
    from tcsmt.library.lookup import lookup
    for item in items:
        call, vc = sampled_call(item)
        r = replay_call(vc, make_inputs(vc, int(item["seed"])), lookup(call, gpu))
        assert r.checked >= 128 and not r.mismatches and not r.run_error, (item["spec"], r.mismatches[:3])


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_bert_lm_heads_at_2_to_16_tokens_replay_bit_for_bit(gpu):
    """BERT's LM heads with their bias at 2 to 16 tokens on ``cutlass_80_wmma_tensorop_bf16_s161616gemm``
    (evidence/library/wmma_bias_samples.json.gz, 20 calls per GPU): every sample under the shipped catalog's plan,
    RN32(y + bias) after the kernel's chain."""
    from tcsmt.library.lookup import lookup
    from tcsmt.library.plans import Call

    with gzip.open(REPO / "evidence" / "library" / "wmma_bias_samples.json.gz", "rt") as f:
        name = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200"}[gpu]
        calls = [c for c in json.load(f)["calls"] if c["gpu"] == name]
    assert len(calls) == 20
    for c in calls[::3]:
        plan = lookup(Call("linear", c["M"], c["N"], c["K"], "bfloat16", "bfloat16", "bfloat16", bias=True), gpu)
        assert plan.epilogue == ("bias",)
        r = replay_call(c, make_inputs(c, int(c["seed"])), plan)
        assert r.checked == 256 and not r.mismatches and not r.run_error, (c["M"], c["K"], r.mismatches[:3])
