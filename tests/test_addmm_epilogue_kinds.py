"""addmm's alpha and beta by kind: cuBLAS runs other kernels at beta = 1 (``nvjet_..._badd_``, a matrix C; ``_bz_bias_``,
a 1-D bias) than at other beta (``_bx_``), so a plan recorded at one kind of beta never answers another, and the
``_badd_`` kernels at alpha != 1 round alpha * y to the output format before C is added.  GPU evidence:
``evidence/library/addmm_alpha.json.gz`` (``python -m tools.library.addmm_samples lists DIR --dist alpha``, run by
``tools/device/library_plans.py --valid-list`` on an H100 and an H200, 2026-11-27: 112 calls each, 256 sampled outputs
a call) and the H200 call that refuted the earlier form (``evidence/library/h200_catalog_samples.json``)."""
from __future__ import annotations

import gzip
import json
import sqlite3
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.library_calls import make_inputs
from tcsmt.library.catalog import Catalog
from tcsmt.library.lookup import answer, parse_record_spec
from tcsmt.library.plans import Call, beta_kind
from tcsmt.library.replay import replay_call
from tools.library.addmm_samples import NVJET_EPILOGUE

REPO = Path(__file__).resolve().parents[1]
GPU_OF = {"NVIDIA H100 80GB HBM3": "h100", "NVIDIA H200": "h200"}


@cache
def alpha_samples() -> list[dict]:
    with gzip.open(REPO / "evidence" / "library" / "addmm_alpha.json.gz", "rt") as f:
        return json.load(f)["calls"]


def call_of(c: dict) -> Call:
    return Call(c["op"], c["M"], c["N"], c["K"], c["a_dtype"], c["b_dtype"], c["out_dtype"], alpha=c["alpha"],
                beta=c["beta"], bias=c["bias"], a_t=c["a_t"], b_t=c["b_t"])


def test_beta_has_three_kinds_and_alpha_two():
    assert [beta_kind(b) for b in (0.0, 1.0, 2.0, 0.75, -1.0)] == [0, 1, 2, 2, 2]
    c1 = Call("addmm", 8, 8, 8, "bfloat16", "bfloat16", "bfloat16", beta=1.0)
    c2 = Call("addmm", 8, 8, 8, "bfloat16", "bfloat16", "bfloat16", beta=2.0)
    c3 = Call("addmm", 8, 8, 8, "bfloat16", "bfloat16", "bfloat16", beta=0.75)
    assert c1.family_key() != c2.family_key() == c3.family_key()
    assert c1.key() != c2.key()


def test_a_bias_call_at_beta_2_is_not_answered_by_its_beta_1_recording():
    """GPT-2's c_attn forward (Conv1D: addmm(b, x, W), 2304 x 768, a 1-D bias) is recorded at alpha = beta = 1 only: at beta = 2 cuBLAS runs
    another kernel (``_bx_`` instead of ``_bz_bias_``), so the call is refused, not answered with the beta = 1 plan."""
    assert answer(parse_record_spec("addmm 100x2304x768 bfloat16 bias=1 beta=1"), "h100", plans_dirs=())
    with pytest.raises(TcsmtError, match="tcsmt record"):
        answer(parse_record_spec("addmm 100x2304x768 bfloat16 bias=1 beta=2"), "h100", plans_dirs=())


def test_a_catalog_keyed_before_beta_kinds_is_refused(tmp_path):
    src = REPO / "models" / "library" / "h100_cublas13_catalog.sqlite"
    old = tmp_path / "old.sqlite"
    old.write_bytes(src.read_bytes())
    db = sqlite3.connect(old)
    db.execute("DELETE FROM meta WHERE key = 'key_format'")
    db.commit()
    db.close()
    with pytest.raises(TcsmtError, match="call keys of format 1"):
        Catalog(old)


def test_the_refuted_h200_call_is_answered_with_alpha_rounded_first():
    """bf16 916 x 768 x 3072, alpha = 2, beta = 1 on ``nvjet_..._badd_TNT``: 25 of 128 outputs differed from
    FFMA(alpha, y, RN32(beta C)); the plan now says RN_out(RN32(RN_out(RN32(alpha y)) + C))."""
    call = parse_record_spec("addmm 916x768x3072 bfloat16 b_t=1 alpha=2 beta=1")
    for gpu in ("h100", "h200"):
        assert answer(call, gpu, plans_dirs=()).plan.epilogue == ("alpha", "out_round_c")


def _picked() -> list[dict]:
    """One sampled call per GPU, alpha, beta, C or bias and kernel (its epilogue part): 64 outputs each."""
    def kind(c: dict) -> tuple:
        return (c["gpu"], c["alpha"], c["beta"], c["bias"],
                next(m.group(1) for k in c["kernels"] for m in [NVJET_EPILOGUE.search(k)] if m))
    return _one_per(alpha_samples(), kind, lambda c: c["K"] <= 4096)


def _one_per(calls: list[dict], kind, small) -> list[dict]:
    """The first call of each kind among the small ones."""
    seen: dict[tuple, dict] = {}
    for c in calls:
        if small(c):
            seen.setdefault(kind(c), c)
    return list(seen.values())


