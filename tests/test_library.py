"""Library GEMM plans: recorded plans, split-K and epilogue arithmetic, converter, replay, bad input.

Expected values: the H100-decided library paths of models/hopper.toml (evidence/h100_library_*.json);
the split-K slice rule of bitequiv and mmaemu (chunk = ceil(ceil(K/G)/S)*G, remainder in the last slice; an
empty slice gives +0; shared/reference/library_gemm.md); mmaemu's epilogue alpha = RN32(scale_a*scale_b),
y = FFMA(acc, alpha, +0); IEEE 754 round-to-nearest-even computed exactly with Fractions (conftest.round_fraction).
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import REPO, evidence_json, round_fraction

from tcsmt import TcsmtError, resolve
from tcsmt.sim.simulator import simulate_params  # the numpy semantics: the reference
from tcsmt import library as L
from tcsmt.arith.formats import get_format
from tcsmt.cli import main
from tcsmt.library.convert import convert_file
from tcsmt.library.convert import main as import_main
from tcsmt.library.plans import Call, Plan, load_table, read_table_text, tables
from tcsmt.library.replay import replay_call, replay_file

FP32 = get_format("fp32")
RNG_SEED = 12


def random_bits(fmt_name: str, shape, rng, finite: bool = True, span: int | None = None) -> np.ndarray:
    """Random patterns of a format: every exponent field (or ``span`` fields around the bias), random fractions."""
    f = get_format(fmt_name)
    n = int(np.prod(shape))
    top = (1 << f.exp_bits) - (2 if (finite and f.specials == "ieee") else 1)
    if span is None:
        expf = rng.integers(0, top + 1, n)
    else:
        expf = rng.integers(max(0, f.bias - span), min(top, f.bias + span) + 1, n)
    frac = rng.integers(0, 1 << f.frac_bits, n)
    if f.specials == "fn" and finite:
        frac = np.where(expf == top, np.minimum(frac, (1 << f.frac_bits) - 2), frac)
    sign = rng.integers(0, 2, n)
    bits = ((sign << (f.exp_bits + f.frac_bits)) | (expf << f.frac_bits) | frac) << f.pad_bits
    return bits.astype(f.dtype).reshape(shape)


def h100_plan(**match) -> Plan:
    found = [p for t in tables() if Path(t.path).name == "h100_cublas13.toml" for p in t.plans
             if all(getattr(p.call, k) == v for k, v in match.items())]
    assert len(found) == 1, match
    return found[0]


def value(fmt: str, bits: int):
    return get_format(fmt).to_fraction(int(bits))


def rn32(v):
    return v if isinstance(v, float) else round_fraction(v, "fp32")


# ------------------------------------------------------------ recorded plans
DECIDED = [  # (plan match, the hopper.toml library path it must equal)
    (dict(op="mm", a_dtype="float16", out_dtype="float32"), ("fp16", "fp32", "cublas")),
    (dict(op="mm", a_dtype="bfloat16", out_dtype="float32"), ("bf16", "fp32", "cublas")),
    (dict(op="mm", a_dtype="float16", out_dtype="float16"), ("fp16", "fp16", "cublas")),
    (dict(op="mm", a_dtype="float32", tf32=True), ("tf32", "fp32", "cublas")),
    (dict(op="scaled_mm", fast_accum=True), ("e4m3", "fp32", "scaled_mm_fast")),
    (dict(op="scaled_mm", fast_accum=False), ("e4m3", "fp32", "scaled_mm")),
]


@pytest.mark.parametrize("match,path", DECIDED, ids=[f"{p[0]}.{p[1]}.{p[2]}" for _, p in DECIDED])
def test_decided_plan_reproduces_library_path(match, path):
    """Each H100-decided plan is the hopper.toml library path (no split-K) and gives its bits exactly."""
    plan = h100_plan(**match)
    ref = resolve("hopper", *path)
    assert plan.split_k == 1 and plan.sources
    if ref.out_fmt == "fp32":
        assert plan.chain == ref
    else:  # fp16 output: the fp32 chain, then one RNE conversion (hopper.toml's fp16->fp16 cublas source)
        assert plan.chain == resolve("hopper", ref.in_fmt, "fp32", "cublas")
    rng = np.random.default_rng(RNG_SEED)
    K = plan.call.K
    A = random_bits(ref.in_fmt, (3, K), rng)
    B = random_bits(ref.in_fmt, (K, 4), rng)
    kw = {}
    if plan.call.scale:
        kw = dict(scale_a=np.array([1.0], np.float32), scale_b=np.array([1.0], np.float32))
    got = L.run(plan, A, B, **kw)
    a = np.repeat(A, 4, axis=0)
    b = np.tile(B.T, (3, 1))
    want = simulate_params(ref, a, b, np.zeros(12, dtype=get_format(ref.c_fmt).dtype)).reshape(3, 4)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_plan_api_prints_provenance():
    p = L.plan("mm", 256, 256, 256, a_dtype="bfloat16", out_dtype="float32")
    text = str(p)
    assert "h100_library_cublas.json" in text and "split-K : none" in text and "cuBLAS 13.1.0.3" in text


def test_plan_table_listed_by_models_command():
    r = CliRunner().invoke(main, ["models", "hopper"])
    assert r.exit_code == 0 and "models/library/h100_cublas13.toml" in r.output


# ------------------------------------------------------ split-K arithmetic
def make_plan(call: Call, chain=("bf16", "fp32", "cublas"), **kw) -> Plan:
    return Plan(call=call, gpu="test", library="test", chain=resolve("hopper", *chain),
                chain_spec="hopper " + ".".join(chain), sources=("test",), **kw)


@pytest.mark.parametrize("K,G,S,want", [
    (100, 16, 3, [48, 48, 4]),      # T = 7 tiles, q = ceil(7/3) = 3 tiles per slice, the remainder last
    (64, 16, 5, [16, 16, 16, 16, 0]),  # T = 4 < S: the fifth slice is empty
    (4096, 64, 4, [1024] * 4),
])
def test_contiguous_slices_follow_bitequiv(K, G, S, want):
    p = make_plan(Call("mm", 8, 8, K, "bfloat16", "bfloat16", "float32"), split_k=S, grain=G)
    rngs = p.slice_ranges()
    assert [len(r) for r in rngs] == want
    chunk = -(-(-(-K // G)) // S) * G  # bitequiv: ceil(ceil(K/G)/S)*G
    assert all(r == list(range(s * chunk, min(K, (s + 1) * chunk))) for s, r in enumerate(rngs) if r)


def test_interleaved_and_spread_slices():
    c = Call("mm", 8, 8, 80, "bfloat16", "bfloat16", "float32")
    inter = make_plan(c, split_k=2, grain=16, slices="interleaved").slice_ranges()
    assert inter[0] == list(range(16)) + list(range(32, 48)) + list(range(64, 80))  # tiles 0, 2, 4 (t mod S)
    assert inter[1] == list(range(16, 32)) + list(range(48, 64))
    spread = make_plan(c, split_k=3, grain=16, remainder="spread").slice_ranges()
    assert [len(r) for r in spread] == [32, 32, 16]  # T = 5 = 3 + 2: the first two slices get one more tile


def _slice_partials(plan: Plan, A, B):
    """Exact values of each slice's fp32 partial (the chain of hopper.toml, simulated per slice), +0 if empty."""
    out = []
    for ks in plan.slice_ranges():
        if not ks:
            out.append(np.full((A.shape[0], B.shape[1]), Fraction(0), dtype=object))
            continue
        a = np.repeat(A[:, ks], B.shape[1], axis=0)
        b = np.tile(B[ks, :].T, (A.shape[0], 1))
        d = simulate_params(plan.chain, a, b, np.zeros(len(a), np.uint32)).reshape(A.shape[0], B.shape[1])
        out.append(np.vectorize(lambda x: value("fp32", x), otypes=[object])(d))
    return out


