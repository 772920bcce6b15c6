"""The H100 library-GEMM data (evidence/library_plans.md): the committed files parse
and follow the plan contract, and ``tcsmt.hwcheck.library_calls.make_inputs`` still rebuilds, bit for bit, the inputs
the GPU saw (crc32 of every array, computed on the device with numpy 2.5.2).
"""
from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import evidence_json

from tcsmt.hwcheck import library_calls as LC
from tcsmt.io.load import json_bytes

RESULTS = Path(__file__).resolve().parent.parent / "evidence"
OPS = {"mm", "addmm", "linear", "bmm", "scaled_mm"}
DTYPES = {"float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2"}


def _load(name: str) -> dict:
    return json.loads(json_bytes(RESULTS / name, "evidence file"))


def _check_call(c: dict) -> None:
    for f in LC.CALL_FIELDS + ("kernels",):
        assert f in c, f
    assert c["op"] in OPS
    assert {c["a_dtype"], c["b_dtype"], c["out_dtype"]} <= DTYPES
    assert c["scale"] in (None, "tensor", "row")
    assert c["split_k"] is None or (isinstance(c["split_k"], int) and c["split_k"] >= 1)


def test_plan_file_follows_the_contract() -> None:
    plans = evidence_json("h100_cublas_plans.json.gz")
    for k in ("gpu", "torch", "cuda", "cublas", "cublaslt", "workspace_bytes", "method", "calls", "families"):
        assert k in plans, k
    assert plans["gpu"] == "NVIDIA H100 80GB HBM3"
    grid = {(c["M"], c["N"], c["K"]) for c in plans["calls"]
            if c["op"] == "mm" and c["a_dtype"] == "bfloat16" and c["out_dtype"] == "bfloat16"}
    sizes = [1 << i for i in range(15)]
    assert all((m, n, k) in grid for m in sizes for n in sizes for k in sizes)
    for c in plans["calls"]:
        _check_call(c)
        if c["split_k"] is None:
            assert "torch_error" in c  # never guessed: only calls torch refused lack S
    for fam in plans["families"].values():
        for k in ("kernel_regex", "grain", "slices", "remainder", "reduce", "evidence"):
            assert k in fam, k


def test_validation_file_follows_the_contract() -> None:
    val = _load("h100_library_validation.json.gz")
    assert len(val["calls"]) >= 200
    for c in val["calls"]:
        _check_call(c)
        assert {"seed", "dist", "samples"} <= set(c)
        pos = {tuple(s[:-1]) for s in c["samples"]}
        width = {"float32": 8, "float16": 4, "bfloat16": 4}[c["out_dtype"]]
        assert all(len(s[-1]) == 2 + width and s[-1].startswith("0x") for s in c["samples"])
        if c["op"] == "bmm":
            assert (0, 0, 0) in pos and (c["batch"] - 1, c["M"] - 1, c["N"] - 1) in pos
        else:
            assert (0, 0) in pos and (c["M"] - 1, c["N"] - 1) in pos
    assert [c["seed"] for c in val["calls"]] == [c["seed"] for c in LC.validation_calls()]


@pytest.mark.parametrize("every", [23])
def test_make_inputs_rebuilds_the_device_inputs(every: int) -> None:
    """A sample of the validation calls (every 23rd, small ones cheap): same crc32 as on the device."""
    device = {seed: crcs for seed, crcs in _load("h100_library_inputs_crc.json")["crc"]}
    calls = LC.validation_calls()[::every]
    assert calls
    for c in calls:
        inp = LC.make_inputs(c, c["seed"])
        got = {k: zlib.crc32(np.ascontiguousarray(v).tobytes()) for k, v in sorted(inp.items())}
        assert got == device[c["seed"]], c


def _reference(c: dict, inp: dict, A: np.ndarray, B: np.ndarray, pos: tuple) -> tuple[float, float]:
    """(exact value of the call's output at ``pos``, sum of the magnitudes of its terms) in float64; A and B
    are the values of ``inp``'s patterns."""
    if c["op"] == "bmm":
        t, i, j = pos
        prod = A[t, i] * B[t, :, j]
    else:
        i, j = pos
        prod = A[i] * B[:, j]
    scale = c["alpha"]
    if c["op"] == "scaled_mm":
        sa = LC.values("float32", inp["scale_a"])
        sb = LC.values("float32", inp["scale_b"])
        scale *= (sa if sa.ndim == 0 else sa[i, 0]) * (sb if sb.ndim == 0 else sb[0, j])
    ref, mag = prod.sum() * scale, np.abs(prod).sum() * abs(scale)
    if "bias" in inp:
        b = LC.values(c["out_dtype"], inp["bias"])[j] * (c["beta"] if c["op"] == "addmm" else 1.0)
        ref, mag = ref + b, mag + abs(b)
    if "C" in inp:
        cc = c["beta"] * LC.values(c["out_dtype"], inp["C"])[i, j]
        ref, mag = ref + cc, mag + abs(cc)
    return ref, mag


def test_device_outputs_agree_with_the_generated_inputs() -> None:
    """Every sampled output of a sample of calls lies within 2% of the sum of its terms' magnitudes from the
    exact result of the call on ``make_inputs`` (every 3rd of the calls with at most 2^20 input elements; the
    tiny distribution, whose products fall below fp32, is left out): the inputs, layouts, scales, bias and alpha/beta the CPU side rebuilds are the GPU's."""
    calls = [c for c in _load("h100_library_validation.json.gz")["calls"]
             if c["dist"] != "tiny" and c["batch"] * c["K"] * (c["M"] + c["N"]) <= 1 << 20][::3]
    assert len(calls) >= 20 and {c["op"] for c in calls} == {"mm", "bmm", "addmm", "linear", "scaled_mm"}
    for c in calls:
        inp = LC.make_inputs(c, c["seed"])
        A, B = LC.values(c["a_dtype"], inp["A"]), LC.values(c["b_dtype"], inp["B"])
        for s in c["samples"][::8]:
            ref, mag = _reference(c, inp, A, B, tuple(s[:-1]))
            got = float(LC.values(c["out_dtype"], np.array(int(s[-1], 16))))
            assert abs(got - ref) <= 2e-2 * mag + 1e-30, (c, s, got, ref)
