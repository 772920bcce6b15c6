"""A ``gemvx`` launch says how it deals k's to its threads: two int32 words of its parameter struct
(``tcsmt.hwcheck.gemv_launch.GEMV_PARAMS``), read on the GPU by ``tools/device/gemv_params.py``
(``evidence/library/<gpu>_gemv_params.json.gz``: 1,657 launches of the scanned calls per GPU) and recorded by the plan
recorder (``gemv_dealing``, ``evidence/library/recordings/<gpu>_attn_families.json.gz``); the catalog rule that gives a
call with recorded launch parameters its order at any K (``tcsmt.library.gemv_rules.dealt_order``)."""
from __future__ import annotations

import gzip
import json
import struct
from functools import cache
from pathlib import Path

import pytest

from tcsmt.hwcheck.gemv_launch import GEMV_DEALING_AT, GEMV_PARAMS, GEMV_PARAMS_BYTES
from tcsmt.library.catalog_build import convert_one
from tcsmt.library.families import kernel_key
from tcsmt.library.gemv_rules import dealt_order, gemv_orders
from tcsmt.library.recordings import read_recording, recorded_calls
from tcsmt.library.rules import checked_entry, make_context
from tools.library.gemv_orders import lane_counts
from tools.library.gemv_scan_fit import fitting, read_scans

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "evidence" / "library"


@cache
def launches(gpu: str) -> list[dict]:
    """Each launch of ``<gpu>_gemv_params.json.gz`` with its kernel's full name, block and dealing words."""
    with gzip.open(LIB / f"{gpu}_gemv_params.json.gz", "rt") as f:
        data = json.load(f)
    out = []
    for r in data["results"]:
        (k,) = r["kernels"]
        (param,) = k["params"]
        raw = bytes.fromhex(param[2])
        assert param[1] == GEMV_PARAMS_BYTES == len(raw)
        words = [struct.unpack_from("<i", raw, at)[0] for at in GEMV_DEALING_AT]
        out.append({"spec": r["spec"], "name": data["kernel_names"][k["name"]], "block": k["block"], "dealing": words})
    return out


