"""GEMV orders read with 32-bit outputs and fp32 inputs, and the two kernels first read from them: ``gemv2N_kernel``
(S contiguous K slices, S its template argument) and ``gemvNSP_kernel`` (32 lanes taking tiles of 4 k's, halving tree).

Every expected value is read from the committed probes of evidence/library/<gpu>_gemv_probes_all_dtypes.json.gz
(tools/device/gemv_probes.py through torch 2.11 / cuBLAS 13.1 on the H100 and the H200, calls listed by
``python -m tools.library.gemv_probe_lists --spread 8 --unread-only``) and the order tables
models/library/<gpu>_gemv_orders.json.gz that ``python -m tools.library.gemv_orders`` makes from them."""
from __future__ import annotations

import gzip
import json
import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from tcsmt.library.families import kernel_key
from tcsmt.library.gemv_rules import canonical_order, gemv_grain, gemv_orders
from tools.library.gemv_orders import differing, out_dtype_of, revealed, sampled_inputs, subtree_sizes

REPO = Path(__file__).resolve().parents[1]
GPUS = ["h100", "h200"]


@cache
def _probes(gpu: str) -> list[dict]:
    with gzip.open(REPO / "evidence" / "library" / f"{gpu}_gemv_probes_all_dtypes.json.gz", "rt") as f:
        return [r for r in json.load(f)["results"] if len(r.get("kernels") or []) == 1]


def _of(gpu: str, kernel: str) -> list[dict]:
    return [r for r in _probes(gpu) if re.search(rf"\b{kernel}\b", r["kernels"][0]["name"])]


@pytest.mark.parametrize("gpu", GPUS)
def test_fp32_outputs_are_read_as_32_bit_patterns(gpu):
    """A probe that asked for the recorded call's fp32 output (bf16 -> fp32 ``gemmSN_NN``) kept 32-bit patterns: the
    order the table holds for its kernel gives every sampled output bit for bit, and a wrong thread count does not."""
    probes = [r for r in _of(gpu, "gemmSN_NN_kernel") if out_dtype_of(r) == "float32"
              and r["spec"]["a_dtype"] == "bfloat16" and 64 <= r["spec"]["K"] <= 512]
    assert probes, "no bf16 -> fp32 gemmSN_NN probe"
    r = probes[0]
    assert len(sampled_inputs(r, 8)[0][3].tobytes()) == 4 * len(sampled_inputs(r, 8)[0][3])
    name, block = r["kernels"][0]["name"], tuple(r["kernels"][0]["block"])
    entries = gemv_orders(gpu).get((kernel_key(name), block), [])
    assert entries, f"no order for {name[:80]} {block}"
    e = entries[0]
    cand = (e["lanes_are"], e["grain"], e["reduce"], int(e.get("segment", 0)))
    bad, total = differing(r, cand, 64)
    assert total > 0 and bad == 0
    wrong = ("blockDim.x", "1", "fp32_forward", 0)
    assert differing(r, wrong, 64)[0] > 0


@pytest.mark.parametrize("gpu", GPUS)
def test_gemv2N_cuts_K_into_its_template_slice_count(gpu):
    """``gemv2N_kernel<int, int, T, ..., float, 128, S, 4, 4, 1, ...>``: the revealed rows of every probe are S
    contiguous runs of ceil(K/S) k's, each one FFMA chain, their sums added in order, whatever the launch grid (S = 1
    probes ran grids of up to 62 blocks; S = 2 and 4 probes ran [S, 1, 256])."""
    seen = set()
    for r in _of(gpu, "gemv2N_kernel"):
        S = int(re.search(r"float, 128, (\d+),", r["kernels"][0]["name"]).group(1))
        K = int(r["spec"]["K"])
        for i, row in revealed(r).items():
            assert (subtree_sizes(K, S, gemv_grain("slices", K, S), "fp32_forward", i) == row).all(), (K, S, i)
            seen.add(S)
    assert {1, 2, 4} <= seen


@pytest.mark.parametrize("gpu", GPUS)
def test_gemvNSP_deals_tiles_of_4_to_32_lanes_in_a_halving_tree(gpu):
    """``gemvNSP_kernel<..., 1, 32, 4, 1024, ...>`` with blockDim.y = 32: every revealed row is the halving tree over
    32 lanes of tiles of 4 k's dealt round-robin (k's 128 apart chain in one lane), and dealing single k's does not
    give them.  The fp32 kernel ``gemvNSP_kernel<float, ..., 1, 16, 4, 1024, ...>`` with block [32, 24, 1] deals its tiles to 24 lanes (k 96 chains in lane 0) and its rows
    are the xor tree over 32 lanes whose last 8 hold nothing: not modelled (the halving reduction takes a power-of-two
    count of partials), so no order of it is in the table."""
    probes = [r for r in _of(gpu, "gemvNSP_kernel") if r["spec"]["K"] > 128]
    assert probes
    for r in probes:
        K, lanes = int(r["spec"]["K"]), int(r["kernels"][0]["block"][1])
        assert lanes in (32, 24)
        for i, row in revealed(r).items():
            assert (subtree_sizes(K, lanes, 4, "halving", i) == row).all(), (K, lanes, i)
    K = int(probes[0]["spec"]["K"])
    i, row = next(iter(revealed(probes[0]).items()))
    assert not (subtree_sizes(K, 32, 1, "halving", i) == row).all()


