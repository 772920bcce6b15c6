"""tcsmt invariance: plans over a range of token counts (lookup.answers_over), their grouping by the bits they
compute, the changes, the witnesses, the refusals, the command line (a small catalog made here)."""
from __future__ import annotations

import json
import zlib
import sqlite3

import numpy as np
import pytest
from click.testing import CliRunner

from tcsmt.cli.commands import main
from tcsmt.errors import TcsmtError
from tcsmt.library import api
from tcsmt.library.catalog import KEY_FORMAT, SCHEMA, family_text
from tcsmt.library.checks import make_call
from tcsmt.library.invariance import find_layer, invariance, layer_call, study, witness
from tcsmt.library.lookup import answer, answers_over

GPU = "testgpu"
N, K = 8, 256
CHAIN = {"arch": "hopper", "in_fmt": "bf16", "out_fmt": "fp32", "instr": "cublas"}


def _plan(S: int, kernel: str) -> dict:
    f = {"op": "linear", "a_dtype": "bfloat16", "b_dtype": "bfloat16", "out_dtype": "bfloat16", "alpha": 1.0,
         "beta": 0.0, "bias": False, "tf32": False, "fast_accum": False, "chain": CHAIN, "epilogue": [],
         "kernels": [kernel], "split_k": S, "sources": ["made by tests/test_invariance.py"]}
    if S > 1:
        f.update(grain=64, slices="contiguous", remainder="last", reduce="fp32_forward")
    return f


@pytest.fixture()
def plans_dir(tmp_path, monkeypatch):
    """A catalog of linear bf16 Mx8x256 on 'testgpu': M 1..4 S = 2, 5..6 S = 1, 7 S = 2, 8..10 S = 4,
    11..12 S = 1 under another kernel (the same arithmetic as 5..6); M = 13 is not recorded."""
    db = sqlite3.connect(tmp_path / "testgpu_catalog.sqlite")
    db.executescript(SCHEMA)
    meta = {"gpu": GPU, "arch": "hopper", "device": "test", "library": "test library",
            "stamp": json.dumps({"gpu_name": "test"}), "sources": "[]", "key_format": KEY_FORMAT}
    db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
    fam = family_text(make_call("linear", 1, N, K, a_dtype="bfloat16"))
    db.execute("INSERT INTO families VALUES (1, ?)", (fam,))
    plans = [_plan(2, "family split2"), _plan(1, "no split: a"), _plan(4, "family split4"), _plan(1, "no split: b")]
    for i, p in enumerate(plans, 1):
        db.execute("INSERT INTO plans VALUES (?, ?)", (i, zlib.compress(json.dumps(p, sort_keys=True).encode())))
    for lo, hi, pid in ((1, 4, 1), (5, 6, 2), (7, 7, 1), (8, 10, 3), (11, 12, 4)):
        db.execute("INSERT INTO runs VALUES (1, 'M', ?, ?, ?, ?, 1, ?)", (N, K, lo, hi, pid))
    db.commit()
    db.close()
    monkeypatch.setenv("TCSMT_PLANS", str(tmp_path))
    return tmp_path


def test_answers_over_is_answer_at_each_count(plans_dir):
    call = make_call("linear", 1, N, K, a_dtype="bfloat16")
    got = answers_over(call, GPU, 1, 13)
    assert [m for m, _, _ in got] == list(range(1, 14))
    for m, ans, why in got:
        one = make_call("linear", m, N, K, a_dtype="bfloat16")
        if m == 13:
            assert ans is None and "tcsmt record" in why
            with pytest.raises(TcsmtError) as exc:
                answer(one, GPU)
            assert str(exc.value) == why
        else:
            assert ans == answer(one, GPU) and ans.plan.call.M == m


def test_study_groups_counts_by_arithmetic(plans_dir):
    st = study(make_call("linear", 1, N, K, a_dtype="bfloat16"), GPU, 1, 12)
    assert [(c.first, c.counts, c.plan.split_k) for c in st.classes] == [(1, 5, 2), (5, 4, 1), (8, 3, 4)]
    assert st.classes[1].kernels == {"no split: a": 2, "no split: b": 2}  # one arithmetic, two kernels
    assert st.runs == [(1, 4, 0), (5, 6, 1), (7, 7, 0), (8, 10, 2), (11, 12, 1)]
    assert [(c.at, c.before, c.after) for c in st.changes] == [(5, 0, 1), (7, 1, 0), (8, 0, 2), (11, 2, 1)]
    assert st.changes[0].what.startswith("S 2 -> 1; slices 2 x 128 -> 256")
    assert not st.invariant and st.pairs("adjacent") == [(0, 1), (0, 2), (1, 2)]
    assert study(make_call("linear", 1, N, K, a_dtype="bfloat16"), GPU, 8, 10).invariant


