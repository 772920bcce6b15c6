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
    seen, out = set(), []
    for c in alpha_samples():
        kind = next(m.group(1) for k in c["kernels"] for m in [NVJET_EPILOGUE.search(k)] if m)
        key = (c["gpu"], c["alpha"], c["beta"], c["bias"], kind)
        if key not in seen and c["K"] <= 4096:
            seen.add(key)
            out.append(c)
    return out


@pytest.mark.parametrize("c", _picked(), ids=lambda c: f"{GPU_OF[c['gpu']]}-{c['M']}x{c['N']}x{c['K']}-a{c['alpha']}"
                         f"-b{c['beta']}-{'bias' if c['bias'] else 'C'}")
def test_sampled_gpu_outputs_replay_under_the_shipped_catalogs(c):
    """Every picked call is answered (its shape is one of the layers ``epilogues:bf16,fp16:all`` recorded) and gives the
    GPU's sampled bits, except alpha = 1 with beta = 2: recorded, but no decision covers its epilogue (at beta = 2 the
    candidate forms give the same sums, so these samples cannot separate them), and it is refused saying so."""
    try:
        plan = answer(call_of(c), GPU_OF[c["gpu"]], plans_dirs=()).plan
    except TcsmtError as exc:
        assert (c["alpha"], c["beta"]) == (1.0, 2.0) and "epilogue unknown" in str(exc)
        return
    r = replay_call(c, make_inputs(c, int(c["seed"])), plan, max_samples=64)
    assert r.checked == 64 and not r.mismatches and not r.run_error
