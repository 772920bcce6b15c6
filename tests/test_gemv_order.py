"""The K order of cuBLAS's CUDA-core GEMV kernels: the halving reduction, the plans the catalog rules make for the
probed kernels, and the committed GPU probes (evidence/library/{h100,h200}_gemv_probes.json.gz, made by
tools/device/gemv_probes.py; the order table models/library/<gpu>_gemv_orders.json.gz by tools/library/gemv_orders.py)
replayed bit for bit."""
from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import FP32, get_format
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.errors import TcsmtError
from tcsmt.library.evaluate import IEEE32, evaluate_pairs
from tcsmt.library.gemv_rules import gemv_orders
from tcsmt.library.plans import call_from_entry, plan_from_fields
from tcsmt.library.rules import checked_entry
from tools.library.gemv_orders import revealed, sampled_inputs

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "evidence" / "library"


@cache
def probes(gpu: str) -> dict:
    with gzip.open(REPO / "evidence" / "library" / f"{gpu}_gemv_probes.json.gz", "rt") as f:
        return json.load(f)


def result(gpu: str, batch: int, N: int, K: int, b_t: bool) -> dict:
    for r in probes(gpu)["results"]:
        s = r["spec"]
        if (s["batch"], s["N"], s["K"], bool(s["b_t"])) == (batch, N, K, b_t) and r.get("kernels"):
            return r
    raise AssertionError(f"no probe of {batch}x{N}x{K} in {gpu}")