def test_witness_separates_and_replays(plans_dir):
    st = invariance(make_call("linear", 1, N, K, a_dtype="bfloat16"), GPU, 1, 12, witnesses="all")
    assert set(st.witnesses) == {(0, 1), (0, 2), (1, 2)}
    for (i, j), w in st.witnesses.items():
        assert w is not None and w.outputs[0] != w.outputs[1]
        for cls, want in ((i, w.outputs[0]), (j, w.outputs[1])):  # each plan at its own token count
            plan = st.classes[cls].plan
            got = api.run(plan, w.a[None, :], w.b[:, None])
            assert int(np.asarray(got).reshape(-1)[0]) == want
    doc = st.to_json()
    assert doc["batch_invariant"] is False and doc["pairs_not_tried"] == []
    assert doc["call"].startswith("linear bfloat16 Mx8x256")


def test_uncovered_counts_are_refused(plans_dir):
    with pytest.raises(TcsmtError) as exc:
        study(make_call("linear", 1, N, K, a_dtype="bfloat16"), GPU, 10, 20)
    msg = str(exc.value)
    assert "8 of the 11 token counts 10..20" in msg and "(13..20)" in msg and "tcsmt record" in msg
    assert "\n" not in msg


def test_layers_of_the_model_list():
    r = find_layer("llama-3-8b", "down_proj")
    assert (r["N"], r["K"], r["bias"]) == (4096, 14336, False)
    c = layer_call(r["N"], r["K"], "bfloat16")
    assert (c.op, c.N, c.K, c.bias) == ("linear", 4096, 14336, False)
    g = find_layer("gpt2", "c_attn")
    c = layer_call(g["N"], g["K"], "bfloat16", bias=g["bias"], layout=g["layout"])
    assert (c.op, c.N, c.K, c.bias, c.beta) == ("addmm", 2304, 768, True, 1.0)
    c = layer_call(g["N"], g["K"], "bfloat16", product="input-grad", layout="conv1d")
    assert (c.op, c.N, c.K, c.b_t) == ("mm", 768, 2304, True)
    with pytest.raises(TcsmtError, match="more than one layer"):
        find_layer("gpt2", "c_proj")
    with pytest.raises(TcsmtError, match="unknown model"):
        find_layer("no-such-model", "q_proj")
    with pytest.raises(TcsmtError, match="reduction length"):
        layer_call(8, 8, "bfloat16", product="weight-grad")