def _reference_reduce(parts, scheme: str, out: str):
    if scheme == "fp32_forward":
        r = parts[0]
        for q in parts[1:]:
            r = rn32(r + q)
        return r
    if scheme == "pairwise":
        while len(parts) > 1:
            parts = [rn32(parts[i] + parts[i + 1]) for i in range(0, len(parts) - 1, 2)] + \
                    ([parts[-1]] if len(parts) % 2 else [])
        return parts[0]
    if scheme == "out_rounded":
        return _reference_reduce([round_fraction(q, out) for q in parts], "fp32_forward", out)
    r = round_fraction(parts[0], out)  # out_chain
    for q in parts[1:]:
        r = round_fraction(r + q, out)
    return r


@pytest.mark.parametrize("scheme", ["fp32_forward", "pairwise", "out_rounded", "out_chain"])
@pytest.mark.parametrize("out", ["float32", "bfloat16"])
def test_split_k_reduction_matches_exact_reference(scheme, out):
    """S = 5 over K = 200 (grain 16: slices 48, 48, 48, 48, 8), partials reduced per scheme, then RNE to out."""
    rng = np.random.default_rng(RNG_SEED)
    K = 200
    call = Call("mm", 4, 3, K, "bfloat16", "bfloat16", out)
    plan = make_plan(call, split_k=5, grain=16, reduce=scheme)
    A = random_bits("bf16", (2, K), rng, span=6)
    B = random_bits("bf16", (K, 3), rng, span=6)
    got = L.run(plan, A, B)
    parts = _slice_partials(plan, A, B)
    fo = {"float32": "fp32", "bfloat16": "bf16"}[out]
    for i in range(2):
        for j in range(3):
            red = _reference_reduce([p[i, j] for p in parts], scheme, fo)
            want = round_fraction(red, fo) if fo != "fp32" else red
            assert value(fo, got[i, j]) == want, (scheme, i, j)


def test_empty_slice_gives_plus_zero():
    """S = 5 with 4 tiles of 16: the fifth slice is empty, its partial +0, and the sum that of S = 4."""
    from tcsmt.library.evaluate import chain_gemm

    K = 64
    plan = make_plan(Call("mm", 3, 2, K, "bfloat16", "bfloat16", "float32"), split_k=5, grain=16)
    assert [len(r) for r in plan.slice_ranges()] == [16, 16, 16, 16, 0]
    rng = np.random.default_rng(RNG_SEED)
    A = random_bits("bf16", (3, K), rng, span=6)
    B = random_bits("bf16", (K, 2), rng, span=6)
    assert np.array_equal(chain_gemm(plan.chain, A[:, []], B[[], :]), np.zeros((3, 2), np.uint32))
    assert np.array_equal(L.run(plan, A, B), L.run(dataclasses.replace(plan, split_k=4), A, B))


# ------------------------------------------------------------ epilogues
def _chain_values(plan, A, B):
    return _slice_partials(dataclasses.replace(plan, split_k=1), A, B)[0]


@pytest.mark.parametrize("out", ["float32", "bfloat16"])
def test_scaled_mm_epilogue_matches_mmaemu(out):
    """alpha = RN32(scale_a*scale_b), y = RN32(acc*alpha + 0) (one FFMA), then RNE to out; per tensor and row-wise."""
    rng = np.random.default_rng(RNG_SEED)
    K = 256
    fo = {"float32": "fp32", "bfloat16": "bf16"}[out]
    A = random_bits("e4m3", (3, K), rng, span=4)
    B = random_bits("e4m3", (K, 2), rng, span=4)
    sa = np.array([0.3, 1.7, 2.0 ** -20], np.float32)
    sb = np.array([1.1, 3.0e5], np.float32)
    for kind in ("tensor", "row"):
        call = Call("scaled_mm", 3, 2, K, "float8_e4m3fn", "float8_e4m3fn", out, scale=kind)
        plan = make_plan(call, chain=("e4m3", "fp32", "scaled_mm"), epilogue=("scale",))
        if kind == "tensor":
            got = L.run(plan, A, B, scale_a=sa[:1], scale_b=sb[:1])
        else:
            got = L.run(plan, A, B, scale_a=sa, scale_b=sb)
        acc = _chain_values(plan, A, B)
        for i in range(3):
            for j in range(2):
                a_, b_ = (sa[0], sb[0]) if kind == "tensor" else (sa[i], sb[j])
                s = rn32(Fraction(float(a_)) * Fraction(float(b_)))
                want = round_fraction(rn32(acc[i, j] * s), fo)
                assert value(fo, got[i, j]) == want, (kind, i, j)


