"""The host rule of cuBLAS's tf32 ``segment_k_on`` kernels (:mod:`tcsmt.library.segment_k`) against its evidence: the
launch parameters of 283 captured H100 calls (``evidence/library/h100_segment_k_params.json.gz``) and every kept
output of the 156 swamping-probed H100 calls (``h100_segment_k_probes.json.gz``, ``h100_segment_k_probes_more.json.gz``;
the probe: ``tools/device/segment_k_probe.py``) and of 473 H200 calls, one or more of every recorded launch form and
of every recorded way the split tiles end in the narrower last swizzle panels (``h200_segment_k_probes_forms.json.gz``,
``h200_segment_k_probes_tails.json.gz``, ``h200_segment_k_probes_large.json.gz``: the forms whose calls were all
larger than the first list took; their launches in ``h200_segment_k_params_{forms,tails,large}.json.gz``)."""
from __future__ import annotations

import base64
import gzip
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tcsmt.library.lookup import parse_record_spec
from tcsmt.library.segment_k import (
    PARAMS_BYTES,
    SegmentKLaunch,
    Tree,
    cluster_tile_order,
    kernel_m_is_torch_rows,
    launch_words,
    panels,
    reduction_tree,
    segment_ends,
    split_tiles,
)
from tools.device.segment_k_probe import L_EXP, probe_x
from tools.device.segment_k_tree_probe import probe_px

LIB = Path(__file__).resolve().parents[1] / "evidence" / "library"
PROBES = (("h100_segment_k_probes.json.gz", "h100_segment_k_params.json.gz"),
          ("h100_segment_k_probes_more.json.gz", "h100_segment_k_params.json.gz"),
          ("h100_segment_k_probes_fresh.json.gz", "h100_segment_k_params_fresh.json.gz"),
          ("h200_segment_k_probes_forms.json.gz", "h200_segment_k_params_forms.json.gz"),
          ("h200_segment_k_probes_tails.json.gz", "h200_segment_k_params_tails.json.gz"),
          ("h200_segment_k_probes_large.json.gz", "h200_segment_k_params_large.json.gz"))
"""(probes, the launches of its calls); the fresh calls were drawn at random after the rule was committed; the H200's
forms and tails calls (``tools/library/segment_k_form_list.py``) were probed after a fresh call refuted the first cut
of the last swizzle panels (one panel of the left-over), and read the cut of :func:`tcsmt.library.segment_k.panels`."""
SPLIT_CALLS = {"h100_segment_k_probes.json.gz": 60, "h100_segment_k_probes_more.json.gz": 46,
               "h100_segment_k_probes_fresh.json.gz": 10, "h200_segment_k_probes_forms.json.gz": 330,
               "h200_segment_k_probes_tails.json.gz": 73,
               "h200_segment_k_probes_large.json.gz": 70}


def _read(name: str) -> dict[str, Any]:
    with gzip.open(LIB / name, "rt") as f:
        return json.load(f)


@cache
def captures(name: str = "h100_segment_k_params.json.gz") -> dict[str, dict[str, Any]]:
    """spec -> the captured ``segment_k_on`` launch: kernel name, grid, cluster, words."""
    doc = _read(name)
    out = {}
    for r in doc["results"]:
        for node in r.get("nodes", []):
            name = doc["kernel_names"][node["name"]] if node["node"] == "kernel" else ""
            if "segment_k_on" in name:
                (param,) = node["params"]
                assert param[1] == PARAMS_BYTES
                out[r["spec"]] = {"name": name, "grid": node["grid"], "cluster": node["cluster"],
                                  "words": launch_words(bytes.fromhex(param[2]))}
    return out


def launch_of(cap: dict[str, Any]) -> SegmentKLaunch:
    w = cap["words"]
    tm, tn = map(int, re.search(r"tilesize(\d+)x(\d+)x", cap["name"]).groups())
    return SegmentKLaunch(m=w["m"], n=w["n"], k=w["k"], tile_m=tm, tile_n=tn, grid_x=cap["grid"][0],
                          grid_y=cap["grid"][1], cluster_x=w["cluster_cols"], segments=w["segments"],
                          swizzle_log=w["swizzle_log"], raster_along_m=w["raster_along_m"] == 1)


