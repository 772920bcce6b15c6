"""The Hopper model against the H100 answers to the Hopper questions (no GPU needed: the device's bits are committed).

Sources, all under evidence/, produced by ``bash tools/device/hopper_questions.sh`` on an
H100 80GB HBM3 (driver 580.159.04, CUDA 13.0 driver API, nvcc 13.0.88, CuPy 14.2.0):
- ``h100_hopper_questions.json``: the device's output bits for every row of every question file
  in vectors/hopper/ (hand-built by tools/vectors/hopper_vectors.py, and solver-found by
  ``tcsmt discriminate``), on mma.sync and wgmma: zero products and zero C (MMA-Sim's
  zero-exponent reading, arXiv 2511.10909), zero signs, RZ overflow, C alone on the fp8 paths
  (the FP8 floor of Hawkeye, MLSys 2026), tf32 block width, f16 -> f16 rounding.
- ``h100_hopper_new_paths.json``: 10^6 random rows per distribution on the new paths (wgmma
  tf32, wgmma f16 -> f16, mixed e4m3 x e5m2 on mma.sync and wgmma); the counterexamples of the
  refuted readings are replayed here.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from tcsmt.hwcheck.check import load_inputs, resolve_models
from tcsmt.hwcheck.paths import find_path
from tcsmt.hwcheck.questions import padded_rows
from tcsmt.sim.simulator import simulate_params

REPO = Path(__file__).resolve().parent.parent
QUESTIONS = REPO / "evidence" / "h100_hopper_questions.json"
NEW_PATHS = REPO / "evidence" / "h100_hopper_new_paths.json"



def current(recorded: str) -> Path:
    """Where a question file the run recorded is now: the run named it under hwcheck/vectors/ (vectors/ today)."""
    return REPO / (recorded.removeprefix("hwcheck/") if recorded.startswith("hwcheck/vectors/") else recorded)

def _questions() -> list[dict]:
    return [q for q in json.loads(QUESTIONS.read_text())["questions"] if "gpu" in q]


def _padded(q: dict):
    inputs = load_inputs(str(current(q["file"])), instr=q["path"].split("/")[1])
    spec = inputs.spec
    a, b = padded_rows(inputs)
    assert a.shape[1] == q["k"]
    gpu = np.array([int(x, 16) for x in q["gpu"]], dtype=spec.fout.dtype)
    return spec, a, b, inputs.c, gpu


def test_question_files_match_what_ran():
    qs = _questions()
    assert len(qs) >= 40
    for q in qs:
        assert hashlib.sha256(current(q["file"]).read_bytes()).hexdigest() == q["file_sha256"], q["file"]


@pytest.mark.parametrize("q", _questions(), ids=lambda q: f"{Path(q['file']).stem}-{q['path']}")
def test_h100_question_rows_replay(q):
    """The model gives the H100's bits on every row; every reading the run refuted still disagrees on
    exactly as many rows as recorded (so the rows keep separating them)."""
    spec, a, b, c, gpu = _padded(q)
    for label, p in resolve_models(list(q["verdict"]), spec):
        got = simulate_params(p, a, b, c, bits=True)
        wrong = int((got != gpu).sum())
        want = 0 if label == "hopper" else q["verdict"][label]["mismatches"]
        assert wrong == want, (label, wrong, want)


def test_all_minus_zero_sums_give_plus_zero():
    """zero_sign-*.json rows 4j+2 (every product -0 and C = -0): the H100 gives +0 on the block paths."""
    seen = 0
    for q in _questions():
        if not Path(q["file"]).name.startswith("zero_sign") or q["path"].startswith(("e4m3.f32/mma", "e5m2.f16/mma")):
            continue
        if q["path"].startswith("e4m3.f16/mma"):
            continue
        for j in range(2, len(q["gpu"]), 4):
            assert int(q["gpu"][j], 16) == 0, (q["file"], q["path"], j)
            seen += 1
    assert seen >= 100


def _counterexamples():
    doc = json.loads(NEW_PATHS.read_text())
    out = []
    for p in doc["paths"]:
        if "results" not in p:
            continue
        for r in p["results"]:
            for m in r["models"]:
                for ex in m["counterexamples"][:2]:
                    out.append((p["path"], p["instr"], m["model"], ex))
    return out


@pytest.mark.parametrize("label,instr,model,ex", _counterexamples(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_new_path_counterexamples_replay(label, instr, model, ex):
    """A refuted reading's counterexample on a new path: the model gives the GPU's bits, the reading its own."""
    fin, fout = label.split(".")
    spec = find_path(fin, fout, instr)
    a = np.array([[int(x, 16) for x in ex["a"]]], dtype=spec.fin.dtype)
    b = np.array([[int(x, 16) for x in ex["b"]]], dtype=spec.fin.dtype)
    c = np.array([int(ex["c"], 16)], dtype=spec.c_fmt.dtype)
    (_, base), (_, hyp) = resolve_models(["hopper", model], spec)
    assert simulate_params(base, a, b, c, bits=True)[0] == int(ex["gpu"], 16)
    assert simulate_params(hyp, a, b, c, bits=True)[0] == int(ex["model"], 16)


def test_new_paths_recorded_clean():
    """Every new path: the model matched all 6*10^6 random rows on the H100."""
    doc = json.loads(NEW_PATHS.read_text())
    assert "H100" in doc["device"]["device"]
    paths = [p for p in doc["paths"] if "results" in p]
    assert len(paths) == 8
    for p in paths:
        base = [m for r in p["results"] for m in r["models"] if m["model"] == "hopper"]
        assert sum(m["checked"] for m in base) >= 6_000_000 and sum(m["mismatches"] for m in base) == 0, p["path"]


# ------------------------------------------------------------- the new parameters, by hand
def _bf16(vals):
    from tcsmt.arith.formats import get_format

    f = get_format("bf16")
    return np.array([[f.from_fraction(v) for v in vals]], dtype=np.uint16)


def test_zero_exponent_reading_by_hand():
    """0 x 2^114 beside the product x*x = 2^-30 (1 + 2^-6 + 2^-14), x = (1 + 2^-7) 2^-15 (bf16 -> fp32, C = 0).
    tcsmt's Hopper: the zero stays out, E = -30, the sum is exact.  MMA-Sim's reading (arXiv 2511.10909,
    zero exponent -126): the zero product's exponent is -126 + 114 = -12, the window ends at 2^(-12-25),
    so the 2^-44 bit is lost: 2^-30 (1 + 2^-6)."""
    from fractions import Fraction as Fr

    from tcsmt.arith.formats import get_format
    from tcsmt.arith.registry import resolve

    x = (1 + Fr(1, 128)) * Fr(1, 2**15)
    a, b = _bf16([0, x] + [0] * 14), _bf16([Fr(2) ** 114, x] + [0] * 14)
    c = np.zeros(1, np.uint32)
    f32 = get_format("fp32")
    got = {s: f32.to_fraction(int(simulate_params(resolve(s, "bf16", "fp32", "mma"), a, b, c)[0]))
           for s in ("hopper", "hopper:zero_exp126")}
    assert got["hopper"] == Fr(2) ** -30 * (1 + Fr(1, 64) + Fr(1, 2**14))
    assert got["hopper:zero_exp126"] == Fr(2) ** -30 * (1 + Fr(1, 64))


def test_all_minus_zero_block_is_plus_zero_and_an_fadd_keeps_minus_zero():
    """zero_sign = "plus" (H100, h100_hopper_questions.json): products -0 and C = -0 give +0 from the
    block adder; "positive" (the refuted reading) gives -0.  The fp8 mma path adds C by one FADD
    (after_instr), which keeps IEEE's -0 + -0 = -0 rule, but its block sum starts from +0, so +0."""
    from tcsmt.arith.registry import resolve

    a = np.full((1, 16), 0x8000, np.uint16)
    b = np.full((1, 16), 0x3F80, np.uint16)
    c = np.array([0x80000000], np.uint32)
    assert simulate_params(resolve("hopper", "bf16", "fp32", "mma"), a, b, c)[0] == 0
    assert simulate_params(resolve("hopper:zero_positive", "bf16", "fp32", "mma"), a, b, c)[0] == 0x80000000
    a8, b8 = np.full((1, 32), 0x80, np.uint8), np.full((1, 32), 0x38, np.uint8)
    assert simulate_params(resolve("hopper", "e4m3", "fp32", "mma"), a8, b8, c)[0] == 0


def test_mixed_formats_decode_b_in_its_own_format():
    """The mixed paths (b_fmt): e4m3 1.0 (0x38) times e5m2 2^-16 (0x01, its least subnormal), 32 times: 2^-11."""
    from tcsmt.arith.registry import resolve

    a, b = np.full((1, 32), 0x38, np.uint8), np.full((1, 32), 0x01, np.uint8)
    c = np.zeros(1, np.uint32)
    for instr in ("mma_xe5m2", "wgmma_xe5m2"):
        p = resolve("hopper", "e4m3", "fp32", instr)
        assert p.b_fmt == "e5m2"
        assert simulate_params(p, a, b, c)[0] == np.float32(2.0**-11).view(np.uint32)