def f32(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


def test_halving_joins_partials_s_and_s_plus_half_first():
    """Four partials 2^24, 1, -2^24, 1: halving sums (P0 + P2) + (P1 + P3) = 0 + 2 = 2; serial and adjacent-pair trees
    lose a 1 to RNE at 2^24 + 1 and give 1.  (The halving tree is what the GEMV probes read: subtree sizes 128, 64, 128,
    32, ... for thread 0 against threads 1, 2, 3, 4, ... in evidence/library/h100_gemv_probes.json.gz.)"""
    parts = [np.array([f32(v)], dtype=np.int64) for v in (2.0 ** 24, 1.0, -(2.0 ** 24), 1.0)]
    bf16 = get_format("bf16")
    got = {s: int(sem.reduce_partials(NumpyBackend(), IEEE32, parts, FP32, bf16, s)[0][0])
           for s in ("halving", "fp32_forward", "pairwise")}
    assert got == {"halving": f32(2.0), "fp32_forward": f32(1.0), "pairwise": f32(1.0)}
    with pytest.raises(TcsmtError, match="power-of-two"):
        sem.reduce_partials(NumpyBackend(), IEEE32, parts[:3], FP32, bf16, "halving")


def gemv_plan(gpu: str, r: dict, **change):
    """The plan the catalog rules make for the probed call (its kernel and block from the probe file)."""
    s, k = r["spec"], r["kernels"][0]
    entry = {"op": s["op"], "a_dtype": s["a_dtype"], "out_dtype": s["out_dtype"], "split_k": 1, "epilogue": [],
             "chain": {"arch": "hopper", "in_fmt": {"bfloat16": "bf16", "float16": "fp16"}[s["a_dtype"]],
                       "out_fmt": "fp32", "instr": "cublas"}, "kernels": ["gemv"], "sources": ["test"]}
    shape = [1, s["N"], s["K"], s["batch"]]  # the probed call, in its layout: the order is read for it
    got = checked_entry(entry, {}, shape, [k["name"]], gpu, "test", blocks=[k["block"]], b_t=bool(s["b_t"]))
    assert "why" not in got, got.get("why")
    got = {**got, **change}
    return plan_from_fields(got, call_from_entry(got, shape, "test"), gpu, "", "", "test")


def probe_rows(r: dict, plan, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(model, GPU) counts of the first revealed rows (K <= 256: one window of ones, +B at i, -B at j)."""
    K = r["spec"]["K"]
    model, gpu = [], []
    for i, sub in list(revealed(r).items())[:rows]:
        js = [j for j in range(K) if j != i]
        val = np.ones((len(js), K))
        val[:, i] = 2.0 ** 40
        val[np.arange(len(js)), js] = -(2.0 ** 40)
        bits = (val.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # exact bf16 values
        y = evaluate_pairs(plan, np.full((len(js), K), 0x3F80, dtype=np.uint16), np.ascontiguousarray(bits.T))
        model.append(np.asarray(y).astype(np.uint16))
        gpu.append(K - sub[js])
    counts = np.concatenate(model).astype(np.uint32) << 16
    return counts.view(np.float32).astype(np.int64), np.concatenate(gpu)


def test_rows_of_the_decode_score_kernel_are_the_plans_tree():
    """LLaMA decode q.K^T at 32 heads (bmm 32x1x6x128 bf16, gemvx<..., false, true, true, false, 7> block [32, 4]):
    the H100's revealed rows (evidence/library/h100_gemv_probes.json.gz) are the counts the plan gives (32 threads of
    4 k's, halving); dealing single k's instead differs."""
    r = result("h100", 32, 6, 128, True)
    model, gpu = probe_rows(r, gemv_plan("h100", r), 4)
    assert (model == gpu).all()
    wrong, gpu = probe_rows(r, gemv_plan("h100", r, grain=1), 4)
    assert (wrong != gpu).sum() > 100


SAMPLED = [("h100", 32, 6, 128, True), ("h100", 128, 128, 34, False), ("h100", 128, 34, 128, True),
           ("h100", 24, 128, 4044, False), ("h100", 1, 64, 385, False), ("h100", 96, 2343, 128, True),
           ("h200", 32, 6, 128, True), ("h200", 128, 128, 36, False), ("h200", 128, 34, 128, True),
           pytest.param("h200", 40, 128, 5161, False, marks=pytest.mark.slow)]  # CI time


@pytest.mark.parametrize("gpu,batch,N,K,b_t", SAMPLED)
def test_committed_gpu_samples_replay_bit_for_bit(gpu, batch, N, K, b_t):
    """Random and probe inputs of probed calls (their first 16 outputs each, 4 at K > 8192), as the H100 / H200
    returned them."""
    r = result(gpu, batch, N, K, b_t)
    plan = gemv_plan(gpu, r)
    for kind, a, b, got in sampled_inputs(r, 4 if K > 8192 else 16):
        y = np.asarray(evaluate_pairs(plan, a, b)).astype(np.uint16)
        assert (y == got).all(), (kind, np.flatnonzero(y != got)[:5])


def test_unprobed_kernel_or_k_is_refused_in_one_line():
    r = result("h100", 32, 6, 128, True)
    s, k = r["spec"], r["kernels"][0]
    entry = {"op": "bmm", "a_dtype": "bfloat16", "out_dtype": "bfloat16", "split_k": 1, "epilogue": [],
             "chain": {"arch": "hopper", "in_fmt": "bf16", "out_fmt": "fp32", "instr": "cublas"},
             "kernels": ["gemv"], "sources": ["test"]}
    other_block = checked_entry(entry, {}, [1, 6, 128, 32], [k["name"]], "h100", "t", blocks=[[7, 7, 1]])
    assert "not read" in other_block["why"] and "\n" not in other_block["why"]
    other_k = checked_entry(entry, {}, [1, 6, 96, 32], [k["name"]], "h100", "t", blocks=[k["block"]])
    assert "read at K = " in other_k["why"]
    assert s["K"] == 128 and gemv_orders("h100")


def test_profiler_and_recorded_kernel_names_are_one_key():
    """The probes name kernels as torch.profiler does (``void`` and the parameter list included); the recordings'
    graph reader writes neither (evidence/library/recordings/h100_attn_families.json.gz): one table key for both."""
    from tcsmt.library.rules import kernel_key

    gemvx = ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, false, 7, "
             "cublasGemvParamsEx<int, float> >")
    assert kernel_key(gemvx + "(cublasGemvParamsEx<int, float>)") == gemvx
    assert kernel_key("void gemv2T_kernel_val<int, 128, 16>(cublasGemvParamsEx<int>, float, float)") == \
        "gemv2T_kernel_val<int, 128, 16>"
    assert kernel_key("gemv2T_kernel_val<int, 128, 16>") == "gemv2T_kernel_val<int, 128, 16>"


def test_halving_matches_ieee_float32_adds_in_its_order():
    """Eight random fp32 partials: halving is (((P0+P4)+(P2+P6))+((P1+P5)+(P3+P7))), each add IEEE binary32 RNE
    (numpy float32); a serial sum of the same partials differs on some of them, so the test sees the order."""
    rng = np.random.default_rng(5)
    vals = (rng.standard_normal((8, 2000)) * 2.0 ** rng.integers(-20, 20, (8, 2000))).astype(np.float32)
    parts = [v.view(np.uint32).astype(np.int64) for v in vals]
    got, _ = sem.reduce_partials(NumpyBackend(), IEEE32, parts, FP32, get_format("bf16"), "halving")
    p = list(vals)
    while len(p) > 1:
        h = len(p) // 2
        p = [np.float32(p[i] + p[i + h]) for i in range(h)]
    assert np.array_equal(np.asarray(got).astype(np.uint32), p[0].view(np.uint32))
    serial = vals[0]
    for v in vals[1:]:
        serial = np.float32(serial + v)
    assert (serial.view(np.uint32) != p[0].view(np.uint32)).sum() > 100


def test_an_order_applies_at_its_probed_k_only():
    """An fp16 ``gemvx`` (block [64, 8, 1]) whose order fits its probes at K = 580, 641, 8,483 and 16,383 gave 2 of
    256 outputs of another order at K = 1,347 on the H100 (evidence/library/h100_catalog_samples.json): an order
    applies at the K values probed, never between or beyond them."""
    table = gemv_orders("h100")
    entries = [e for es in table.values() for e in es
               if len(e["K_probed"]) > 1 and e["K_probed"][-1] - e["K_probed"][0] >= len(e["K_probed"])
               and any(c.split()[1:2] == ["bmm"] and c.endswith(" 0 0") for c in e["calls"])][:6]
    assert entries
    for e in entries:
        ks = e["K"]
        dt = "float16" if "__half" in e["kernel"] else "bfloat16"
        fmt = {"bfloat16": "bf16", "float16": "fp16"}[dt]
        entry = {"op": "bmm", "a_dtype": dt, "out_dtype": dt, "split_k": 1, "epilogue": [],
                 "chain": {"arch": "hopper", "in_fmt": fmt, "out_fmt": "fp32", "instr": "cublas"},
                 "kernels": ["gemv"], "sources": ["test"]}
        K, _op, batch, M, N, _bt, _bias = (int(x) if x.isdigit() else x for x in next(
            c for c in e["calls"] if c.split()[1] == "bmm" and c.endswith(" 0 0")).split())
        at = checked_entry(entry, {}, [M, N, K, batch], [e["kernel"]], "h100", "t", blocks=[e["block"]])
        assert "why" not in at, at.get("why")
        between = next(k for k in range(ks[0] + 1, ks[-1]) if k not in ks)
        for k in (between, ks[-1] + 1):  # the probed call's shape at a K the table does not hold
            got = checked_entry(entry, {}, [M, N, k, batch], [e["kernel"]], "h100", "t", blocks=[e["block"]])
            why = got.get("why", "")  # not held at k, or held for other calls (a scan's) only
            assert ("read at K = " in why or "read for other calls only" in why) and "\n" not in why


@pytest.mark.parametrize("K", [1, 5, 6, 7, 8])
def test_orders_of_8_and_16_threads_one_k_each_are_one_sum_at_small_k(K):
    """At K <= 8, 8 and 16 threads of one k each (halving, or serial) leave threads holding +0, and adding +0 changes
    no sum (tools/library/gemv_orders.canonical_order); the plans give equal bits on random and signed-zero inputs."""
    from tools.library.gemv_orders import canonical_order, plan_raw
    forms = {canonical_order(K, L, 1, tree) for L in (8, 16) for tree in ("halving", "fp32_forward")
             if not (K > 2 and tree == "fp32_forward")}
    assert len(forms) == 1
    spec = {"op": "mm", "a_dtype": "bfloat16", "out_dtype": "bfloat16", "N": 64, "K": K, "batch": 1}
    rng = np.random.default_rng(K)
    a = rng.integers(0, 1 << 16, size=(512, K), dtype=np.uint16)
    a[:64] = 0x8000  # -0 rows: every product -0
    a = np.where((a & 0x7F80) == 0x7F80, np.uint16(0x3F80), a)  # no inf / NaN inputs
    b = np.where(rng.random((K, 512)) < 0.5, np.uint16(0x3F80), np.uint16(0xBF80))
    outs = []
    for L in (8, 16):
        raw = plan_raw(spec, L, 1, "halving", "test")
        plan = plan_from_fields(raw, call_from_entry(raw, [1, 64, K, 1], "test"), "h100", "", "", "test")
        outs.append(np.asarray(evaluate_pairs(plan, a, b)))
    assert (outs[0] == outs[1]).all()


def test_orders_that_differ_in_a_thread_are_not_one_sum():
    from tools.library.gemv_orders import canonical_order
    assert canonical_order(9, 8, 1, "halving") != canonical_order(9, 16, 1, "halving")
    assert canonical_order(64, 8, 1, "halving") != canonical_order(64, 8, 8, "halving")
    assert canonical_order(7, 8, 1, "halving") != canonical_order(7, 8, 1, "fp32_forward")


def test_a_refuted_k_leaves_the_order_table():
    """An order's K that fresh GPU outputs refuted goes to ``not_decided`` with the reason; its other K stay."""
    from tools.library.gemv_orders import drop_refuted
    kernel = "std::enable_if<true, void>::type internal::gemvx::kernel<int, int, __half, float, 8>"
    table = {"orders": [{"kernel": kernel, "block": [4, 64, 1], "K": [64, 128]},
                        {"kernel": kernel, "block": [8, 32, 1], "K": [128]}], "not_decided": []}
    drop_refuted(table, {("std::enable_if<true, void>::type internal::gemvx::kernel", "[4, 64, 1]", 128): "why"})
    assert [(e["block"], e["K"]) for e in table["orders"]] == [([4, 64, 1], [64]), ([8, 32, 1], [128])]
    assert table["not_decided"] == [{"kernel": kernel, "block": [4, 64, 1], "K": [128], "why": "why"}]


REFUTING = {("h200", "h200_catalog_samples_rebuilt.json.gz", "bmm 1x15500x128x1 float16 b_t=1"),
            ("h100", "h100_catalog_samples_newly_answered.json.gz", "bmm 1x13950x128x1 float16 b_t=1"),
            ("h200", "h200_catalog_samples_newly_answered.json.gz", "bmm 1x13610x128x1 float16 b_t=1")}
"""Fresh GPU samples of fp16 decode q.K^T calls on the ``gemvx`` with block [4, 64, 1] at K = 128: the first gave 4 of
128 outputs of another order than the probe's (1 x 6,281 x 128), which took K = 128 out of the order tables."""


def test_the_calls_that_refuted_an_order_are_answered_by_their_launch_words():
    """The refuting call and the two drawn at that kernel, block and K (:data:`REFUTING`) were launched dealing k's one
    by one (stride 4; the probe's call: tiles, stride 1; evidence/library/recordings/<gpu>_attn_families.json.gz), so
    the catalogs answer them with one-by-one dealing now, and their committed fresh samples replay bit-exact."""
    from tcsmt.library.lookup import answer, parse_record_spec
    from tools.library.catalog_samples import replay
    for gpu, name, spec in sorted(REFUTING):
        plan = answer(parse_record_spec(spec), gpu, plans_dirs=()).plan
        assert plan.grain == 1 and plan.split_k == 4 and any("stride 4" in s for s in plan.sources)
        with gzip.open(LIB / name, "rt") as f:
            items = [i for i in json.load(f)["calls"] if i["spec"] == spec]
        got = replay({"calls": items}, gpu)["totals"]
        assert got["bit_exact_calls"] == len(items) == 1 and got["outputs"] == 128, got


def test_a_gemv_plan_and_a_gemv_refusal_name_the_block():
    """``gemv_orders --refuted-by`` finds which order entry a fresh call would take from the block the catalog names
    (``tcsmt.library.gemv_rules.GEMV_BLOCK_NAMED``), in an answered plan's source line (the H200's bf16 ``gemvx`` call of its
    committed fresh samples) and in a refusal's reason (the fp16 call that refuted K = 128, without launch words) alike."""
    from tcsmt.library.gemv_rules import GEMV_BLOCK_NAMED, gemv_orders
    from tcsmt.library.lookup import answer, parse_record_spec
    from tcsmt.library.rules import checked_entry
    plan = answer(parse_record_spec("bmm 1x11948x128x1 bfloat16 b_t=1"), "h200", plans_dirs=()).plan
    blocks = [m.group(1) for s in plan.sources for m in [GEMV_BLOCK_NAMED.search(s)] if m]
    assert len(blocks) == 1 and json.loads(blocks[0])[2] == 1
    kernel = next(k for (k, b) in gemv_orders("h200") if "__half" in k and b == (4, 64, 1))
    entry = {"op": "bmm", "a_dtype": "float16", "out_dtype": "float16", "split_k": 1, "epilogue": [],
             "chain": {"arch": "hopper", "in_fmt": "fp16", "out_fmt": "fp32", "instr": "cublas"},
             "kernels": ["gemv"], "sources": ["test"]}
    why = checked_entry(entry, {}, [1, 15500, 128, 1], [kernel], "h200", "t", blocks=[[4, 64, 1]], b_t=True)["why"]
    assert [m.group(1) for m in [GEMV_BLOCK_NAMED.search(why)] if m] == ["[4, 64, 1]"]


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_refuted_by_judges_the_tables_own_order_not_the_shipped_catalog(gpu, tmp_path):
    """The shipped catalogs refuse the refuting call (fp16 ``gemvx`` [4, 64, 1] at K = 128), so asking them, as
    ``--refuted-by`` did, found nothing to refute and a regenerated table took K = 128 back (2026-11-27, night). Judged
    under the table's own order at that kernel, block and K, the H200's fresh samples refute it again, for either
    GPU's table (the same kernel code)."""
    from tools.library.gemv_orders import refuting
    with gzip.open(REPO / "models" / "library" / f"{gpu}_gemv_orders.json.gz", "rt") as f:
        table = json.load(f)
    kernel = next(e["kernel"] for e in table["not_decided"] if e["block"] == [4, 64, 1] and e["K"] == [128])
    table["orders"].append({"kernel": kernel, "block": [4, 64, 1], "lanes": 4, "lanes_are": "blockDim.x",
                            "grain": "chunk64", "reduce": "halving", "K": [128]})
    with gzip.open(REPO / "evidence" / "library" / "h200_catalog_samples_rebuilt.json.gz", "rt") as f:
        fresh = json.load(f)
    fresh["calls"] = [c for c in fresh["calls"] if c["spec"] == "bmm 1x15500x128x1 float16 b_t=1"]  # the refuting one
    one = tmp_path / "one.json.gz"
    with gzip.open(one, "wt") as f:
        json.dump(fresh, f)
    got = refuting([one], gpu, table)
    assert [(k[1], k[2]) for k in got] == [("[4, 64, 1]", 128)] and "4 of 128 samples differ" in next(iter(got.values()))


def test_refuted_by_a_file_of_another_kind_is_one_line(tmp_path):
    from tools.library.gemv_orders import refuting
    bad = tmp_path / "bad.json.gz"
    with gzip.open(bad, "wt") as f:
        json.dump({"calls": 5}, f)
    with pytest.raises(TcsmtError, match="not a file of tools/device/catalog_sample_run.py"):
        refuting([bad], "h200", {"orders": []})


def _two_level_sizes(K: int, i: int, threads: int = 16, block: int = 32) -> np.ndarray:
    """Subtree sizes of the ``gemv2T_kernel_val`` order the probes of 2026-11-27 revealed beyond K = 512: thread t
    takes k = t mod 16; its k's of each block of 512 (32 a thread) run a chain from +0, the block sums are added to the
    thread's sum in order, and the 16 thread sums meet serially from thread 0."""
    k = np.arange(K)
    lane, pos = k % threads, k // threads
    count = np.bincount(lane, minlength=threads)
    out = np.empty(K, dtype=np.int64)
    for j in range(K):
        if lane[j] != lane[i]:
            out[j] = count[: max(lane[i], lane[j]) + 1].sum()
        elif pos[j] // block == pos[i] // block:
            out[j] = max(pos[i], pos[j]) + 1 - block * (pos[i] // block)
        else:
            out[j] = min(count[lane[i]], block * (max(pos[i], pos[j]) // block + 1))
    out[i] = -1
    return out


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_gemv2T_beyond_512_sums_each_threads_blocks_apart(gpu):
    """GPT-2's and BERT's LM heads at M = 1 (``gemv2T_kernel_val``, block [128, 1, 1]) at K = 768 and 1024, and the
    other probed K above 512 (evidence/library/<gpu>_gemv_probes_ends.json.gz, 2026-11-27): every revealed row is the
    two-level order of :func:`_two_level_sizes`, which the order tool's rows with restarts every 32 of a thread's k's
    give too (``subtree_sizes(..., segment=32)``, the plan field ``segment``), and none is the single chain per thread
    that the order table held at K = 128 before."""
    with gzip.open(REPO / "evidence" / "library" / f"{gpu}_gemv_probes_ends.json.gz", "rt") as f:
        results = [r for r in json.load(f)["results"] if "gemv2T_kernel_val" in r["kernels"][0]["name"]
                   and r["spec"]["K"] > 512]
    from tools.library.gemv_orders import subtree_sizes
    ks = set()
    for r in results:
        K = r["spec"]["K"]
        rows = revealed(r)
        assert rows
        assert all((_two_level_sizes(K, i) == v).all() for i, v in rows.items()), (K, r["spec"]["N"])
        assert all((subtree_sizes(K, 16, 1, "fp32_forward", i, 32) == v).all() for i, v in rows.items())
        assert not all((subtree_sizes(K, 16, 1, "fp32_forward", i) == v).all() for i, v in rows.items())
        ks.add(K)
    assert {768, 1024} <= ks