@pytest.mark.parametrize("params, n", [("h100_segment_k_params.json.gz", 159), ("h100_segment_k_params_fresh.json.gz", 10)])
def test_launch_words_follow_the_grid_and_the_shape(params, n):
    """On all 170 captured launches: the problem words are the call's, the cluster is (word 10, grid y), the tile
    counts, split tiles, units and segment lengths are the rule's, and the probed specs are all among them."""
    caps = captures(params)
    assert len(caps) == n  # the first file: 160 launches, mm 256x4096x4096 captured twice (two sweeps)
    for spec, cap in caps.items():
        call, w, la = parse_record_spec(spec), cap["words"], launch_of(cap)
        layout = re.search(r"_f32_(\w\w)_n_tilesize", cap["name"]).group(1)
        rows_first = kernel_m_is_torch_rows(layout)
        assert (w["m"], w["n"], w["k"]) == ((call.M, call.N) if rows_first else (call.N, call.M)) + (call.K,)
        assert cap["cluster"] == [w["cluster_cols"], cap["grid"][1], 1] == [la.cluster_x, la.grid_y, 1]
        assert la.cluster_tiles == (w["cluster_tile_rows"], w["cluster_tile_cols"])
        rows, cols = la.cluster_tiles
        cl = la.grid_y * la.cluster_x
        assert w["padded_tiles"] == rows * cols * cl and w["k_iterations"] == la.k_iterations
        split = rows * cols % (la.grid_x // la.cluster_x)
        assert w["split_tiles"] == split * cl and w["whole_tiles"] == w["padded_tiles"] - w["split_tiles"]
        assert (split == 0) == (w["segments"] == 1) and la.split_cluster_tiles == (split if w["segments"] > 1 else 0)
        assert w["units"] == w["split_tiles"] * w["segments"]
        assert (w["segment_iterations"], w["longer_segments"]) == divmod(la.k_iterations, w["segments"])
    specs = {r["spec"] for r in _read(params)["results"]}
    for name, of in PROBES:
        assert of != params or {c["spec"] for c in _read(name)["calls"]} <= specs


def test_order_and_tree_small_cases():
    assert cluster_tile_order(2, 3, 0, True) == [(0, 0), (0, 1), (0, 2), (1, 2), (1, 1), (1, 0)]
    assert cluster_tile_order(3, 2, 1, True) == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 1), (2, 0)]
    assert cluster_tile_order(2, 3, 1, False) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (0, 2)]
    assert reduction_tree(3) == (0, (1, 2)) and reduction_tree(4) == ((0, 1), (2, 3))


def test_the_left_over_of_the_swizzle_panels_is_cut_as_the_h200_probes_read():
    """The cluster rows (or columns) left after the whole panels: one panel where fewer than 4 are left, else panels of
    the largest power of two that fits.  Cases of the probed H200 calls (``h200_segment_k_probes_tails.json.gz``):
    ``linear 7888x2560x4096`` (31 rows, W = 4: 3 left, one panel; H100 probes), ``mm 13824x5120x977`` A transposed (54
    rows, W = 8: 4 + 2), ``linear 8712x4096x2560`` (69 rows, W = 8: 4 + 1), ``mm 11008x4096x12640`` A transposed (86, W =
    16: 4 + 2), ``mm 25600x5120x1488`` A transposed (200, W = 16: one panel of 8), ``mm 32000x4096x977`` A transposed
    (250, W = 16: 8 + 2); ``linear 6408x3072x3072`` (51, W = 8: 3 left, one panel)."""
    assert panels(31, 2)[-1] == (28, 3) and len(panels(31, 2)) == 8
    assert panels(54, 3)[-3:] == [(40, 8), (48, 4), (52, 2)]
    assert panels(69, 3)[-2:] == [(64, 4), (68, 1)]
    assert panels(86, 4)[-3:] == [(64, 16), (80, 4), (84, 2)]
    assert panels(200, 4)[-1] == (192, 8)
    assert panels(250, 4)[-2:] == [(240, 8), (248, 2)]
    assert panels(51, 3)[-1] == (48, 3)
    assert [w for _, w in panels(15, 4)] == [8, 4, 3] and panels(7, 0) == [(i, 1) for i in range(7)]
    assert reduction_tree(11) == ((0, (1, 2)), (((3, 4), (5, 6)), ((7, 8), (9, 10))))
    assert segment_ends(2560, 3) == [832, 1696, 2560] and segment_ends(2776, 11)[:3] == [224, 480, 736]


