"""A ``gemvx`` kernel deals k's to its threads as each call's shape decides: GEMV scans on the GPU
(tools/device/gemv_scan.py; evidence/library/<gpu>_gemv_scan_*.json.gz, read by tools/library/gemv_scan_fit.py), the
order tables' calls (models/library/<gpu>_gemv_orders.json.gz, tools/library/gemv_orders.py --scan) and the catalog
rule that applies such an order to the calls it was read on only (tcsmt.library.gemv_gemv_rules.dealt_per_call)."""
from __future__ import annotations

import base64
import gzip
import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from tcsmt.library.gemv_rules import gemv_orders
from tcsmt.library.rules import checked_entry
from tools.device.gemv_probes import ONE, windowed_params
from tools.device.gemv_scan import scan_params
from tools.library.gemv_orders import candidates, canonical_order, gemv_grain, lane_counts
from tools.library.gemv_scan_fit import add_scans, fitting, read_scans, window_counts

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "evidence" / "library"
BF16_16x32 = "__nv_bfloat16, float, false, true, false, false, 9, false"
"""The bf16 ``gemvx`` variant of the scans' example (block [16, 32, 1]), as its name's template arguments read."""


@cache
def scans(name: str) -> list[dict]:
    return read_scans([LIB / name])


def scanned(name: str, op: str, batch: int, N: int, K: int, variant: str) -> dict:
    for r in scans(name):
        s = r["spec"]
        ks = r.get("kernels") or []
        if (s["op"], s["batch"], s["N"], s["K"]) == (op, batch, N, K) and len(ks) == 1 and variant in ks[0]["name"]:
            return r
    raise AssertionError(f"no scan of {op} {batch} x 1 x {K} x {N} on {variant} in {name}")


def entry(dt: str) -> dict:
    fmt = {"bfloat16": "bf16", "float16": "fp16"}[dt]
    return {"op": "bmm", "a_dtype": dt, "out_dtype": dt, "split_k": 1, "epilogue": [],
            "chain": {"arch": "hopper", "in_fmt": fmt, "out_fmt": "fp32", "instr": "cublas"},
            "kernels": ["gemv"], "sources": ["test"]}


@pytest.mark.slow  # recomputes every committed probe window: run with -m slow when the GEMV rules or probes change
def test_window_counts_are_the_committed_probe_outputs():
    """The integer logic the scans are judged by gives every output of the committed random-probe launches
    (evidence/library/h100_gemv_probes_range.json.gz) under the order their revealed rows fit."""
    with gzip.open(LIB / "h100_gemv_probes_range.json.gz", "rt") as f:
        results = json.load(f)["results"]
    checked = 0
    for r in results:
        ks = r.get("kernels") or []
        if len(ks) != 1 or "gemvx" not in ks[0]["name"] or not r.get("reveal") or r["spec"]["K"] < 3:
            continue
        s, K = r["spec"], r["spec"]["K"]
        axis, rule, tree, seg = candidates(r)[0]
        L = lane_counts(ks[0])[axis]
        for w in r["windowed"]:
            got = np.frombuffer(base64.b64decode(w["out"]), np.uint16)
            vals = ((got.astype(np.uint32) << 16).view(np.float32) if s["a_dtype"] == "bfloat16"
                    else got.view(np.float16).astype(np.float32))
            i, j, w0, n = (x[:len(got)] for x in windowed_params(w["seed"], K, s["batch"] * s["N"]))
            want = window_counts(K, L, gemv_grain(rule, K, L), tree, seg, i, j, w0, n)
            assert (np.round(vals / ONE[s["a_dtype"]]).astype(np.int64) == want).all()
            checked += len(got)
    assert checked > 10_000


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_one_kernel_block_and_k_deal_by_shape(gpu):
    """The bf16 ``gemvx`` with block [16, 32, 1] at K = 426: the order table's probe (12 x 1 x 426 x 64,
    evidence/library/<gpu>_gemv_probes_range.json.gz) deals tiles of 14 k's; the table scan of the recorded call
    24 x 1 x 426 x 64 on the same GPU (<gpu>_gemv_scan_table.json.gz) fits single k's dealt round-robin and not the
    table's order."""
    r = scanned(f"{gpu}_gemv_scan_table.json.gz", "bmm", 24, 64, 426, BF16_16x32)
    fits = fitting(r, r["kernels"][0])
    assert {(c[1], c[2]) for c, _f in fits} == {("1", "halving")}
    probed = [e for (k, b), es in gemv_orders(gpu).items() for e in es
              if BF16_16x32 in k and b == (16, 32, 1) and 426 in e["K_probed"]]
    assert [e["grain"] for e in probed] == ["chunk64"]
    tiles = canonical_order(426, 32, gemv_grain("chunk64", 426, 32), "halving")
    assert tiles not in {f for _c, f in fits}


def test_a_dealt_order_applies_to_the_calls_it_was_read_on():
    """The catalog rule: the probed call 12 x 1 x 426 x 64 gets the probed order (tiles of min(64, ceil(426/32)) =
    14), the scanned call 24 x 1 x 426 x 64 the scanned one (single k's), and a call of the same kernel, block and K
    that neither read (20 batches) is refused in one line that says why."""
    kernel = next(k for (k, b) in gemv_orders("h100") if BF16_16x32 in k and b == (16, 32, 1))

    def at(batch: int) -> dict:
        return checked_entry(entry("bfloat16"), {}, [1, 64, 426, batch], [kernel], "h100", "t", blocks=[[16, 32, 1]])
    assert at(12)["grain"] == 14 and at(24)["grain"] == 1
    other = at(20)
    assert "read for other calls only" in other["why"] and "\n" not in other["why"]


def test_a_call_that_probes_and_scans_read_differently_leaves_the_table():
    """add_scans: a scanned call whose single fitting order is not the probes' order for that call is taken out of
    every entry and listed in not_decided (counts made by the integer logic under single-k dealing)."""
    kernel = {"name": "void internal::gemvx::kernel<int, int, float>(x)", "block": [16, 32, 1]}
    K, call = 426, "426 bmm 4 1 64 0 0"
    probe = {"kernel": kernel["name"], "block": [16, 32, 1], "lanes": 32, "lanes_are": "blockDim.y",
             "grain": "chunk64", "reduce": "halving", "K": [K], "calls": [call]}
    i, j, w0, n = (x[:64] for x in scan_params(7, K, 4 * 64))
    counts = window_counts(K, 32, 1, "halving", 0, i, j, w0, n).astype(np.uint8)
    scan = {"spec": {"op": "bmm", "batch": 4, "N": 64, "K": K, "M": 1, "b_t": False, "bias": False}, "seed": 7,
            "rows": 1, "kernels": [kernel], "counts": base64.b64encode(counts.tobytes()).decode()}
    table = {"orders": [probe], "not_decided": []}
    got = add_scans(table, [scan], "test")
    assert got["calls where probes and scans disagree"] == 1
    assert all(call not in e["calls"] for e in table["orders"])
    assert [x["call"] for x in table["not_decided"]] == [call]


def test_scanned_calls_join_the_tables():
    """Each GPU's order table holds calls that scans read (``calls_scanned``), among them the scanned call above."""
    for gpu in ("h100", "h200"):
        es = [e for v in gemv_orders(gpu).values() for e in v if e.get("calls_scanned")]
        assert es and all(set(e["K"]) == {int(c.split()[0]) for c in e["calls"]} for e in es)
        assert any("426 bmm 24 1 64 0 0" in e["calls"] and e["grain"] == "1" for e in es)