def test_alpha_beta_and_bias_epilogues_match_exact_reference():
    rng = np.random.default_rng(RNG_SEED)
    K = 64
    A = random_bits("bf16", (2, K), rng, span=5)
    B = random_bits("bf16", (K, 3), rng, span=5)
    C = random_bits("bf16", (2, 3), rng, span=5)
    bias = random_bits("bf16", (3,), rng, span=5)
    alpha, beta = 0.75, -1.5
    ab = make_plan(Call("addmm", 2, 3, K, "bfloat16", "bfloat16", "bfloat16", alpha=alpha, beta=beta),
                   epilogue=("alpha", "beta_c"))
    fused = dataclasses.replace(ab, epilogue=("alpha_beta_c",))
    bi = make_plan(Call("linear", 2, 3, K, "bfloat16", "bfloat16", "bfloat16", bias=True), epilogue=("bias",))
    acc = _chain_values(ab, A, B)
    g_ab, g_f, g_bi = L.run(ab, A, B, C=C), L.run(fused, A, B, C=C), L.run(bi, A, B, bias=bias)
    for i in range(2):
        for j in range(3):
            c = value("bf16", C[i, j])
            want_ab = rn32(Fraction(beta) * c + rn32(Fraction(alpha) * acc[i, j]))
            want_f = rn32(Fraction(alpha) * acc[i, j] + rn32(Fraction(beta) * c))
            want_bi = rn32(acc[i, j] + value("bf16", bias[j]))
            assert value("bf16", g_ab[i, j]) == round_fraction(want_ab, "bf16")
            assert value("bf16", g_f[i, j]) == round_fraction(want_f, "bf16")
            assert value("bf16", g_bi[i, j]) == round_fraction(want_bi, "bf16")


def test_run_is_tiled_and_independent_of_the_rows_asked(monkeypatch):
    """Outputs do not depend on which rows/columns are asked together, nor on the tile size."""
    import tcsmt.library.evaluate as E

    plan = h100_plan(op="mm", a_dtype="bfloat16")
    rng = np.random.default_rng(RNG_SEED)
    A = random_bits("bf16", (5, 256), rng, span=8)
    B = random_bits("bf16", (256, 4), rng, span=8)
    whole = L.run(plan, A, B)
    monkeypatch.setattr(E, "MAX_ELEMENTS", 300)  # one pair per tile
    monkeypatch.setattr(E, "MAX_OUTPUTS", 5)  # row blocks of one row
    assert np.array_equal(L.run(plan, A, B), whole)
    assert np.array_equal(L.run(plan, A[2:4], B[:, 1:3]), whole[2:4, 1:3])


# ------------------------------------------------------------ converter
RAW = {
    "gpu": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "cuda": "13.0", "cublas": "130100", "cublaslt": "130100",
    "workspace_bytes": 33554432, "method": "heuristic",
    "calls": [
        {"op": "mm", "M": 64, "N": 64, "K": 4096, "batch": 1, "a_dtype": "bfloat16", "b_dtype": "bfloat16",
         "out_dtype": "float32", "bias": False, "alpha": 1.0, "beta": 0.0, "tf32": False, "scale": None,
         "fast_accum": False, "kernels": ["nvjet_sm90_tss_64x64_splitK_x", "cublasLt::splitKreduce_kernel<f>"],
         "split_k": 4, "split_k_source": "heuristic"},
        {"op": "mm", "M": 1024, "N": 1024, "K": 1024, "batch": 1, "a_dtype": "bfloat16", "b_dtype": "bfloat16",
         "out_dtype": "float32", "scale": None, "kernels": ["nvjet_sm90_tss_256x128"], "split_k": 1,
         "split_k_source": "heuristic"},
        {"op": "mm", "M": 32, "N": 32, "K": 8192, "a_dtype": "bfloat16", "out_dtype": "float32",
         "kernels": ["nvjet_sm90_tss_splitK_y"], "split_k": None, "split_k_source": None},
        {"op": "mm", "M": 16, "N": 16, "K": 8192, "a_dtype": "float16", "out_dtype": "float16",
         "kernels": ["mystery_kernel"], "split_k": 3, "split_k_source": "bits"},
        {"op": "linear", "M": 64, "N": 64, "K": 64, "a_dtype": "bfloat16", "out_dtype": "bfloat16", "bias": True,
         "kernels": ["nvjet_sm90_tst_bias"], "split_k": 1, "split_k_source": "heuristic"},
    ],
    "families": {"nvjet_splitk": {"kernel_regex": "splitK", "grain": 64, "slices": "contiguous",
                                  "remainder": "last", "reduce": "fp32_forward", "evidence": "synthetic"}},
}


@pytest.fixture
def models_tmp(tmp_path, monkeypatch):
    """A models/ folder with hopper.toml and the committed plan tables, selected through TCSMT_MODELS."""
    d = tmp_path / "models"
    (d / "library").mkdir(parents=True)
    shutil.copy(REPO / "models" / "hopper.toml", d / "hopper.toml")
    shutil.copy(REPO / "models" / "library" / "h100_cublas13.toml", d / "library" / "h100_cublas13.toml")
    monkeypatch.setenv("TCSMT_MODELS", str(d))
    return d


