"""Library plans made from the recorded H100 data (evidence/library_plans.md): input rounding, residue-first K tiles, the
reductions and epilogues the recorded outputs decided, the converter's reading of the families, and the
library-level solver commands (discriminate --library, hwcheck --library).

Expected values: IEEE 754-2019 section 4.3.1 (roundTiesToEven, roundTiesToAway) computed exactly with
Fractions (conftest.round_fraction); the CUTLASS 2.x residue-first K iteration (the first tile of a K range
holds its K mod tile_k leading elements, PredicatedTileAccessIterator, NVIDIA/cutlass include/cutlass/
transform/threadblock/predicated_tile_access_iterator.h) written out by hand; the family summaries of
evidence/h100_cublas_plans.json.gz; the decisions of evidence/h100_library_decisions.json.
"""
from __future__ import annotations

import dataclasses
import json
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import REPO, evidence_json, round_fraction

from tcsmt import TcsmtError, resolve
from tcsmt import library as L
from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import get_format
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.cli import main
from tcsmt.library.convert import convert
from tcsmt.library.evaluate import IEEE32, chain_gemm, slice_operands
from tcsmt.library.families import grain_of, reduction_of
from tcsmt.library.plans import Call, Plan, read_table_text

FP32, TF32, BF16 = get_format("fp32"), get_format("tf32"), get_format("bf16")
B_ = NumpyBackend()
RESULTS = REPO / "evidence"


def plan_of(call: Call, **kw) -> Plan:
    fin = {"bfloat16": "bf16", "float16": "fp16", "float32": "tf32"}[call.a_dtype]
    chain = resolve("hopper", fin, "fp32", "cublas")
    return Plan(call=call, gpu="h100", library="test", chain=chain, chain_spec="hopper cublas", **kw)


# ------------------------------------------------------------------ fp32 -> tf32
@pytest.mark.parametrize("mode", ["rne", "rna", "rz"])
def test_tf32_input_rounding_is_ieee(mode):
    """fp32 -> tf32 (10 fraction bits) for ties, near-ties and carries, against exact IEEE rounding."""
    rng = np.random.default_rng(3)
    frac = np.concatenate([rng.integers(0, 1 << 23, 200), [0x1000, 0x3000, 0x2000 - 1, 0x7FFFFF, 0x7FF000, 0x1001]])
    expf = np.concatenate([rng.integers(1, 254, 200), [127, 127, 127, 127, 200, 1]])
    sign = np.arange(len(frac)) % 2
    bits = (sign << 31) | (expf << 23) | frac
    got = np.asarray(sem.convert(B_, bits.astype(np.int64), FP32, TF32, mode))
    for x, g in zip(bits, got):
        v = FP32.to_fraction(int(x))
        if mode == "rz":
            want = TF32.from_fraction(v) if v == 0 else int(x) & ~0x1FFF
        elif mode == "rne":
            want = TF32.from_fraction(round_fraction(v, "tf32"))
        else:  # ties away: the magnitude rounds up when the first dropped bit is 1
            want = (int(x) + 0x1000) & ~0x1FFF
        assert int(g) == want, (hex(int(x)), mode)


def test_plan_with_in_round_takes_fp32_and_rounds_it():
    call = Call("mm", 2, 2, 16, "float32", "float32", "float32", tf32=True)
    p = plan_of(call, in_round="rne")
    A = np.full((1, 16), 0x3F801000, np.uint32)  # 1 + 2^-11: a tie between 1 and 1 + 2^-10
    B = np.full((16, 1), 0x3F800000, np.uint32)
    assert int(L.run(p, A, B)[0, 0]) == FP32.from_fraction(16)  # RNE: ties to even, 1
    assert int(L.run(dataclasses.replace(p, in_round="rna"), A, B)[0, 0]) == FP32.from_fraction(16 * (1 + Fraction(1, 1024)))
    with pytest.raises(TcsmtError, match="not a tf32 bit pattern"):
        L.run(dataclasses.replace(p, in_round=""), A, B)  # no rounding recorded: tf32 values only