def spec_key(s: dict) -> str:
    return json.dumps({k: s[k] for k in ("op", "batch", "N", "K", "M", "b_t", "bias", "a_dtype")}, sort_keys=True)


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_launch_words_are_a_tile_and_one_of_two_strides(gpu):
    """Every read launch is the one struct, its tile min(64, ceil(K/L)) and its stride 1 or L (L the threads the
    order table names for its kernel and block), both dealings occurring; operand offsets (1, 8, 3 and 5 elements
    into a buffer) change no word but the pointers (the 200 offset launches)."""
    seen, base = set(), {}
    for x in launches(gpu):
        assert GEMV_PARAMS in x["name"]
        lanes = set(lane_counts({"name": "", "block": x["block"]}).values())
        K = x["spec"]["K"]
        tile, stride = x["dealing"]
        L = next(v for v in lanes if tile == min(64, -(-K // v)) and stride in (1, v))
        seen.add("tiles" if stride == 1 and L < K else "one by one" if L < K else "either")
        key = spec_key(x["spec"])
        if "offset_a" in x["spec"]:
            assert x["dealing"] == base[key]
        else:
            base[key] = x["dealing"]
    assert {"tiles", "one by one"} <= seen and len(base) > 1400


def test_both_gpus_launch_the_same_words():
    """The H100 and the H200 run the same kernel, block and dealing for each of the 1,657 read calls."""
    a, b = launches("h100"), launches("h200")
    assert [(x["name"], x["block"], x["dealing"]) for x in a] == [(x["name"], x["block"], x["dealing"]) for x in b]


@cache
def scanned() -> list[dict]:
    return read_scans([*sorted(LIB.glob("h1*_gemv_scan_*.json.gz")), LIB / "h200_gemv_scan_table.json.gz"])


@pytest.mark.parametrize("gpu", ["h100", pytest.param("h200", marks=pytest.mark.slow)])
def test_the_launch_dealing_orders_fit_the_scans(gpu):
    """For scanned ``gemvx`` calls of every kernel and block, the order :func:`dealt_order` makes from the table's
    threads and tree and the launch's words predicts every kept count of the call's scan on that GPU (64 probes a
    call; every 16th H100 and 8th H200 call here, all 1,953 in the study of 2026-11-27)."""
    words = {spec_key({**x["spec"], "a_dtype": x["spec"]["a_dtype"]}): x for x in launches(gpu)
             if "offset_a" not in x["spec"]}
    name = "NVIDIA H100 80GB HBM3" if gpu == "h100" else "NVIDIA H200"
    checked, kernels, step = 0, set(), 16 if gpu == "h100" else 8
    for n, r in enumerate(x for x in scanned() if x["gpu"] == name):
        ks = r.get("kernels") or []
        if n % step or len(ks) != 1 or "gemvx" not in ks[0]["name"] or r.get("skipped") or r.get("error"):
            continue
        x = words.get(spec_key({**r["spec"], "M": r["spec"].get("M", 1)}))
        read = gemv_orders(gpu).get((kernel_key(ks[0]["name"]), tuple(ks[0]["block"])), [])
        if x is None or not read or not fitting(r, ks[0]):
            continue  # a call no launch read, or one no candidate order fits
        K = int(r["spec"]["K"])
        e, g, why = dealt_order(read, K, x["dealing"], "t")
        assert not why, why
        fits = fitting(r, ks[0])
        rule = "chunk64" if g > 1 or K <= int(e["lanes"]) else "1"
        assert any(c[0] == e["lanes_are"] and c[2] == e["reduce"] and c[3] == int(e.get("segment", 0))
                   and (c[1] == rule or K <= int(e["lanes"])) for c, _f in fits), (r["spec"], x["dealing"])
        checked += 1
        kernels.add((ks[0]["name"], tuple(ks[0]["block"])))
    assert checked > 40 and len(kernels) > 8


def test_other_launch_words_are_refused():
    """A tile other than min(64, ceil(K/L)) or a stride other than 1 or L is refused in one line."""
    read = next(es for (k, b), es in gemv_orders("h100").items() if "gemvx" in k and b == (16, 32, 1))
    _e, g, why = dealt_order(read, 426, [14, 32], "the kernel")
    assert not why and g == 1
    assert dealt_order(read, 426, [14, 1], "the kernel")[1] == 14
    for bad in ([13, 1], [14, 2], [14], None):
        why = dealt_order(read, 426, bad, "the kernel")[2]
        assert why and "\n" not in why


@cache
def decode_calls(gpu: str) -> list[tuple[dict, str, int, list, dict]]:
    rec = read_recording(LIB / "recordings" / f"{gpu}_attn_families.json.gz")
    out = []
    for tmpl, vary, ts, pid in recorded_calls(rec):
        plan = rec["tables"]["plans"][pid]
        if len(plan) > 10 and plan[10] and plan[10][0] and tmpl["M"] == 1:
            dims = "".join(d for d in "MNK" if tmpl[d] == vary)  # the sequence length fills them (as catalog_build)
            tmpl = {**tmpl, **dict.fromkeys(dims)}
            out.append((tmpl, dims, ts[len(ts) // 2], plan, rec["tables"]))
    return out


@pytest.mark.parametrize("gpu", ["h100", pytest.param("h200", marks=pytest.mark.slow)])
def test_recorded_launches_answer_decode_calls(gpu):
    """The re-recorded attention families carry each ``gemvx`` launch's words; converted, a decode call takes the
    order they give (its source says so), and the same call without them falls back to the probed calls only."""
    ctx, _srcs, probed = make_context(gpu)
    calls = decode_calls(gpu)
    assert len(calls) > 50
    answered = 0
    for tmpl, vary, t, plan, tables in calls[::max(1, len(calls) // 12)]:
        got = convert_one(ctx, "rec", tmpl, vary, t, plan, tables, probed)
        assert got is not None
        if "why" in got:
            continue
        answered += 1
        assert "launch parameters say" in got["sources"][-1]
        tile, stride = plan[10][0]
        assert got["grain"] == (tile if stride == 1 else 1) or int(tmpl["K"] or t) <= got["split_k"]
        plain = convert_one(ctx, "rec", tmpl, vary, t, plan[:10], tables, probed)
        assert plain is not None and ("why" in plain or "launch parameters" not in plain["sources"][-1])
    assert answered > 4


def test_a_decode_call_is_answered_with_its_recorded_words():
    """An fp16 decode q K^T (32 x 1 x 128 x 777 on the gemvx with block [4, 64]) is refused without launch words
    (K = 128 was taken out of that entry: a fresh H200 call at N = 15,500 gave 4 of 128 outputs of another order than
    the probe at N = 6,281, the two dealings) and answered under its recorded words."""
    kernel = next(k for (k, b) in gemv_orders("h100") if "__half" in k and b == (4, 64, 1))
    entry = {"op": "bmm", "a_dtype": "float16", "out_dtype": "float16", "split_k": 1, "epilogue": [],
             "chain": {"arch": "hopper", "in_fmt": "fp16", "out_fmt": "fp32", "instr": "cublas"},
             "kernels": ["gemv"], "sources": ["test"]}
    args = (entry, {}, [1, 777, 128, 32], [kernel], "h100", "t")
    assert "K order of the gemvx kernel" in checked_entry(*args, blocks=[[4, 64, 1]], b_t=True)["why"]
    tiles = checked_entry(*args, blocks=[[4, 64, 1]], b_t=True, dealing=[[32, 1]])  # 4 threads (blockDim.x)
    assert tiles["grain"] == 32 and tiles["split_k"] == 4 and "tile 32, stride 1" in tiles["sources"][-1]
    assert checked_entry(*args, blocks=[[4, 64, 1]], b_t=True, dealing=[[32, 4]])["grain"] == 1
    assert "not one of the two dealings" in checked_entry(*args, blocks=[[4, 64, 1]], b_t=True, dealing=[[2, 1]])["why"]


def test_the_launch_words_are_read_from_the_one_struct_parameter():
    """:func:`tcsmt.hwcheck.gemv_launch.gemv_dealing` on a node's parameters as the driver hands them (a param-info
    function giving offsets and sizes, ``kernelParams`` an array of pointers): the words at bytes 140 and 144 of a
    single 152-byte parameter; None for two parameters, another size, or no driver function."""
    import ctypes

    from tcsmt.hwcheck.gemv_launch import gemv_dealing, kernel_params

    def node(sizes: list[int]) -> tuple[object, int, object]:
        bufs = [ctypes.create_string_buffer(n) for n in sizes]
        struct.pack_into("<ii", bufs[0], 140, 27, 32) if sizes[0] >= 148 else None
        ptrs = (ctypes.c_void_p * len(bufs))(*[ctypes.addressof(b) for b in bufs])

        def info(_handle, i, off, size):
            if i >= len(sizes):
                return 1  # CUDA_ERROR_INVALID_VALUE
            off._obj.value, size._obj.value = sum(sizes[:i]), sizes[i]
            return 0
        return info, ctypes.addressof(ptrs), (bufs, ptrs)

    info, params, _keep = node([152])
    assert gemv_dealing(info, 1, params) == [27, 32]
    assert [(o, n) for o, n, _raw in kernel_params(info, 1, params) or []] == [(0, 152)]
    for sizes in ([152, 8], [148]):
        info, params, _keep = node(sizes)
        assert gemv_dealing(info, 1, params) is None
    assert gemv_dealing(None, 1, params) is None