def test_converter_makes_plans_and_names_what_is_unknown(tmp_path, models_tmp):
    """The recorded plan file gzipped, as evidence/ keeps them: the table names it by its JSON name."""
    raw = tmp_path / "h100_cublas_plans.json.gz"
    raw.write_bytes(gzip.compress(json.dumps(RAW).encode(), mtime=0))
    out = convert_file(raw)
    assert out == models_tmp / "library" / "h100_cublas13_recorded.toml.gz"
    text = read_table_text(out)
    assert "h100_cublas_plans.json" in text and "h100_cublas_plans.json.gz" not in text
    table = load_table(out)
    assert len(table.plans) == 2 and len(table.unknown) == 3
    p = L.plan("mm", 64, 64, 4096, a_dtype="bfloat16", out_dtype="float32")
    assert (p.split_k, p.grain, p.reduce, [len(r) for r in p.slice_ranges()]) == (4, 64, "fp32_forward", [1024] * 4)
    assert p.chain == resolve("hopper", "bf16", "fp32", "cublas") and "heuristic" in p.sources[0]
    assert L.plan("mm", 1024, 1024, 1024, a_dtype="bfloat16", out_dtype="float32").split_k == 1
    with pytest.raises(TcsmtError, match="split-K unknown"):
        L.plan("mm", 32, 32, 8192, a_dtype="bfloat16", out_dtype="float32")
    with pytest.raises(TcsmtError, match="slice rule unknown"):
        L.plan("mm", 16, 16, 8192, a_dtype="float16")
    with pytest.raises(TcsmtError, match="epilogue unknown"):
        L.plan("linear", 64, 64, 64, a_dtype="bfloat16", bias=True)
    with pytest.raises(TcsmtError, match="exists"):
        convert_file(raw)
    assert import_main([str(raw)]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert import_main([str(bad), "-o", str(tmp_path / "x.toml")]) == 2
    assert not (tmp_path / "x.toml").exists()


# ------------------------------------------------------------ replay
def make_inputs(call: dict, seed: int) -> dict:
    """A test-local deterministic input generator (the device's lives in tcsmt/hwcheck/library_calls.py)."""
    rng = np.random.default_rng(seed)
    fmt = {"bfloat16": "bf16", "float16": "fp16"}[call["a_dtype"]]
    return {"A": random_bits(fmt, (call["M"], call["K"]), rng, span=6),
            "B": random_bits(fmt, (call["K"], call["N"]), rng, span=6)}


def test_replay_confirms_the_model_and_catches_a_flipped_bit(tmp_path):
    call = {"op": "mm", "M": 8, "N": 6, "K": 320, "a_dtype": "bfloat16", "b_dtype": "bfloat16",
            "out_dtype": "bfloat16", "seed": 7, "dist": "test"}
    plan = make_plan(Call("mm", 8, 6, 320, "bfloat16", "bfloat16", "bfloat16"), split_k=3, grain=64)
    inputs = make_inputs(call, 7)
    full = L.run(plan, inputs["A"], inputs["B"])
    picks = [(0, 0), (7, 5), (3, 2), (3, 4), (5, 1)]
    call["samples"] = [[i, j, f"0x{int(full[i, j]):x}"] for i, j in picks]
    path = tmp_path / "val.json"
    path.write_text(json.dumps({"calls": [call]}))
    res = replay_file(path, make_inputs, plans={0: plan})
    assert res[0].checked == 5 and res[0].mismatches == []
    flipped = int(full[3, 4]) ^ 1
    call["samples"][3][2] = f"0x{flipped:x}"
    path.write_text(json.dumps({"calls": [call]}))
    res = replay_file(path, make_inputs, plans={0: plan})
    assert [m[:3] for m in res[0].mismatches] == [(None, 3, 4)]
    other = dataclasses.replace(plan, split_k=4)  # a different plan is refuted by the recorded bits
    assert replay_file(path, make_inputs, plans={0: other})[0].mismatches
    assert "split-K unknown" in replay_file(path, make_inputs)[0].error  # no recorded plan: reported, not guessed


# ------------------------------------------------------------ bad input
BAD_PLANS = [
    (dict(op="mm", M=64, N=64, K=64, a_dtype="bfloat16", gpu="a100"), "unknown GPU 'a100'"),
    (dict(op="gemv", M=64, N=64, K=64, a_dtype="bfloat16"), "unknown op 'gemv'"),
    (dict(op="mm", M=64, N=64, K=64, a_dtype="bfloat17"), "unknown a_dtype 'bfloat17'"),
    (dict(op="mm", M=0, N=64, K=64, a_dtype="bfloat16"), "M must be a positive integer"),
    (dict(op="mm", M=64, N=64, K=64, a_dtype="bfloat16", b_dtype="float16"), "torch refuses this call: expected mat1"),
    (dict(op="mm", M=64, N=64, K=64, a_dtype="bfloat16", out_dtype="float8_e4m3fn"), "torch refuses this call: out_dtype"),
    (dict(op="mm", M=64, N=64, K=64, a_dtype="float8_e4m3fn"), "torch refuses this call"),
    (dict(op="scaled_mm", M=64, N=64, K=64, a_dtype="float8_e4m3fn"), "needs scale_a and scale_b"),
    (dict(op="scaled_mm", M=64, N=64, K=64, a_dtype="float8_e5m2", scale="tensor"), "two Float8_e5m2"),
    (dict(op="scaled_mm", M=64, N=64, K=40, a_dtype="float8_e4m3fn", scale="tensor"), "divisible by 16"),
    (dict(op="mm", M=64, N=64, K=64, a_dtype="bfloat16", batch=2), "needs op bmm"),
    (dict(op="mm", M=64, N=64, K=64, a_dtype="bfloat16", alpha=2.0), "takes no alpha"),
    (dict(op="mm", M=64, N=64, K=4095, a_dtype="bfloat16", out_dtype="float32"),
     "no recorded cuBLAS plan for mm bfloat16 64x64x4095 -> float32 on h100"),
]


@pytest.mark.parametrize("kw,msg", BAD_PLANS, ids=[m[:30] for _, m in BAD_PLANS])
def test_bad_plan_requests_are_one_line_errors(kw, msg):
    kw = dict(kw)
    args = [kw.pop(k) for k in ("op", "M", "N", "K")]
    with pytest.raises(TcsmtError, match=msg.replace("(", r"\(").replace(")", r"\)")) as ei:
        L.plan(*args, **kw)
    assert "\n" not in str(ei.value)


def test_bad_run_inputs():
    plan = h100_plan(op="mm", a_dtype="bfloat16")
    A = np.zeros((2, 256), np.uint16)
    B = np.zeros((256, 3), np.uint16)
    with pytest.raises(TcsmtError, match="K = 256"):
        L.run(plan, A[:, :100], B)
    with pytest.raises(TcsmtError, match="1..256 rows"):
        L.run(plan, np.zeros((300, 256), np.uint16), B)
    with pytest.raises(TcsmtError, match="not exactly representable in bf16"):
        L.run(plan, np.full((1, 256), 0.1), B)
    with pytest.raises(TcsmtError, match="does not use C"):
        L.run(plan, A, B, C=np.zeros((2, 3), np.uint32))
    with pytest.raises(TcsmtError, match="needs a Plan"):
        L.run("mm", A, B)
    tf = h100_plan(op="mm", a_dtype="float32", tf32=True)
    raw32 = np.full((1, 256), 0x3f800001, np.uint32)  # 1 + 2^-23: not a tf32 value
    with pytest.raises(TcsmtError, match="not a tf32 bit pattern"):  # a plan with no input rounding recorded
        L.run(dataclasses.replace(tf, in_round=""), raw32, np.zeros((256, 1), np.uint32))
    ones = np.full((256, 1), 0x3f800000, np.uint32)  # the recorded plan rounds it (RNE) to 1 first
    assert int(L.run(tf, raw32, ones)[0, 0]) == FP32.from_fraction(256)
    sc = h100_plan(op="scaled_mm", fast_accum=True)
    a8, b8 = np.zeros((2, 512), np.uint8), np.zeros((512, 2), np.uint8)
    with pytest.raises(TcsmtError, match="pass scale_a"):
        L.run(sc, a8, b8)
    with pytest.raises(TcsmtError, match="must hold one value"):
        L.run(sc, a8, b8, scale_a=np.ones(2, np.float32), scale_b=np.ones(1, np.float32))


def test_numpy_facade_refuses_what_torch_refuses():
    with pytest.raises(TcsmtError, match=r"mat1 and mat2 shapes cannot be multiplied \(4x8 and 9x2\)"):
        L.mm(np.zeros((4, 8), np.uint16), np.zeros((9, 2), np.uint16), dtype="bfloat16")
    with pytest.raises(TcsmtError, match="scales must be one value each"):
        L.scaled_mm(np.zeros((4, 32), np.uint8), np.zeros((32, 16), np.uint8), np.ones(3, np.float32),
                    np.ones(1, np.float32), a_dtype="float8_e4m3fn", out_dtype="float32")
    with pytest.raises(TcsmtError, match="needs scale_a and scale_b"):
        L.scaled_mm(np.zeros((4, 32), np.uint8), np.zeros((32, 16), np.uint8), None, None, a_dtype="float8_e4m3fn")


def test_numpy_facade_mm_equals_run():
    plan = h100_plan(op="mm", a_dtype="float16", out_dtype="float16")
    rng = np.random.default_rng(RNG_SEED)
    A = random_bits("fp16", (3, 256), rng, span=4)
    B = random_bits("fp16", (256, 2), rng, span=4)
    assert np.array_equal(L.mm(A, B, dtype="float16", plan=plan), L.run(plan, A, B))


@pytest.mark.parametrize("argv,msg", [
    (["explain", "mm", "64", "64", "4095", "--dtype", "bfloat16"], "no recorded cuBLAS plan"),
    (["explain", "mm", "64", "64", "64", "--dtype", "bfloat16", "--gpu", "a100"], "unknown GPU"),
    (["explain", "mm", "64", "64", "64", "--dtype", "float8_e4m3fn"], "torch refuses"),
])
def test_explain_bad_input_exit_2(argv, msg):
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 2 and msg in r.output and r.output.count("\n") == 1


def test_explain_prints_plan():
    r = CliRunner().invoke(main, ["explain", "scaled_mm", "256", "256", "512", "--dtype", "float8_e4m3fn",
                                  "--out-dtype", "float32", "--scale", "tensor", "--fast-accum"])
    assert r.exit_code == 0 and "scaled_mm_fast" in r.output and "mmaemu" in r.output


# ------------------------------------------------------------ torch facade
def test_torch_facade_returns_tensors_of_torch_dtype():
    torch = pytest.importorskip("torch")
    import tcsmt.torch as tt

    plan = h100_plan(op="mm", a_dtype="bfloat16")
    rng = np.random.default_rng(RNG_SEED)
    A = random_bits("bf16", (3, 256), rng, span=4)
    B = random_bits("bf16", (256, 2), rng, span=4)
    tA = torch.from_numpy(A.view(np.int16)).view(torch.bfloat16)
    tB = torch.from_numpy(B.view(np.int16)).view(torch.bfloat16)
    out = tt.mm(tA, tB, out_dtype=torch.float32, plan=plan)
    assert out.dtype == torch.float32 and out.device == tA.device
    assert np.array_equal(out.view(torch.int32).numpy().view(np.uint32), L.run(plan, A, B))
    assert L.run(plan, tA, tB).dtype == torch.float32
    with pytest.raises(TcsmtError, match="shapes cannot be multiplied"):
        tt.mm(tA, tA)
    with pytest.raises(TcsmtError, match="same dtype"):
        tt.mm(tA, tB.to(torch.float16))
    with pytest.raises(TcsmtError, match="A_rows is a torch.float16 tensor; the plan takes bfloat16"):
        L.run(plan, tA.view(torch.float16), tB)


def test_torch_facade_linear_addmm_bmm_matmul_scaled_mm():
    torch = pytest.importorskip("torch")
    import tcsmt.torch as tt

    rng = np.random.default_rng(RNG_SEED)
    K = 64

    def bf(shape):
        return torch.from_numpy(random_bits("bf16", shape, rng, span=4).view(np.int16)).view(torch.bfloat16)

    x, w, bias, C = bf((3, K)), bf((2, K)), bf((2,)), bf((3, 2))
    lin = make_plan(Call("linear", 3, 2, K, "bfloat16", "bfloat16", "bfloat16", bias=True), epilogue=("bias",))
    got = tt.linear(x, w, bias, plan=lin)
    assert got.dtype == torch.bfloat16 and got.shape == (3, 2)
    assert torch.equal(got.view(torch.int16), L.run(lin, x, w.t(), bias=bias).view(torch.int16))
    add = make_plan(Call("addmm", 3, 2, K, "bfloat16", "bfloat16", "bfloat16", alpha=0.5, beta=2.0),
                    epilogue=("alpha", "beta_c"))
    got = tt.addmm(C, x, w.t(), beta=2.0, alpha=0.5, plan=add)
    assert torch.equal(got.view(torch.int16), L.run(add, x, w.t(), C=C).view(torch.int16))
    mm = make_plan(Call("mm", 3, 2, K, "bfloat16", "bfloat16", "bfloat16"))
    a3, b3 = torch.stack([x, x.flip(0)]), torch.stack([w.t(), w.t().flip(1)])
    got = tt.bmm(a3, b3, plan=mm)
    assert got.shape == (2, 3, 2) and torch.equal(got[1].view(torch.int16), L.run(mm, x.flip(0), w.t().flip(1)).view(torch.int16))
    got = tt.matmul(x.reshape(1, 3, K), w.t(), plan=mm)
    assert got.shape == (1, 3, 2) and torch.equal(got[0].view(torch.int16), L.run(mm, x, w.t()).view(torch.int16))
    with pytest.raises(TcsmtError, match="split-K and epilogue unknown"):
        tt.linear(x, w, bias)
    mix = L.plan("scaled_mm", 64, 64, 4096, a_dtype="float8_e4m3fn", b_dtype="float8_e5m2", out_dtype="float32",
                 scale="tensor")
    a8 = torch.from_numpy(random_bits("e4m3", (64, 4096), rng, span=3)).view(torch.float8_e4m3fn)
    b5 = torch.from_numpy(random_bits("e5m2", (4096, 64), rng, span=3)).view(torch.float8_e5m2)
    one = torch.tensor(1.0)
    got = tt.scaled_mm(a8, b5, one, one, out_dtype=torch.float32)  # the recorded e4m3 x e5m2 plan
    assert got.dtype == torch.float32 and got.shape == (64, 64)
    assert torch.equal(got[:2, :3], L.run(mix, a8[:2], b5[:, :3], scale_a=one, scale_b=one))
    sc = h100_plan(op="scaled_mm", fast_accum=True)
    a8 = torch.from_numpy(random_bits("e4m3", (2, 512), rng, span=3)).view(torch.float8_e4m3fn)
    b8 = torch.from_numpy(random_bits("e4m3", (512, 3), rng, span=3)).view(torch.float8_e4m3fn)
    one = torch.tensor(1.0)
    got = tt.scaled_mm(a8, b8, one, one, out_dtype=torch.float32, use_fast_accum=True, plan=sc)
    assert got.dtype == torch.float32
    assert torch.equal(got, L.run(sc, a8, b8, scale_a=one, scale_b=one))


@pytest.mark.parametrize("scheme", ["fp32_forward", "pairwise", "out_chain"])
def test_library_steps_run_on_the_smt_back_end(scheme):
    """The reduction and the FFMA of semantics.py encode to QF_BV terms that agree with the simulator."""
    pytest.importorskip("pysmt")
    from pysmt.shortcuts import Symbol
    from pysmt.typing import BVType

    from tcsmt.arith import semantics as sem
    from tcsmt.backends.numpy import NumpyBackend
    from tcsmt.backends.smt import SmtBackend
    from tcsmt.library.evaluate import IEEE32
    from tcsmt.solve.evaluate import evaluate

    S, NB = SmtBackend(), NumpyBackend()
    bf16 = get_format("bf16")
    names = [f"lib_{scheme}_p{i}" for i in range(3)]
    parts = [S.symbol(n, 32) for n in names]
    red, fmt = sem.reduce_partials(S, IEEE32, parts, FP32, bf16, scheme)
    fma = sem.fma_rounded(S, IEEE32, parts[0], parts[1], FP32, parts[2], FP32, FP32, "rne")
    rng = np.random.default_rng(RNG_SEED)
    vals = [random_bits("fp32", (400,), rng, finite=False).astype(np.int64) for _ in range(3)]
    env = {Symbol(n, BVType(32)): v for n, v in zip(names, vals)}
    want_red, _ = sem.reduce_partials(NB, IEEE32, vals, FP32, bf16, scheme)
    want_fma = sem.fma_rounded(NB, IEEE32, vals[0], vals[1], FP32, vals[2], FP32, FP32, "rne")
    assert np.array_equal(evaluate(S.pattern(red, fmt.storage_bits), env).astype(np.int64), np.asarray(want_red))
    assert np.array_equal(evaluate(S.pattern(fma, 32), env).astype(np.int64), np.asarray(want_fma).astype(np.int64))


def test_torch_facade_without_torch_is_a_one_line_error(monkeypatch):
    import sys

    import tcsmt.torch as tt

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    with pytest.raises(TcsmtError, match="tcsmt.torch needs PyTorch"):
        tt.mm(object(), object())


def _replay_h100_validation(picked: list[int] | None, tmp_path) -> tuple[list[int], list]:
    """(the calls replayed, their replays): the calls ``picked`` of evidence/h100_library_validation.json.gz (all
    where None), through :func:`replay_file` on a validation file holding those calls, first 4 samples each."""
    library_calls = pytest.importorskip("tcsmt.hwcheck.library_calls")
    path = REPO / "evidence" / "h100_library_validation.json.gz"
    if picked is None:
        return list(range(len(evidence_json("h100_library_validation.json.gz")["calls"]))), replay_file(path, library_calls.make_inputs,
                                                                                     max_samples=4)
    doc = evidence_json("h100_library_validation.json.gz")
    sub = tmp_path / "h100_library_validation_sample.json"
    sub.write_text(json.dumps({**doc, "calls": [doc["calls"][n] for n in picked]}))
    return picked, replay_file(sub, library_calls.make_inputs, max_samples=4)


def _check_h100_replay(picked: list[int], results: list) -> None:
    """Each replayed call against the committed replay summary (evidence/h100_library_replay.json, python -m
    tcsmt.library.replay ... --json): a call has no plan exactly where the summary says so; every other call
    reproduces its first sampled outputs bit for bit, except the calls of the committed findings, which give
    exactly the committed mismatches on every sample."""
    from tcsmt.hwcheck.library_calls import make_inputs

    summary = json.loads((REPO / "evidence" / "h100_library_replay.json").read_text())
    no_plan = {e["call"] for e in summary["no_plan"]}
    assert [n for n, r in zip(picked, results) if r.error or r.run_error] == [n for n in picked if n in no_plan]
    findings = {f["call"]: f for f in summary["findings"]}
    bad = [(n, r.label, r.mismatches[:2]) for n, r in zip(picked, results) if r.mismatches and n not in findings]
    assert not bad, bad
    calls = evidence_json("h100_library_validation.json.gz")["calls"]
    for n, r0 in zip(picked, results):
        if n in findings:
            r = replay_call(calls[n], make_inputs(calls[n], int(calls[n]["seed"])), r0.plan)
            assert [list(m) for m in r.mismatches] == findings[n]["mismatches"], n
    # no plan: 2 fp32 calls without tf32 whose kernels have no decided chain or slice rule (sm80 xmma
    # execute_split_k_kernel, gemmSN_NN_kernel); the e4m3 x e5m2 and SIMT-FFMA calls have one
    assert sorted(calls[n]["kernels"][0].split("_")[0] for n in no_plan) == ["gemmSN", "sm80"]
    assert summary["totals"]["replayed"] == len(calls) - len(no_plan) == 306


def h100_validation_sample() -> list[int]:
    """The calls the default run replays: every call whose inputs hold at most 2^20 values (184 of 308, 7 % of
    the 1.3 * 10^9 values make_inputs draws for all of them), the smallest call of every plan group
    (:func:`tcsmt.library.replay.kind_of`: 26 groups, 4 of them only in larger calls), the calls without a plan
    and those of committed findings, and 8 more drawn with random.Random(2026): 196 calls, 15 % of the values."""
    import random

    from tcsmt.library.replay import kind_of

    calls = evidence_json("h100_library_validation.json.gz")["calls"]
    summary = json.loads((REPO / "evidence" / "h100_library_replay.json").read_text())
    size = [(c["M"] * c["K"] + c["K"] * c["N"]) * c.get("batch", 1) for c in calls]
    picked = {n for n in range(len(calls)) if size[n] <= 1 << 20}
    smallest: dict[str, int] = {}
    for n in sorted(range(len(calls)), key=lambda n: size[n]):
        smallest.setdefault(kind_of(calls[n]), n)
    picked |= set(smallest.values()) | {e["call"] for e in summary["no_plan"]} | {f["call"] for f in summary["findings"]}
    rest = sorted(set(range(len(calls))) - picked)
    return sorted(picked | set(random.Random(2026).sample(rest, 8)))


def test_recorded_h100_validation_sample_replays_bit_exact(tmp_path):
    """The device's validation file (evidence/h100_library_validation.json.gz), a seeded sample of its calls
    (:func:`h100_validation_sample`: every plan group, the small calls, the calls without a plan), against the
    committed replay summary (:func:`_check_h100_replay`).  The replay of all 308 calls is
    test_recorded_h100_validation_replays_bit_exact (slow: make_inputs draws 1.3 * 10^9 random values)."""
    picked = h100_validation_sample()
    assert len(picked) == 196 and {100, 110} <= set(picked)
    _check_h100_replay(*_replay_h100_validation(picked, tmp_path))


@pytest.mark.slow
def test_recorded_h100_validation_replays_bit_exact(tmp_path):
    """The device's validation file (evidence/h100_library_validation.json.gz) replayed whole against the committed
    replay summary (:func:`_check_h100_replay`): every call, 4 samples each.  Slow (about 45 s of make_inputs on
    one core); the default run replays the sample of test_recorded_h100_validation_sample_replays_bit_exact."""
    _check_h100_replay(*_replay_h100_validation(None, tmp_path))


def test_simt_ffma_chain_is_a_serial_fma_chain():
    """The fp32 CUDA-core chain (models/hopper.toml simt_ffma) is acc = FFMA(a_k, b_k, acc) in k order from +0,
    each FFMA rounded once (RNE, IEEE 754 fusedMultiplyAdd, as semantics.fma_rounded): tiny, huge, zero and -0
    inputs included; the 4 recorded SIMT validation calls use it (h100_library_decisions.json)."""
    from tcsmt.arith import semantics as sem
    from tcsmt.backends.numpy import NumpyBackend
    from tcsmt.library.evaluate import IEEE32

    p = resolve("hopper", "fp32", "fp32", "simt_ffma")
    rng = np.random.default_rng(RNG_SEED)
    n, K = 120, 24
    a, b = rng.standard_normal((n, K)).astype(np.float32), rng.standard_normal((n, K)).astype(np.float32)
    a[:10] *= np.float32(1e-38)
    b[10:20] *= np.float32(1e30)
    a[20:30], a[30:40], b[30:40] = 0.0, -0.0, np.abs(b[30:40])
    ab, bb = a.view(np.uint32), b.view(np.uint32)
    acc = np.zeros(n, np.int64)
    for k in range(K):
        acc = np.asarray(sem.fma_rounded(NumpyBackend(), IEEE32, ab[:, k].astype(np.int64), bb[:, k].astype(np.int64),
                                         FP32, acc, FP32, FP32, "rne")).astype(np.int64)
    assert np.array_equal(simulate_params(p, ab, bb, np.zeros(n, np.uint32)).astype(np.int64), acc)
    plan = L.plan("mm", 64, 64, 4096, a_dtype="float32")  # cutlass_80_simt_sgemm, 66 slices
    assert plan.chain == p and plan.split_k == 66 and plan.kernels[0].startswith("cutlass::Kernel2<cutlass_80_simt")


MIXED = [("scaled_mm_fast_xe5m2", "scaled_mm_fast"), ("scaled_mm_xe5m2", "scaled_mm")]


@pytest.mark.parametrize("mixed,plain", MIXED)
def test_mixed_fp8_chain_is_the_e4m3_chain_with_b_in_e5m2(mixed, plain):
    """The e4m3 x e5m2 library chains are the H100-decided e4m3 chains with only B's format changed (the fp8 wgmma
    block of the wgmma_xe5m2 path, models/hopper.toml), and the recorded mixed plans name them."""
    p, q = resolve("hopper", "e4m3", "fp32", mixed), resolve("hopper", "e4m3", "fp32", plain)
    same = {f.name for f in dataclasses.fields(p)} - {"b_fmt", "instr", "instr_shape", "name", "sources"}
    assert p.b_fmt == "e5m2" and all(getattr(p, f) == getattr(q, f) for f in same)
    plan = L.plan("scaled_mm", 64, 64, 4096, a_dtype="float8_e4m3fn", b_dtype="float8_e5m2", out_dtype="float32",
                  scale="tensor", fast_accum=plain == "scaled_mm_fast")
    assert plan.chain == p and plan.kernels[0].startswith("nvjet_sm90_rq")


@pytest.mark.parametrize("mixed", [m for m, _ in MIXED])
def test_mixed_fp8_operand_order_changes_no_output(mixed):
    """cuBLAS's nvjet_sm90_rq* kernels take torch's mat2 (e5m2) as their A: the chain with A e5m2 and B e4m3 on
    the transposed problem gives the same bits as the plan's orientation (products are exact), so the plan need
    not know which wgmma operand holds e5m2.  Random, tiny, wide and special (inf/NaN/zero) patterns."""
    p = resolve("hopper", "e4m3", "fp32", mixed)
    swapped = dataclasses.replace(p, in_fmt="e5m2", b_fmt="e4m3")
    rng = np.random.default_rng(RNG_SEED)
    K = 300
    A = np.concatenate([random_bits("e4m3", (5, K // 2), rng, span=3), random_bits("e4m3", (5, K // 2), rng)], 1)
    B = np.concatenate([random_bits("e5m2", (K // 2, 6), rng, span=3), random_bits("e5m2", (K // 2, 6), rng)], 0)
    A[:, ::7] = 0
    A[0, 3], B[5, 1], B[9, 2] = 0x7F, 0x7C, 0x7E  # e4m3 NaN; e5m2 +inf (row 4 has a zero there: NaN), NaN
    from tcsmt.library.evaluate import _chain_numpy
    want = _chain_numpy(p, A, B)
    assert np.array_equal(_chain_numpy(swapped, np.ascontiguousarray(B.T), np.ascontiguousarray(A.T)).T, want)
    assert len({int(x) for x in want.reshape(-1)}) > 12  # 19 distinct of 30: finite sums, inf, NaN


def test_mixed_fp8_scaled_mm_numpy_facade():
    """L.scaled_mm with an e4m3 A and an e5m2 B under the recorded plan: the chain with B decoded as e5m2, then
    mmaemu's scale step (the recorded per-tensor epilogue)."""
    rng = np.random.default_rng(RNG_SEED)
    A, B = random_bits("e4m3", (256, 256), rng, span=3), random_bits("e5m2", (256, 256), rng, span=3)
    sa, sb = np.array(0.5, np.float32), np.array(4.0, np.float32)
    got = L.scaled_mm(A, B, sa, sb, a_dtype="float8_e4m3fn", b_dtype="float8_e5m2", out_dtype="float32")
    p = resolve("hopper", "e4m3", "fp32", "scaled_mm_xe5m2")
    rows = simulate_params(p, np.repeat(A[:2], 3, axis=0), np.tile(B[:, :3].T, (2, 1)), np.zeros(6, np.uint32))
    want = (rows.view(np.float32).astype(np.float64) * 2.0).astype(np.float32).reshape(2, 3)  # x2 is exact
    assert got.shape == (256, 256) and np.array_equal(got[:2, :3].view(np.uint32), want.view(np.uint32))


def test_scale_step_without_a_scaled_call_is_refused():
    """A plan whose epilogue scales but whose call has no scale kind ('tensor' or 'row') cannot size its scales:
    run() refuses it (before: the scales went unchecked into the epilogue)."""
    call = Call("scaled_mm", 3, 2, 32, "float8_e4m3fn", "float8_e4m3fn", "float32")
    plan = make_plan(call, chain=("e4m3", "fp32", "scaled_mm"), epilogue=("scale",))
    A, B = np.zeros((3, 32), np.uint8), np.zeros((32, 2), np.uint8)
    with pytest.raises(TcsmtError, match="no scale"):
        L.run(plan, A, B, scale_a=np.ones(3, np.float32), scale_b=np.ones(2, np.float32))


def test_row_blocks_keep_row_wise_scales_and_C_aligned(monkeypatch):
    import tcsmt.library.evaluate as E

    rng = np.random.default_rng(RNG_SEED)
    A = random_bits("e4m3", (4, 64), rng, span=3)
    B = random_bits("e4m3", (64, 3), rng, span=3)
    sa, sb = np.array([0.5, 2.0, 3.0, 0.25], np.float32), np.array([1.5, 0.75, 8.0], np.float32)
    plan = make_plan(Call("scaled_mm", 4, 3, 64, "float8_e4m3fn", "float8_e4m3fn", "bfloat16", scale="row"),
                     chain=("e4m3", "fp32", "scaled_mm_fast"), epilogue=("scale",))
    whole = L.run(plan, A, B, scale_a=sa, scale_b=sb)
    C = random_bits("bf16", (4, 3), rng, span=3)
    add = make_plan(Call("addmm", 4, 3, 64, "bfloat16", "bfloat16", "bfloat16", beta=1.0), epilogue=("beta_c",))
    Ab, Bb = random_bits("bf16", (4, 64), rng, span=3), random_bits("bf16", (64, 3), rng, span=3)
    whole_c = L.run(add, Ab, Bb, C=C)
    monkeypatch.setattr(E, "MAX_OUTPUTS", 3)  # row blocks of one row
    assert np.array_equal(L.run(plan, A, B, scale_a=sa, scale_b=sb), whole)
    assert np.array_equal(L.run(add, Ab, Bb, C=C), whole_c)
    assert len({int(x) for x in whole.reshape(-1)}) > 1


def test_compiled_kernel_is_used_per_slice_and_falls_back(monkeypatch):
    """tcsmt.kernels.cpu.gemm(params, A, B) runs each slice's chain; a TcsmtError from it falls back to numpy."""
    import types

    import tcsmt.library.evaluate as E

    rng = np.random.default_rng(RNG_SEED)
    plan = make_plan(Call("mm", 2, 2, 96, "bfloat16", "bfloat16", "float32"), split_k=3, grain=32)
    A, B = random_bits("bf16", (2, 96), rng, span=4), random_bits("bf16", (96, 2), rng, span=4)
    want = L.run(plan, A, B)
    seen = []

    def numpy_kernel(p, a, b, threads=None):
        seen.append(a.shape[1])
        return E._chain_numpy(p, a, b)

    monkeypatch.setattr(E, "_gemm_kernel", types.SimpleNamespace(gemm=numpy_kernel))
    assert np.array_equal(L.run(plan, A, B), want) and seen == [32, 32, 32]

    def refusing(p, a, b, threads=None):
        raise TcsmtError("unsupported")

    monkeypatch.setattr(E, "_gemm_kernel", types.SimpleNamespace(gemm=refusing))
    assert np.array_equal(L.run(plan, A, B), want)


def test_library_uses_the_compiled_cpu_kernel():
    """evaluate imports tcsmt.kernels.cpu by its real name: after the package split it imported a module that
    no longer existed, the ImportError read as 'numba missing', and every CPU call ran the numpy simulator
    (about 100x slower; benchmarks/bench_library_ops.py --before)."""
    from tcsmt.kernels import cpu
    from tcsmt.library import evaluate

    assert evaluate._gemm_kernel is cpu