# ------------------------------------------------------------------ residue-first K tiles
def test_residue_first_tiles_pad_the_first_tile():
    call = Call("mm", 1, 1, 40, "bfloat16", "bfloat16", "float32")
    p = plan_of(call, k_tile=32)
    A = np.arange(1, 41, dtype=np.uint16)[None, :]
    B = np.arange(1, 41, dtype=np.uint16)[:, None]
    a, b = slice_operands(p, A, B, list(range(40)))
    assert a.shape == (1, 64) and b.shape == (64, 1)
    assert list(a[0, :8]) == list(range(1, 9)) and not a[0, 8:32].any() and list(a[0, 32:]) == list(range(9, 41))
    a2, _ = slice_operands(p, A, B, list(range(32)))  # a multiple of the tile: nothing inserted
    assert a2.shape == (1, 32)


def test_residue_first_tiles_change_the_block_grouping():
    """K = 40, tile 32: blocks [0, 8) + zeros, zeros, [8, 24), [24, 40) instead of [0, 16), [16, 32), [32, 40):
    a large term at k = 8 truncates the small ones before it only when they share its block."""
    call = Call("mm", 1, 1, 40, "bfloat16", "bfloat16", "float32")
    a = np.zeros(40, np.uint16)
    b = np.zeros(40, np.uint16)
    a[:8] = BF16.from_fraction(Fraction(3, 2 ** 27))  # 8 small products 3*2^-27
    a[8] = BF16.from_fraction(Fraction(1))
    b[:] = BF16.from_fraction(Fraction(1))
    flat, tiled = plan_of(call), plan_of(call, k_tile=32)
    y_flat = int(L.run(flat, a[None, :], b[:, None])[0, 0])
    y_tile = int(L.run(tiled, a[None, :], b[:, None])[0, 0])
    # their own block: 8*3*2^-27 = 3*2^-24 exactly; carried into 1's block (window LSB 2^-25: kept), the
    # block result truncated to fp32: 1 + 2^-23
    assert FP32.to_fraction(y_tile) == 1 + Fraction(1, 2 ** 23)
    # in 1's block each 3*2^-27 = 0.75*2^-25 falls below the window LSB 2^-25 and is truncated away
    assert FP32.to_fraction(y_flat) == 1
    ref = chain_gemm(flat.chain, np.concatenate([a[:8], np.zeros(24, np.uint16), a[8:]])[None, :],
                     np.concatenate([b[:8], np.zeros(24, np.uint16), b[8:]])[:, None])
    assert int(ref[0, 0]) == y_tile


# ------------------------------------------------------------------ reductions and epilogues
def test_out_chain_acc_add_rounds_twice():
    """r = RN_bf16(P0); r = RN_bf16(RN32(r + P1)): two roundings per step (the INPLACE serial split-K)."""
    p0 = FP32.from_fraction(1 + Fraction(1, 2 ** 8))  # bf16 half-way: RNE to 1
    p1 = FP32.from_fraction(Fraction(1, 2 ** 8) + Fraction(1, 2 ** 30))
    parts = [np.array([p0]), np.array([p1])]
    r, f = sem.reduce_partials(B_, IEEE32, parts, FP32, BF16, "out_chain_acc_add")
    # RN32(1 + 2^-8 + 2^-30) = 1 + 2^-8 (2^-30 is below fp32's half ulp at 1), then a bf16 tie: to even, 1
    assert f == BF16 and BF16.to_fraction(int(np.asarray(r)[0])) == 1
    r1, _ = sem.reduce_partials(B_, IEEE32, parts, FP32, BF16, "out_chain")  # one rounding: above the tie
    assert BF16.to_fraction(int(np.asarray(r1)[0])) == 1 + Fraction(1, 2 ** 7)


def test_scale_b_then_a_epilogue():
    call = Call("scaled_mm", 2, 2, 16, "float8_e4m3fn", "float8_e4m3fn", "float32", scale="row")
    chain = resolve("hopper", "e4m3", "fp32", "scaled_mm")
    p = Plan(call=call, gpu="h100", library="t", chain=chain, chain_spec="c", epilogue=("scale_b_then_a",))
    e4 = get_format("e4m3")
    A = np.full((1, 16), e4.from_fraction(Fraction(3, 2)), np.uint8)
    B = np.full((16, 1), e4.from_fraction(Fraction(5, 4)), np.uint8)
    sa, sb = Fraction(1) + Fraction(1, 2 ** 23), Fraction(3, 2)
    got = L.run(p, A, B, scale_a=np.array([FP32.from_fraction(sa)], np.uint32),
                scale_b=np.array([FP32.from_fraction(sb)], np.uint32))
    want = round_fraction(round_fraction(30 * sb, "fp32") * sa, "fp32")
    assert FP32.to_fraction(int(got[0, 0])) == want