def test_tiles_of_4_are_a_sum_of_their_own():
    """Tiles of 4 over 32 lanes are another sum than single k's or chunk64 tiles once K passes 4 lanes' worth."""
    K = 300
    four = canonical_order(K, 32, gemv_grain("4", K, 32), "halving")
    assert four != canonical_order(K, 32, 1, "halving")
    assert four != canonical_order(K, 32, gemv_grain("chunk64", K, 32), "halving")
    assert np.array_equal(np.sort(np.concatenate([np.asarray(x, dtype=int) for lane in four[1] for x in lane])),
                          np.arange(K))


def test_single_k_threads_joined_in_order_are_one_chain_for_16_bit_inputs_only():
    """128 threads of one k each joined in order (fp32_forward) are the one FFMA chain of ``gemv2N_kernel`` with one
    slice where products are exact (16-bit inputs); with fp32 inputs each thread's FFMA rounds its product first, so the
    two are different sums: bf16 inputs evaluated bit for bit agree, fp32 inputs chosen to show the rounding do not."""
    from tcsmt.library.evaluate import evaluate_pairs
    from tcsmt.library.plans import call_from_entry, plan_from_fields

    K = 5
    assert canonical_order(K, 128, 1, "fp32_forward") == canonical_order(K, 1, K, "fp32_forward")
    assert canonical_order(K, 128, 1, "fp32_forward", exact_products=False) != \
        canonical_order(K, 1, K, "fp32_forward", exact_products=False)

    def plan(dtype: str, fmt: str, L: int):
        raw = {"op": "mm", "a_dtype": dtype, "out_dtype": "float32", "split_k": L, "grain": 1 if L > 1 else K,
               "slices": "interleaved", "reduce": "fp32_forward", "epilogue": [],
               "chain": {"arch": "hopper", "in_fmt": fmt, "out_fmt": "fp32", "instr": "simt_ffma"}, "sources": ["test"]}
        return plan_from_fields(raw, call_from_entry(raw, [1, 1, K, 1], "test"), "h100", "", "", "test")

    rng = np.random.default_rng(5)
    a32 = (rng.standard_normal((64, K)) * 3).astype(np.float32)
    b32 = (rng.standard_normal((K, 64)) * 3).astype(np.float32)
    a16, b16 = ((x.view(np.uint32) >> 16).astype(np.uint16) for x in (a32, b32))
    assert np.array_equal(evaluate_pairs(plan("bfloat16", "bf16", 128), a16, b16),
                          evaluate_pairs(plan("bfloat16", "bf16", 1), a16, b16))
    A, Bm = a32.view(np.uint32), b32.view(np.uint32)
    assert not np.array_equal(evaluate_pairs(plan("float32", "fp32", 128), A, Bm),
                              evaluate_pairs(plan("float32", "fp32", 1), A, Bm))


def test_a_tf32_call_on_a_gemv_kernel_chains_its_fp32_inputs_by_ffma():
    """tf32 mode does not reach cuBLAS's CUDA-core GEMV kernels: the fp32 probes ran with tf32 on (as the recorded
    calls were) and their outputs are fp32 FFMA chains on the raw fp32 inputs, so a tf32 call's GEMV plan takes the
    fp32 ``simt_ffma`` chain of models/hopper.toml, and a 16-bit call's keeps its input format."""
    from tcsmt.library.gemv_rules import _gemv_entry

    e = {"lanes": 32, "lanes_are": "blockDim.y", "grain": "1", "reduce": "halving", "outputs_bit_exact": 1,
         "K_probed": [64]}
    for a_dtype, in_fmt, want in (("float32", "tf32", "fp32"), ("float32", "fp32", "fp32"), ("bfloat16", "bf16", "bf16")):
        entry = {"a_dtype": a_dtype, "chain": {"arch": "hopper", "in_fmt": in_fmt, "out_fmt": "fp32", "instr": "cublas"},
                 "sources": []}
        assert _gemv_entry(entry, e, 1, "test kernel", "probes", "")["chain"] == \
            {"arch": "hopper", "in_fmt": want, "out_fmt": "fp32", "instr": "simt_ffma"}