def test_command_line(plans_dir, tmp_path):
    out = tmp_path / "inv.json"
    r = CliRunner().invoke(main, ["invariance", "--n", str(N), "--k", str(K), "--gpu", GPU, "--tokens", "1..12",
                                  "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "batch-invariant: no" in r.output and "M = 5: plan 0 -> 1: S 2 -> 1" in r.output
    doc = json.loads(out.read_text())
    assert doc["complete"] is True and len(doc["witnesses"]) == 3 and doc["runs"][0] == [1, 4, 0]
    r = CliRunner().invoke(main, ["invariance", "--n", str(N), "--k", str(K), "--gpu", GPU, "--tokens", "1..13"])
    assert r.exit_code == 2 and "tcsmt record" in r.output


def test_interrupted_command_keeps_its_witnesses(plans_dir, tmp_path, monkeypatch):
    import tcsmt.library.invariance as inv

    calls = []

    def stop_second(st, i, j, *, seed=0):
        calls.append((i, j))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return witness(st, i, j, seed=seed)

    monkeypatch.setattr(inv, "witness", stop_second)
    out = tmp_path / "inv.json"
    r = CliRunner().invoke(main, ["invariance", "--n", str(N), "--k", str(K), "--gpu", GPU, "--tokens", "1..12",
                                  "--json", str(out)])
    assert r.exit_code == 130
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and len(doc["witnesses"]) == 1 and len(doc["pairs_not_tried"]) == 2


def _capture(tmp_path, plan_of_linear) -> str:
    """A capture file as tcsmt.hwcheck.gemm_capture writes it: an mm(x, w.t()) (answered as linear), the same
    with one output changed, a bmm and an mm of a sliced operand (refused)."""
    rng = np.random.default_rng(0)
    A = rng.integers(0x3F00, 0x3F80, size=(2, K)).astype(np.uint16)   # bf16 values in [0.5, 1)
    B = rng.integers(0x3F00, 0x3F80, size=(K, 3)).astype(np.uint16)
    out = np.asarray(api.run(plan_of_linear(2), A, B))
    wrong = out.copy()
    wrong[1, 2] ^= 1
    meta = lambda shape, stride, dt="bfloat16": {"shape": shape, "stride": stride, "dtype": dt, "offset": 0,  # noqa: E731
                                                 "align": 0}
    sample = {"rows": [0, 1], "cols": [0, 2, 7], "batches": [None]}
    calls = [{"n": 0, "op": "mm", "phase": "p", "A": meta([2, K], [K, 1]), "B": meta([K, N], [1, K]),
              "out": meta([2, N], [N, 1]), "sample": sample},
             {"n": 1, "op": "mm", "phase": "p", "A": meta([2, K], [K, 1]), "B": meta([K, N], [1, K]),
              "out": meta([2, N], [N, 1]), "sample": sample},
             {"n": 2, "op": "bmm", "phase": "q", "A": meta([4, 2, K], [2 * K, K, 1]),
              "B": meta([4, K, N], [K * N, N, 1]), "out": meta([4, 2, N], [2 * N, N, 1]),
              "sample": {"rows": [0], "cols": [0], "batches": [0]}},
             {"n": 3, "op": "mm", "phase": "q", "A": meta([2, K], [2 * K, 1]), "B": meta([K, N], [1, K]),
              "out": meta([2, N], [N, 1]), "sample": sample}]
    arrays = {"c0_A": A[None], "c0_B": B[None], "c0_out": out[None], "c1_A": A[None], "c1_B": B[None],
              "c1_out": wrong[None], "c2_A": A[None, :1], "c2_B": B[None, :, :1], "c2_out": out[None, :1, :1],
              "c3_A": A[None], "c3_B": B[None], "c3_out": out[None]}
    np.savez_compressed(tmp_path / "cap.npz", **arrays)
    doc = {"tool": "tcsmt.hwcheck.gemm_capture", "device": {"gpu": "test"}, "arrays": "cap.npz",
           "settings": {"preferred_blas_library": "_BlasBackend.Cublas", "allow_tf32": False,
                        "allow_bf16_reduced_precision_reduction": True}, "info": {}, "calls": calls}
    (tmp_path / "cap.json").write_text(json.dumps(doc))
    return str(tmp_path / "cap.json")


def test_gemm_replay_of_a_capture(plans_dir, tmp_path):
    from tcsmt.library.gemm_replay import main as replay_main
    from tcsmt.library.gemm_replay import replay
    from tcsmt.library.lookup import lookup

    path = _capture(tmp_path, lambda m: lookup(make_call("linear", m, N, K, a_dtype="bfloat16"), GPU))
    doc = replay(path, GPU)
    t = doc["totals"]
    assert (t["calls"], t["answered"], t["bit_exact_calls"], t["outputs_checked"], t["outputs_differ"],
            t["refused"]) == (4, 2, 1, 12, 1, 2)
    c0, c1, c2, c3 = doc["calls"]
    assert "as linear" in c0["via"] and c0["mismatches"] == []
    assert c1["mismatches"] == [[None, 1, 7, f"0x{int(c1['mismatches'][0][3], 16):x}", c1["mismatches"][0][4]]]
    assert "no recorded cuBLAS plan for bmm" in c2["refused"]
    assert "operand layout not modelled" in c3["refused"]
    assert replay_main([path, "--gpu", GPU, "--json", str(tmp_path / "r.json")]) == 1  # a differing bit
    assert json.loads((tmp_path / "r.json").read_text())["totals"]["answered"] == 2


def test_a_k_tile_without_residue_changes_nothing():
    """A K tile only inserts zero products where a slice's length is not a multiple of it: at K = 768 a plan with
    k_tile = 64 computes the bits of the same plan without it (one class), at K = 770 not."""
    import dataclasses

    from tcsmt.library.discriminate import default_plan, effective

    for k, same in ((768, True), (770, False)):
        p = default_plan(make_call("linear", 1, 8, k, a_dtype="bfloat16"), "h100")
        assert (effective(p) == effective(dataclasses.replace(p, k_tile=64))) is same