# ------------------------------------------------------------------ converter
def test_grain_rule_and_family_reductions_as_recorded():
    fams = evidence_json("h100_cublas_plans.json.gz")["families"]
    cut = fams["cutlass_sm80_16bit_splitK_output_type"]
    assert (grain_of(cut, 1024, "t"), grain_of(cut, 1000, "t")) == (32, 8)
    assert grain_of(fams["cutlass_sm80_fp32_splitK"], 1000, "t") == 4
    assert grain_of(fams["nvjet_sm90_16bit_splitK"], 1000, "t") == 64
    assert reduction_of(cut, "bfloat16") == ("out_rounded", "")
    assert reduction_of(cut, "float32") == ("fp32_forward", "")
    assert reduction_of(fams["cutlass_sm80_16bit_splitK_inplace"], "float16") == ("out_chain_acc_add", "")
    assert reduction_of(fams["nvjet_sm90_16bit_splitK"], "bfloat16") == ("fp32_forward", "")
    name, why = reduction_of({"reduce": "fp32 out: fp32_forward (x)"}, "bfloat16")
    assert name is None and "not recorded" in why
    with pytest.raises(TcsmtError, match="cannot read the family's grain"):
        grain_of({"grain": "32 when K is even"}, 64, "t")


def test_converter_uses_the_recorded_family_and_decisions():
    fams = {"f": {"kernel_regex": "k", "grain": "32 if K % 32 == 0 else 8", "reduce": "fp32_forward"},
            "g": {"kernel_regex": "k", "grain": 64, "reduce": "fp32_forward"}}
    base = {"gpu": "NVIDIA H100 80GB HBM3", "cublas": "1", "cublaslt": "1", "torch": "t", "families": fams,
            "calls": [{"op": "mm", "M": 8, "N": 8, "K": 1000, "a_dtype": "float16", "out_dtype": "float32",
                       "kernels": ["cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_f16_64x64_32x6_nn>"],
                       "split_k": 4, "split_k_source": "cublaslt_log", "family": "f"},
                      {"op": "mm", "M": 8, "N": 8, "K": 512, "a_dtype": "float32", "tf32": True,
                       "out_dtype": "float32", "kernels": ["sm90_xmma_tf32"], "split_k": 1,
                       "split_k_source": "cublaslt_log"}]}
    decisions = {"gpu": base["gpu"], "decisions": [
        {"match": {"kernel_regex": "^cutlass::Kernel2<cutlass_80_"},
         "set": {"k_tile_regex": r"_\d+x\d+_(\d+)x\d+_"}, "evidence": "e1"},
        {"match": {"tf32": True}, "set": {"in_round": "rne"}, "evidence": "e2"}]}
    text = convert(base, "p.json", None, [], decisions, "d.json")
    assert 'grain = 8' in text and 'k_tile = 32' in text and 'in_round = "rne"' in text  # family f, not g
    assert "e1" in text and "e2" in text
    bad = dict(base, calls=[dict(base["calls"][0], family="nope")])
    with pytest.raises(TcsmtError, match="family 'nope' is not among"):
        convert(bad, "p.json")


# ------------------------------------------------------------------ the recorded table
def test_recorded_table_has_the_decided_facts():
    p = L.plan("mm", 100, 300, 1000, a_dtype="float16", out_dtype="float32")
    assert (p.split_k, p.grain, p.k_tile, p.reduce) == (13, 8, 32, "fp32_forward")
    assert [len(s) for s in p.slice_ranges()] == [80] * 12 + [40]
    t = L.plan("mm", 64, 64, 4096, a_dtype="float32", tf32=True)
    assert t.in_round == "rne" and "decided from recorded outputs" in " ".join(t.sources)
    r = L.plan("scaled_mm", 64, 64, 4096, a_dtype="float8_e4m3fn", out_dtype="float32", scale="row")
    assert r.epilogue == ("scale_b_then_a",)
    assert L.plan("linear", 64, 64, 4096, a_dtype="bfloat16").epilogue == ()