@pytest.mark.parametrize("c", [pytest.param(c, marks=[pytest.mark.slow] if GPU_OF[c["gpu"]] == "h200" else [])
                               for c in _picked()], ids=lambda c: f"{GPU_OF[c['gpu']]}-{c['M']}x{c['N']}x{c['K']}-a{c['alpha']}"
                         f"-b{c['beta']}-{'bias' if c['bias'] else 'C'}")
def test_sampled_gpu_outputs_replay_under_the_shipped_catalogs(c):
    """Every picked call is answered (its shape is one of the layers ``epilogues:bf16,fp16:all`` recorded) and gives the
    GPU's sampled bits; alpha = 1 with beta = 2 included, whose epilogue the ``beta_split`` samples decided."""
    plan = answer(call_of(c), GPU_OF[c["gpu"]], plans_dirs=()).plan
    r = replay_call(c, make_inputs(c, int(c["seed"])), plan, max_samples=64)
    assert r.checked == 64 and not r.mismatches and not r.run_error


# ------------------------------------------------------------------ alpha = 1, beta not 0 or 1
@cache
def beta_split_samples() -> list[dict]:
    """``evidence/library/addmm_beta_split.json.gz``: ``python -m tools.library.addmm_samples lists DIR --dist
    beta_split`` run by ``tools/device/library_plans.py --valid-list`` on an H100 and an H200 (2026-11-27), 64 calls
    each, 256 sampled outputs a call."""
    with gzip.open(REPO / "evidence" / "library" / "addmm_beta_split.json.gz", "rt") as f:
        return json.load(f)["calls"]


@pytest.mark.parametrize("dt,beta,bias", [("bfloat16", 0.3, False), ("float16", -0.7, True)])
def test_beta_split_inputs_cancel_the_rounded_product_exactly(dt, beta, bias):
    """On ``beta_split`` inputs every output's y = A @ B is -RN32(RN32(beta) * c) exactly (c the output's C, or its
    bias), and beta * c itself is not an fp32 number, so the two epilogue readings part on (almost) every output."""
    from tcsmt.hwcheck.library_calls import values
    call = {"op": "addmm", "M": 7, "N": 96, "K": 40, "batch": 1, "a_dtype": dt, "b_dtype": dt, "out_dtype": dt,
            "bias": bias, "alpha": 1.0, "beta": beta, "tf32": False, "scale": None, "fast_accum": False,
            "dist": "beta_split"}
    x = make_inputs(call, 3)
    y = values(dt, x["A"]) @ values(dt, x["B"])  # three products a row: exact in float64
    c = values(dt, x["bias"])[None, :].repeat(7, 0) if bias else values(dt, x["C"])
    exact = np.float64(np.float32(beta)) * c
    assert np.array_equal(y, -exact.astype(np.float32).astype(np.float64))
    assert np.mean(exact.astype(np.float32).astype(np.float64) != exact) > 0.9


def test_beta_split_separates_the_readings_on_the_gpus():
    """The GPUs' outputs: without split-K every sampled output is +0 or -0 (RN32(y + RN32(beta * C)): the product is
    rounded before y is added), with split-K over 90% are not (FFMA(beta, C, y) in cuBLASLt's splitKreduce kernel keeps
    beta * C's rounding error, 0 only where c's significand makes the product exact), on both GPUs and every call."""
    got = {}
    for c in beta_split_samples():
        zero = [int(s[-1], 16) & 0x7FFF == 0 for s in c["samples"]]
        got.setdefault((GPU_OF[c["gpu"]], int(c["split_k"]) > 1), set()).add(
            "zero" if all(zero) else "mostly not zero" if sum(zero) < 0.1 * len(zero) else "mixed")
    assert got == {(g, s): {"mostly not zero" if s else "zero"} for g in ("h100", "h200") for s in (False, True)}


def _beta_split_picked() -> list[dict]:
    return _one_per(beta_split_samples(), lambda c: (c["gpu"], c["a_dtype"], c["bias"], int(c["split_k"]) > 1),
                    lambda c: c["M"] * c["K"] <= 1 << 22)


@pytest.mark.parametrize("c", _beta_split_picked(), ids=lambda c: f"{GPU_OF[c['gpu']]}-{c['a_dtype']}-"
                         f"{c['M']}x{c['N']}x{c['K']}-S{c['split_k']}-{'bias' if c['bias'] else 'C'}")
def test_beta_split_gpu_outputs_replay_under_the_shipped_catalogs(c):
    """alpha = 1, beta = 0.3 or -0.7: answered from the catalogs (the epilogue decided on these samples:
    ``evidence/h100_library_decisions.json``) and equal to the GPU's sampled bits."""
    plan = answer(call_of(c), GPU_OF[c["gpu"]], plans_dirs=()).plan
    assert plan.epilogue == (("alpha", "beta_c") if plan.split_k > 1 else ("alpha_beta_c",))
    r = replay_call(c, make_inputs(c, int(c["seed"])), plan, max_samples=64)
    assert r.checked == 64 and not r.mismatches and not r.run_error

