"""The Hopper model against output bits recorded on real GPUs (no GPU needed here).

Sources (all committed under evidence/, produced by tools/device/device_runs.sh):
- ``h100_rows_*.json``: rows of H100 library GEMMs (cuBLAS 13.1.0.3 through torch
  2.11.0+cu130, driver 580.159.04) with the GPU's output bits in ``device``;
  each file names the hypotheses that the rows were drawn to refute.
- ``h200_hopper_final_k64.json``: the three K = 64 counterexamples that the
  H200 run of the previous model left open (one subnormal ulp each).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tcsmt.arith.formats import get_format
from tcsmt.arith.registry import resolve
from tcsmt.sim.simulator import simulate_params

RESULTS = Path(__file__).resolve().parent.parent / "evidence"
ROW_FILES = sorted(RESULTS.glob("h100_rows_*.json"))


def _rows(doc: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    fin, fc, fo = get_format(doc["in_fmt"]), get_format(doc["out_fmt"]), get_format(doc["out_fmt"])
    a = np.array([[int(x, 16) for x in r["a"]] for r in doc["inputs"]], dtype=fin.dtype)
    b = np.array([[int(x, 16) for x in r["b"]] for r in doc["inputs"]], dtype=fin.dtype)
    c = np.array([int(r["c"], 16) for r in doc["inputs"]], dtype=fc.dtype)
    d = np.array([int(r["device"], 16) for r in doc["inputs"]], dtype=fo.dtype)
    return a, b, c, d


def _simulate(spec: str, doc: dict, a, b, c) -> np.ndarray:
    return simulate_params(resolve(spec, doc["in_fmt"], doc["out_fmt"], doc["instr"]), a, b, c)


def test_row_files_are_there():
    assert len(ROW_FILES) >= 5, f"expected the committed H100 row files in {RESULTS}"


@pytest.mark.parametrize("path", ROW_FILES, ids=[p.stem for p in ROW_FILES])
def test_hopper_model_reproduces_every_recorded_row(path):
    doc = json.loads(path.read_text())
    a, b, c, d = _rows(doc)
    got = _simulate("hopper", doc, a, b, c)
    bad = np.nonzero(got != d)[0]
    assert bad.size == 0, f"{path.name}: row {bad[0]} GPU {int(d[bad[0]]):#x}, model {int(got[bad[0]]):#x}"


@pytest.mark.parametrize("path", ROW_FILES, ids=[p.stem for p in ROW_FILES])
def test_named_alternatives_are_refuted_by_the_rows(path):
    """Each hypothesis the file names besides the model misses some of the GPU's rows."""
    doc = json.loads(path.read_text())
    a, b, c, d = _rows(doc)
    alternatives = [m for m in doc["models"] if m != "hopper"]
    assert alternatives
    for spec in alternatives:
        wrong = int((_simulate(spec, doc, a, b, c) != d).sum())
        assert wrong > 0, f"{spec} fits every row of {path.name}"
    if path.stem.endswith("_floor"):  # these rows were selected as the floor-less model's misses
        assert int((_simulate("hopper:no_floor", doc, a, b, c) != d).sum()) == len(d)


def test_open_k64_rows_of_the_h200_run_now_fit():
    """The 3 subnormal K = 64 rows the previous Hopper model missed (tf32 mma 2, bf16 mma 1)."""
    doc = json.loads((RESULTS / "h200_hopper_final_k64.json").read_text())
    seen = 0
    for p in doc["paths"]:
        for r in p.get("results", []):
            for m in r["models"]:
                for ex in m["counterexamples"]:
                    fin, fo = get_format(p["in_fmt"]), get_format(p["out_fmt"])
                    a = np.array([[int(x, 16) for x in ex["a"]]], dtype=fin.dtype)
                    b = np.array([[int(x, 16) for x in ex["b"]]], dtype=fin.dtype)
                    c = np.array([int(ex["c"], 16)], dtype=fo.dtype)
                    for spec, want_match in (("hopper", True), ("hopper:no_floor", False)):
                        got = int(simulate_params(resolve(spec, p["in_fmt"], p["out_fmt"], p["instr"]), a, b, c)[0])
                        assert (got == int(ex["gpu"], 16)) == want_match, (spec, p["path"], ex["gpu"], hex(got))
                    seen += 1
    assert seen == 3


def _tile(name: str):
    from tcsmt.hwcheck.device import expand_tiles

    z = np.load(RESULTS / name)
    aa, bb, cc = expand_tiles(z["a"], z["b"], z["c"])
    return aa, bb, cc, z["d"].reshape(-1)


@pytest.mark.parametrize("in_fmt,floors", [
    ("bf16", [None, -126, -127, -128, -129, -130, -131, -132, -134, -135, -137, -140]),
    ("tf32", [None, -126, -132, -134]),
])
def test_alignment_floor_is_pinned_at_minus_133(in_fmt, floors):
    """One whole H100 GEMM (256 x 256 outputs, K = 256) of the tiny distribution, GPU bits in 'd'
    (h100_tile_*_fp32_cublas_tiny.npz, dumped by tools/device/device_runs.sh): only align_floor = -133 fits."""
    a, b, c, d = _tile(f"h100_tile_{in_fmt}_fp32_cublas_tiny.npz")
    assert int((simulate_params(resolve("hopper", in_fmt, "fp32", "cublas"), a, b, c) != d).sum()) == 0
    assert resolve("hopper", in_fmt, "fp32", "cublas").align_floor == -133
    for fl in floors:
        p = resolve(f"hopper:align_floor={'none' if fl is None else fl}", in_fmt, "fp32", "cublas")
        # rows in chunks, stopping at the first chunk with a wrong output (the same verdict as all rows at once)
        misfit = any((simulate_params(p, a[i:i + 4096], b[i:i + 4096], c[i:i + 4096]) != d[i:i + 4096]).any()
                     for i in range(0, len(a), 4096))
        assert misfit, f"align_floor={fl} fits too"