# ------------------------------------------------------------------ discriminate --library
def test_discriminate_library_split_k_3_vs_4(tmp_path):
    out = tmp_path / "d.json"
    res = CliRunner().invoke(main, ["discriminate", "--library", "mm:64x64x4096:bfloat16", "--plan-b", "split_k=4",
                                    "--output", str(out)])
    assert res.exit_code == 0, res.output
    assert "slice probe at k = 1024" in res.output
    doc = json.loads(out.read_text())
    a = np.array([int(x, 16) for x in doc["a_row"]], np.uint16)
    b = np.array([int(x, 16) for x in doc["b_col"]], np.uint16)
    pa = L.plan("mm", 64, 64, 4096, a_dtype="bfloat16")
    pb = dataclasses.replace(pa, split_k=4)
    ya, yb = int(L.run(pa, a[None, :], b[:, None])[0, 0]), int(L.run(pb, a[None, :], b[:, None])[0, 0])
    assert (f"0x{ya:x}", f"0x{yb:x}") == (doc["outputs"]["A"], doc["outputs"]["B"]) and ya != yb


def test_discriminate_library_reduction_and_promotion():
    r = CliRunner().invoke(main, ["discriminate", "--no-save", "--library", "mm:64x64x4096:bfloat16",
                                  "--plan-b", "reduce=out_rounded"])
    assert r.exit_code == 0 and "reduction probe" in r.output, r.output
    r = CliRunner().invoke(main, ["discriminate", "--no-save", "--library",
                                  "scaled_mm:256x256x512:float8_e4m3fn:scale=tensor,out=float32",
                                  "--plan-a", "promote=128", "--plan-b", "promote=256"])
    assert r.exit_code == 0 and "slice probe at k = 128" in r.output, r.output


BAD_DISCRIMINATE = [
    (["--plan-b", "foo=4"], "unknown plan field 'foo'"),
    (["--plan-b", "split_k=3"], "the two plans compute the same thing"),
    (["--plan-b", "split_k=x"], "split_k is an integer"),
    ([], "give --plan-b"),
    (["--plan-b", "reduce=sideways"], "reduce must be one of"),
]


@pytest.mark.parametrize("extra,msg", BAD_DISCRIMINATE, ids=[m[:24] for _, m in BAD_DISCRIMINATE])
def test_discriminate_library_bad_input(extra, msg):
    r = CliRunner().invoke(main, ["discriminate", "--no-save", "--library", "mm:64x64x4096:bfloat16", *extra])
    assert r.exit_code == 2 and msg in r.output and r.output.count("\n") == 1, r.output


