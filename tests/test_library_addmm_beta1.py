"""addmm with alpha = beta = 1: the epilogue step ``out_round_c`` (RN_out(RN32(RN_out(y) + C))) of the nvjet
``_badd_`` kernels, tied to the H100's sampled outputs (evidence/library/addmm_beta1.json.gz, made by
``python -m tools.library.addmm_samples``), and the ``c_cancel`` inputs that tell the epilogue hypotheses apart."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import BF16, FP16, FP32
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.hwcheck.library_calls import make_inputs
from tcsmt.library.replay import replay_call

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "evidence" / "library" / "addmm_beta1.json.gz"


def _badd_call():
    """The H100's sampled ``_badd_`` call 49 x 3072 x 768 bf16 (torch's default settings)."""
    with gzip.open(SAMPLES, "rt") as f:
        doc = json.load(f)
    return doc, next(c for c in doc["calls"] if c["gpu"].startswith("NVIDIA H100") and c["setting"] == "default"
                     and (c["M"], c["N"], c["K"]) == (49, 3072, 768) and not c["bias"] and c["alpha"] == 1.0)


def _plan(doc, call, steps):
    from tcsmt.io import load
    from tools.library.decide import _call_of, plans_for
    raw = load.read_json(REPO / "evidence" / "h100_cublas_plans.json.gz", "recorded plan file")
    src = dict(doc, gpu=raw["gpu"], **{k: raw.get(k) for k in ("torch", "cuda", "cublas", "cublaslt")}, calls=[call])
    d = {"match": {"op": "addmm", "alpha": 1.0, "beta": 1.0}, "set": {"epilogue": steps}, "evidence": "test"}
    return next(p for p in plans_for(raw, src, [d], SAMPLES.name)[_call_of(call).key()]
            if list(p.kernels) == list(call["kernels"]))


@pytest.mark.parametrize("steps,agree", [(["out_round_c"], True), (["beta_c"], False)])
def test_badd_kernel_rounds_to_the_output_before_adding_c(steps, agree):
    """RN_out(RN32(RN_out(y) + C)) gives all 256 sampled outputs of nvjet_sm90_tst_40x64_64x16_4x1_v_badd_TNN;
    RN32(y + C) misses some (the class: 1,777 of 2,048, evidence/library/addmm_beta1_verdicts.json)."""
    doc, call = _badd_call()
    assert call["kernels"] == ["nvjet_sm90_tst_40x64_64x16_4x1_v_badd_TNN"]
    r = replay_call(call, make_inputs(call, int(call["seed"])), _plan(doc, call, steps))
    assert r.checked == 256 and (not r.mismatches) == agree, len(r.mismatches)


def test_round_through_keeps_the_narrow_significand():
    B = NumpyBackend()
    x = np.array([0x3F808001, 0x3F818000, 0x3F838000, 0x7F7FFFFF, 0x00000001, 0xBF800000], dtype=np.int64)
    got = np.asarray(sem.round_through(B, x, FP32, BF16, "rne")).astype(np.int64)
    # 1 + 2^-8 + 2^-23 rounds up to 1 + 2^-7; the ties 1 + 3 * 2^-8 (odd: up) and 1 + 7 * 2^-8 (odd: up);
    # the largest fp32 overflows bf16 to inf; the smallest subnormal to +0; -1 stays
    assert [hex(v) for v in got] == ["0x3f810000", "0x3f820000", "0x3f840000", "0x7f800000", "0x0", "0xbf800000"]
    assert np.asarray(sem.round_through(B, np.array([0x3C00], dtype=np.int64), FP16, FP16, "rne"))[0] == 0x3C00


def test_c_cancel_inputs_separate_the_epilogue_hypotheses():
    """On ``c_cancel`` inputs the three hypotheses of the decision give other outputs on (almost) every sample: RN32(y +
    C) rounds the small runs to the fp32 grid of 2^11, C as the initial accumulator keeps them, and rounding y to
    bf16 first gives 0."""
    from tcsmt.hwcheck.library_calls import sample_positions
    from tools.library.addmm_samples import c_init_outputs, rounded_first
    doc, base = _badd_call()
    call = dict(base, dist="c_cancel", seed=7001)
    call["samples"] = [[i, j, "0x0"] for i, j in sample_positions(call, 7001)]
    inputs = make_inputs(call, 7001)
    assert np.all(inputs["C"] == 0xC500)  # -2^11 in bf16
    plan = _plan(doc, call, ["beta_c"])
    got = {(m[1], m[2]): int(m[4], 16) for m in replay_call(call, inputs, plan).mismatches}  # beside "0x0"
    after = [got.get((i, j), 0) for i, j, _ in call["samples"]]
    c_init = c_init_outputs(call, inputs, plan)
    first = rounded_first(call, inputs, plan)
    assert set(first) == {0}
    assert sum(a != 0 for a in after) > 200 and sum(a != c for a, c in zip(after, c_init)) > 200


def test_conv1d_split_k_through_the_public_api():
    """tcsmt.library.addmm with a 1-D bias at alpha = beta = 1 on the H100's recorded plan of 64 x 64 x 4096 bf16
    (nvjet ``_bz_splitK_bias_``, S = 3, from h100_cublas_plans.json.gz; epilogue decided in h100_library_decisions.json)
    gives the H100's 256 sampled outputs of that call on ``c_cancel`` inputs (evidence/library/addmm_beta1_cancel.json.gz,
    nvidia-h100-x1, 2026-11-26), which RN32(y + C) and C as the initial accumulator tell apart."""
    import tcsmt.library as L
    with gzip.open(REPO / "evidence" / "library" / "addmm_beta1_cancel.json.gz", "rt") as f:
        doc = json.load(f)
    call = next(c for c in doc["calls"] if (c["M"], c["N"], c["K"], c["a_dtype"], c["out_dtype"], c["bias"],
                                            c["setting"]) == (64, 64, 4096, "bfloat16", "bfloat16", True, "default"))
    assert int(call["split_k"]) == 3 and "_bz_splitK_bias_" in call["kernels"][0]
    p = L.plan("addmm", 64, 64, 4096, a_dtype="bfloat16", alpha=1.0, beta=1.0, bias=True)
    assert p.epilogue == ("beta_c",) and p.split_k == 3
    x = make_inputs(call, int(call["seed"]))
    out = np.asarray(L.addmm(x["bias"], x["A"], x["B"], dtype="bfloat16", gpu="h100"))
    got = [int(out[i, j]) for i, j, _ in call["samples"]]
    want = [int(str(s[-1]), 16) for s in call["samples"]]
    assert got == want and len(set(want)) > 50