def _partial(lo: int, hi: int, p: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The fp32 sum of a probe row's products at k in [lo, hi): one per 8-k block, +L at p, -L at x (p < x), else 1
    (a sum meeting +-L loses its 1s: they stay below half its unit)."""
    big = np.float32(2.0 ** L_EXP)
    a8, b8, p8, x8 = -(-lo // 8), -(-hi // 8), p // 8, x // 8
    has_p, has_x = (a8 <= p8) & (p8 < b8), (a8 <= x8) & (x8 < b8)
    ones = np.where(has_x, -big, np.float32(b8 - a8))
    return np.where(has_p, np.where(has_x, (b8 - x8 - 1).astype(np.float32), big), ones).astype(np.float32)


def _join(tree: Tree, parts: list[np.ndarray]) -> np.ndarray:
    if isinstance(tree, int):
        return parts[tree]
    return (_join(tree[0], parts) + _join(tree[1], parts)).astype(np.float32)


def expected(item: dict[str, Any], cap: dict[str, Any] | None, p: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, int]:
    """(the kept outputs the rule gives a probed call, as fp32 bit patterns; how many of them lie in split tiles)."""
    call = parse_record_spec(item["spec"])
    cols = np.asarray(item["cols"])
    want = np.repeat((-(-call.K // 8) - 1 - x // 8).astype(np.float32)[:, None], len(cols), axis=1)
    if cap is None or cap["words"]["segments"] == 1:
        return want.view(np.uint32), 0
    la = launch_of(cap)
    assert cap["name"] in item["kernels"]
    ends = [0, *segment_ends(la.k, la.segments)]
    cut = _join(reduction_tree(la.segments), [_partial(ends[u], ends[u + 1], p, x) for u in range(la.segments)])
    layout = re.search(r"_f32_(\w\w)_n_tilesize", cap["name"]).group(1)
    rows_i = np.arange(call.M)
    if kernel_m_is_torch_rows(layout):
        ti, tj = (rows_i // la.tile_m)[:, None], (cols // la.tile_n)[None, :]
    else:
        ti, tj = (cols // la.tile_m)[None, :], (rows_i // la.tile_n)[:, None]
    key = np.broadcast_to(ti * 1_000_000 + tj, want.shape)
    mask = np.isin(key, [i * 1_000_000 + j for i, j in split_tiles(la)])
    want[mask] = np.broadcast_to(cut[:, None], want.shape)[mask]
    return want.view(np.uint32), int(mask.sum())


def _got(item: dict[str, Any]) -> np.ndarray:
    M = parse_record_spec(item["spec"]).M
    return np.frombuffer(gzip.decompress(base64.b64decode(item["out"])), dtype=np.uint32).reshape(M, -1)


@pytest.mark.parametrize("probes, params", PROBES)
def test_the_rule_gives_every_probed_output(probes, params):
    """Each kept output of each probed call: one K-chain's count outside the split tiles, the tree of the segments'
    partials inside (:mod:`tcsmt.library.segment_k`), bit for bit; calls on other kernels or with S = 1: one K-chain.
    The rule splits tiles in all 60 first probes (in `linear 6x3584x3584` and `mm 18x25600x5120` every probe row
    puts its -L in segment 0, so the split shows in no output) and in 46 of the 96 sweep calls.  Of the 80 fresh
    calls, the 10 on ``segment_k_on`` kernels are judged (the others ran CUTLASS split-K or ``segment_k_off``)."""
    caps, n_split = captures(params), 0
    for item in _read(probes)["calls"]:
        if ("fresh" in probes or "h200" in probes) and item["spec"] not in caps:
            continue
        call = parse_record_spec(item["spec"])
        want, in_split = expected(item, caps.get(item["spec"]), np.zeros(call.M, dtype=np.int64), probe_x(call.M, call.K))
        n_split += bool(in_split)
        np.testing.assert_array_equal(_got(item), want, err_msg=item["spec"])
    assert n_split == SPLIT_CALLS[probes]


def test_the_tree_gives_every_tree_probe_output():
    """+L and -L anywhere in K (``tools/device/segment_k_tree_probe.py``, 15 calls of S = 2 .. 16): every kept output
    is the rule's; in the split tiles the rows' pairs of segments (p, x) cover 790 of the 827 pairs, so the join is
    read inside subtrees without segment 0 too; a serial join (segment 0 first) misses outputs of every call of
    S > 2."""
    caps, serial_misses = captures(), 0
    for item in _read("h100_segment_k_tree_probes.json.gz")["calls"]:
        call = parse_record_spec(item["spec"])
        p, x = probe_px(call.M, call.K)
        want, in_split = expected(item, caps[item["spec"]], p, x)
        assert in_split
        np.testing.assert_array_equal(_got(item), want, err_msg=item["spec"])
        la = launch_of(caps[item["spec"]])
        if la.segments > 2:
            chain = tuple(range(la.segments))
            serial: Tree = chain[0]
            for u in chain[1:]:
                serial = (serial, u)
            ends = [0, *segment_ends(la.k, la.segments)]
            parts = [_partial(ends[u], ends[u + 1], p, x) for u in range(la.segments)]
            serial_misses += bool((_join(serial, parts) != _join(reduction_tree(la.segments), parts)).any())
    assert serial_misses == 14