def test_discriminate_library_unrecorded_call_needs_both_plans():
    r = CliRunner().invoke(main, ["discriminate", "--no-save", "--library", "mm:64x64x4095:bfloat16",
                                  "--plan-b", "split_k=2"])
    assert r.exit_code == 2 and "no recorded cuBLAS plan" in r.output and "--plan-a" in r.output
    r = CliRunner().invoke(main, ["discriminate", "--no-save", "--library", "mm:64x64x4095:bfloat16",
                                  "--plan-a", "split_k=1", "--plan-b", "split_k=2,grain=64"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["discriminate", "--no-save", "--library", "mm:64x4096:bfloat16", "--plan-b", "x=1"])
    assert r.exit_code == 2 and "the shape of a library call is MxNxK" in r.output


# ------------------------------------------------------------------ hwcheck --library
def test_hwcheck_library_without_a_gpu_skips(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)
    r = CliRunner().invoke(main, ["hwcheck", "--library", "mm:64x64x4096:bfloat16"])
    assert r.exit_code == 2 and "skipped: torch is not installed" in r.output and r.output.count("\n") == 1


def test_hwcheck_library_confirms_and_refutes_with_a_simulated_device(tmp_path):
    """A device that computes with the recorded plan: the recorded plan is confirmed, split_k=4 refuted."""
    from tcsmt.cli.library_cmd import hwcheck_library
    from tcsmt.library.replay import replay_call

    recorded = L.plan("mm", 64, 64, 4096, a_dtype="bfloat16", out_dtype="float32")

    def device(call, inputs):  # the plan's outputs at every sampled position (others 0)
        out = np.zeros((call["M"], call["N"]), np.uint32)
        picks = [s[:2] for s in call["samples"]]
        sim = dict(call, samples=[[i, j, "0x0"] for i, j in picks])
        r = replay_call(sim, inputs, recorded)
        for (_, i, j, _, got) in r.mismatches:
            out[i, j] = int(got, 16)
        return out

    save = tmp_path / "r.json"
    status = hwcheck_library("mm:64x64x4096:bfloat16:out=float32", "h100", ("split_k=4",), None, 3, 16, "normal", str(save),
                             False, device_run=device)
    doc = json.loads(save.read_text())
    assert status == 1 and [p["verdict"] for p in doc["plans"]] == ["confirmed", "refuted"]


@pytest.mark.slow  # regenerates a committed file from the evidence: run with -m slow when the converter, rules or evidence change
def test_recorded_table_is_the_converters_output():
    """models/library/h100_cublas13_recorded.toml.gz is exactly what the converter makes from the committed recorded
    files (plans, validation calls, decisions): nothing in it is edited by hand."""
    raw, val = evidence_json("h100_cublas_plans.json.gz"), evidence_json("h100_library_validation.json.gz")
    dec = evidence_json("h100_library_decisions.json")
    probes = [(n, evidence_json(f"library/{n}")) for n in
              ("h100_layout_probes.json", "h100_layout_probes_fresh.json", "h100_layout_probes_kfloor2.json")]
    text = convert(raw, "h100_cublas_plans.json", None, [("h100_library_validation.json", val)], dec,
                   "h100_library_decisions.json", probe_files=probes)
    assert text == read_table_text(REPO / "models" / "library" / "h100_cublas13_recorded.toml.gz")


@pytest.mark.slow
def test_decisions_are_reproduced_from_the_recorded_outputs():
    """evidence/h100_library_decisions.json is what library_decide computes with the addmm beta = 1 samples
    (``--more``) and the sm75 CUTLASS chain probe (``--probe``): about 30 minutes on 2 cores."""
    from tools.library import chain_probe
    from tools.library.decide import MORE, decide, read_more

    raw, val = evidence_json("h100_cublas_plans.json.gz"), evidence_json("h100_library_validation.json.gz")
    probe = RESULTS / "library" / "h100_sm75_cutlass_chain_probe.json"
    out = decide(raw, val, "h100_library_validation.json", log=lambda *_: None, more=read_more(MORE),
                 more_name=" + ".join(p.name for p in MORE), probe=chain_probe.load(probe), probe_name=probe.name)
    assert json.loads(json.dumps(out)) == json.loads((RESULTS / "h100_library_decisions.json").read_text())


@pytest.mark.parametrize("K", [2, 13, 31, 32])
def test_a_slice_no_longer_than_its_k_tile_is_the_same_either_way(K):
    """``rules.checked_entry`` answers CUTLASS calls whose K iteration is undecided where every slice fits in one K
    tile: residue first is then the slice's k's followed by zero products only, and the blocks of the chain give the
    same sums (zero products join no alignment).  Wide bf16 values (exponents -20..20), fp32 out."""
    rng = np.random.default_rng(K)
    chain = resolve("hopper", "bf16", "fp32", "cublas")
    call = Call("mm", 64, 64, K, "bfloat16", "bfloat16", "float32")
    plan = Plan(call=call, gpu="h100", library="test", chain=chain, chain_spec="hopper bf16->fp32 (cublas)")
    a = (rng.standard_normal((64, K)) * np.exp2(rng.integers(-20, 21, (64, K)))).astype(np.float32)
    b = (rng.standard_normal((K, 64)) * np.exp2(rng.integers(-20, 21, (K, 64)))).astype(np.float32)
    A, B = ((x.view(np.uint32) >> 16).astype(np.uint16) for x in (a, b))
    plain = np.asarray(L.run(plan, A, B))
    assert np.array_equal(plain, np.asarray(L.run(dataclasses.replace(plan, k_tile=32), A, B)))
    if K > 16 and K % 16:  # a tile shorter than the slice, its residue cutting a block: another chain
        other = np.asarray(L.run(dataclasses.replace(plan, k_tile=16), A, B))
        assert not np.array_equal(plain, other)
