"""``tcsmt record`` without a GPU: call specs and their one-line errors, the dispatch-mode collector's reading of
aten GEMM ops (from operand descriptions, and from a real CPU torch program where torch is installed), the
recorder's output format, and catalogs built from a committed recording (tests/data/recordings, an H200 subset),
looked up through $TCSMT_PLANS and refused under another stamp.  A few seconds; the GPU test at the end records
for real where CUDA is present."""
from __future__ import annotations

import gzip
import json
import re
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tcsmt.cli.record_cmd import record_cmd
from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.gemm_calls import Operand, gemm_calls
from tcsmt.hwcheck.record import recording
from tcsmt.library.catalog import Catalog
from tcsmt.library.catalog_build import build_catalog, read_recording, token_counts
from tcsmt.library.lookup import answer, parse_record_spec, record_spec

REPO = Path(__file__).resolve().parents[1]
SUBSET = REPO / "tests" / "data" / "recordings" / "h200_layers_16bit_subset.json.gz"
CATALOG = "h200_cublas130100_torch2.11.0-cu130_recorded.sqlite"


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture
def catalogs_only(monkeypatch):
    """Lookups through the recorded catalogs alone: the shipped plan tables (53,000 plans, tens of seconds to load on
    a busy 2-core machine) and the shipped catalogs are left out; test_library*.py test them and their precedence."""
    from pathlib import Path

    from tcsmt.library import lookup

    monkeypatch.setattr(lookup, "table_lookup", lambda call, gpu: (None, ""))
    monkeypatch.setattr(lookup, "gpus", lambda: [])
    monkeypatch.setattr(lookup, "plans_dir", lambda: Path("/nonexistent-shipped-plans"))


# ------------------------------------------------------------------ call specs
@pytest.mark.parametrize("spec", [
    "mm 4096x11008x4096 bfloat16",
    "mm 1x4096x11008 bfloat16 a_t=1",
    "linear 77x4096x11008 float16 bias=1",
    "addmm 7x4096x4096 bfloat16 bias=1 b_t=1 beta=1",
    "addmm 8x8x8 float16 alpha=0.1 beta=2.5",
    "bmm 512x512x64x32 float16 b_t=1",
    "mm 64x64x64 float32 tf32=1",
    "mm 64x64x64 bfloat16 out_dtype=float32",
    "scaled_mm 16x4096x4096 float8_e4m3fn b_dtype=float8_e5m2 out_dtype=bfloat16 fast_accum=1 scale=row",
    "mm 1x4096x11008 bfloat16 settings=blas=cublaslt,reduced=off",
    "mm 64x64x64 float32 tf32=1 settings=CUBLAS_WORKSPACE_CONFIG=:0:0",
])
def test_spec_round_trip(spec):
    assert record_spec(parse_record_spec(spec)) == spec


@pytest.mark.parametrize("spec, says", [
    ("mm 4096x11008 bfloat16", "the shape is MxNxK"),
    ("mm 4x4x4", "a call is 'OP MxNxK DTYPE"),
    ("mx 4x4x4 bfloat16", "unknown op 'mx'"),
    ("mm 4x4x4x2 bfloat16", "a batch (MxNxKxBATCH) applies to bmm only"),
    ("mm 4x4x4 bfloat16 foo=1", "unknown key 'foo'"),
    ("mm 4x4x4 bfloat16 bias", "'bias' is not key=value"),
    ("mm 4x4x4 bfloat17", "unknown a_dtype 'bfloat17'"),
    ("mm 4x4x4 bfloat16 a_t=2", "a_t=2 is not 1 or 0"),
    ("mm 4x4x4 bfloat16 alpha=x", "alpha=x is not a number"),
    ("mm 0x4x4 bfloat16", "M must be a positive integer"),
    ("mm 4x4x4 float32 settings=reduced=off", "not the canonical key"),
    ("mm 4x4x4 bfloat16 settings=blas=foo", "blas must be one of cublas, cublaslt"),
    ("linear 4x4x4 bfloat16 b_t=1", "linear takes the (N, K) weight as it is"),
    ("scaled_mm 16x20x16 float8_e4m3fn scale=tensor out_dtype=bfloat16", "torch refuses this call"),
])
def test_bad_spec_is_one_line(runner, spec, says):
    r = runner.invoke(record_cmd, ["--call", spec, "--dry-run"])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tcsmt: error: call {spec!r}: ") and says in lines[0], r.output


@pytest.mark.parametrize("argv, says", [
    ([], "nothing to record"),
    (["--script", __file__, "--module", "x"], "not both"),
    (["--call", "mm 4x4x4 bfloat16", "extra"], "unexpected arguments"),
    (["--recording", str(SUBSET), "--call", "mm 4x4x4 bfloat16"], "give no calls"),
    (["--call", "mm 4x4x4 bfloat16", "--name", "a/b"], "--name 'a/b'"),
])
def test_bad_usage_is_one_line(runner, argv, says):
    r = runner.invoke(record_cmd, [*argv])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and says in r.output, r.output


def test_dry_run_lists_the_calls(runner, tmp_path):
    f = tmp_path / "calls.txt"
    f.write_text("# layers\nlinear 77x4096x11008 bfloat16\n\nmm 4096x4096x77 bfloat16 a_t=1  # weight gradient\n")
    r = runner.invoke(record_cmd, ["--calls", str(f), "--call", "mm 77x11008x4096 bfloat16", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == ["linear 77x4096x11008 bfloat16", "mm 4096x4096x77 bfloat16 a_t=1",
                                     "mm 77x11008x4096 bfloat16", "# 3 calls to record, 0 GEMM calls skipped"]


# ------------------------------------------------------------------ the collector's reading of aten ops
def op(shape, stride, dtype="bfloat16", misalign=0):
    return Operand(tuple(shape), tuple(stride), dtype, misalign)


T, N, K = 24, 48, 64
X = op((T, K), (K, 1))                 # activations, contiguous
WT = op((K, N), (1, K))                # weight.t() of a contiguous (N, K) weight
G = op((T, N), (N, 1))                 # grad_out
W = op((N, K), (K, 1))


def test_linear_forward_and_backward_ops():
    fwd = gemm_calls("mm", "default", {"self": X, "mat2": WT})
    assert [c["op"] for c in fwd] == ["mm", "linear"]
    assert fwd[0] | {"tf32": False} == {"op": "mm", "M": T, "N": N, "K": K, "batch": 1, "a_dtype": "bfloat16",
                                        "b_dtype": "bfloat16", "out_dtype": "bfloat16", "a_t": False, "b_t": True,
                                        "tf32": False}
    biased = gemm_calls("addmm", "default", {"self": op((N,), (1,)), "mat1": X, "mat2": WT, "beta": 1, "alpha": 1})
    assert [(c["op"], c["bias"]) for c in biased] == [("addmm", True), ("linear", True)]
    dgrad, = gemm_calls("mm", "default", {"self": G, "mat2": W})  # grad_out @ W
    assert (dgrad["M"], dgrad["N"], dgrad["K"], dgrad["a_t"], dgrad["b_t"]) == (T, K, N, False, False)
    wgrad, = gemm_calls("mm", "default", {"self": op((N, T), (1, N)), "mat2": X})  # grad_out.t() @ x
    assert (wgrad["M"], wgrad["N"], wgrad["K"], wgrad["a_t"], wgrad["b_t"]) == (N, K, T, True, False)


def test_other_modelled_ops():
    c, = gemm_calls("addmm", "default", {"self": op((T, N), (N, 1)), "mat1": X, "mat2": op((K, N), (N, 1)),
                                         "beta": 0.5, "alpha": 2})
    assert (c["bias"], c["alpha"], c["beta"], c["b_t"]) == (False, 2.0, 0.5, False)
    c, = gemm_calls("mm", "dtype", {"self": X, "mat2": WT, "out_dtype": "float32"})
    assert c["out_dtype"] == "float32"  # no linear: at::linear has no out_dtype
    c, = gemm_calls("mm", "default", {"self": op((T, K), (K, 1), "float32"), "mat2": op((K, N), (N, 1), "float32")},
                    tf32=True)
    assert c["tf32"] is True
    c, = gemm_calls("bmm", "default", {"self": op((8, T, K), (T * K, K, 1)), "mat2": op((8, K, N), (N * K, 1, K))})
    assert (c["batch"], c["M"], c["N"], c["K"], c["a_t"], c["b_t"]) == (8, T, N, K, False, True)
    e4 = "float8_e4m3fn"
    one = op((), (), "float32")
    c, = gemm_calls("_scaled_mm", "default", {"self": op((T, K), (K, 1), e4), "mat2": op((K, N), (1, K), e4),
                                              "scale_a": one, "scale_b": one, "out_dtype": "bfloat16",
                                              "use_fast_accum": True})
    assert (c["scale"], c["fast_accum"], c["out_dtype"], c["b_t"]) == ("tensor", True, "bfloat16", True)
    c, = gemm_calls("_scaled_mm", "default", {"self": op((T, K), (K, 1), e4), "mat2": op((K, N), (1, K), e4),
                                              "scale_a": op((T, 1), (1, 1), "float32"),
                                              "scale_b": op((1, N), (N, 1), "float32"), "out_dtype": "bfloat16"})
    assert c["scale"] == "row"


@pytest.mark.parametrize("name, args, says", [
    ("mm", {"self": op((T, K), (3 * K, 1)), "mat2": WT}, "neither contiguous"),        # a slice of a fused qkv
    ("mm", {"self": op((T, K), (K, 1), misalign=64), "mat2": WT}, "64 bytes past a 256-byte boundary"),
    ("baddbmm", {}, "no plan model"),
    ("matmul", {}, "seen whole"),
    ("addmm", {"self": op((1, N), (N, 1)), "mat1": X, "mat2": WT}, "a bias (N,) or a contiguous (M, N) matrix"),
    ("_scaled_mm", {"self": op((T, K), (K, 1), "float8_e4m3fn"), "mat2": op((K, N), (N, 1), "float8_e4m3fn"),
                    "scale_a": op((), (), "float32"), "scale_b": op((), (), "float32")}, "column-major B"),
])
def test_unmodelled_calls_are_refused_with_their_reason(name, args, says):
    with pytest.raises(TcsmtError, match=says.replace("(", r"\(").replace(")", r"\)")):
        gemm_calls(name, "default", args)


# ------------------------------------------------------------------ recordings and catalogs
def test_record_from_recording_then_lookup_through_env(runner, tmp_path, monkeypatch, catalogs_only):
    r = runner.invoke(record_cmd, ["--recording", str(SUBSET), "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert (tmp_path / CATALOG).is_file() and "3032 recorded calls of NVIDIA H200 (h200)" in r.output
    again = runner.invoke(record_cmd, ["--recording", str(SUBSET), "--out", str(tmp_path)])
    assert again.exit_code == 2 and "exists (pass --force" in again.output
    assert runner.invoke(record_cmd, ["--recording", str(SUBSET), "--out", str(tmp_path), "--force"]).exit_code == 0
    monkeypatch.setenv("TCSMT_PLANS", str(tmp_path))
    a = answer(parse_record_spec("linear 77x4096x11008 bfloat16"), "h200")
    assert a.kind == "recorded catalog" and a.plan.split_k == 2 and a.plan.grain == 64
    # S = 2 at M = 17..152 but for M = 64 (S = 3): the catalog keeps the odd counts as one run
    assert "the run M = 17..151 step 2" in a.evidence[0]
    wgrad = answer(parse_record_spec("mm 4096x4096x300 bfloat16 a_t=1"), "h200")  # a run over K
    assert wgrad.kind == "recorded catalog" and wgrad.plan.call.K == 300
    with pytest.raises(TcsmtError, match=r"record it on that GPU with `tcsmt record --call 'linear 777x4096x11008 "
                                         r"bfloat16'`"):
        answer(parse_record_spec("linear 777x4096x11008 bfloat16"), "h200")
    try:
        from tcsmt.cli import main
    except ImportError:  # a GPU host without the solver packages: tcsmt's command group is not importable there
        return
    shown = runner.invoke(main, ["explain", "linear", "77", "4096", "11008", "--dtype", "bfloat16", "--gpu", "h200"])
    assert shown.exit_code == 0 and "recorded catalog" in shown.output and "S = 2" in shown.output
    assert f"recorded in {CATALOG}: the run M = 17..151 step 2" in " ".join(shown.output.split())


def test_mismatched_stamp_is_refused_by_name(tmp_path, catalogs_only):
    rec = read_recording(SUBSET)
    build_catalog([("subset", rec)], tmp_path / "c.sqlite")
    stamp = Catalog(tmp_path / "c.sqlite").stamp
    call = parse_record_spec("linear 77x4096x11008 bfloat16")
    assert answer(call, "h200", plans_dirs=(str(tmp_path),), stamp=stamp).kind == "recorded catalog"
    for key, value in (("torch", "2.12.0+cu130"), ("cublas", "130200"), ("gpu_name", "NVIDIA H100 80GB HBM3")):
        with pytest.raises(TcsmtError, match=re.escape(f"c.sqlite was recorded under {key} '{stamp[key]}' "
                                                       f"(running: '{value}')")):
            answer(call, "h200", plans_dirs=(str(tmp_path),), stamp={**stamp, key: value})
    with pytest.raises(TcsmtError, match="'h100'"):  # an H200 catalog never answers for the H100
        answer(call, "h100", plans_dirs=(str(tmp_path),))


def _results_of(rec, task, t):
    """One call of the committed recording as the recorder's capture would have returned it (nodes, trace lines)."""
    tables = rec["tables"]
    cols = task["runs"]
    ms = token_counts(task["ms"])
    j = next(i for i, (lo, hi) in enumerate(zip(cols["t_first"], cols["t_last"])) if lo <= t <= hi)
    assert t in ms
    kern, blocks, clusters, grid_z, others, _S, _red, lt, _err, _cap = tables["plans"][cols["plan"][j]][:10]
    nodes = [{"name": tables["kernels"][k], "block": b, "cluster": c, "grid": [1, 1, z]}
             for k, b, c, z in zip(kern, blocks, clusters, grid_z)] + [{"type": x} for x in others]
    lines = []
    for i in lt:
        fn, rest = tables["lt"][i].split(": ", 1)
        algo, comp = rest.split("; ", 1)
        lines.append((fn.encode(), f"matmul algo=[{algo}] computeDesc=[{comp}]".encode()))
    call = {**task["call"], task["vary"]: t}
    return call, {"nodes": nodes, "lt": lines, "err": None}


def test_recorder_format_builds_the_same_catalog(tmp_path):
    """Calls of the committed recording, passed through the recorder's own writer (one list task), convert to
    the same plans as the recording's runs."""
    rec = read_recording(SUBSET)
    picks = [(t, x) for t in rec["tasks"] for x in (1, 77, 300, 500)
             if any(lo <= x <= hi for lo, hi in zip(t["runs"]["t_first"], t["runs"]["t_last"]))]
    assert len(picks) > 20
    calls, results = zip(*(_results_of(rec, t, x) for t, x in picks))
    mine = recording(list(calls), list(results), {"name": "default"}, rec["device"], "capture", "test", [])
    assert [r[0] for r in mine["tasks"][0]["rows"]] == list(range(len(calls)))
    build_catalog([("mine", mine)], tmp_path / "mine.sqlite")
    build_catalog([("subset", rec)], tmp_path / "whole.sqlite")
    a, b = Catalog(tmp_path / "mine.sqlite"), Catalog(tmp_path / "whole.sqlite")
    for c in calls:
        spec = (f"{c['op']} {c['M']}x{c['N']}x{c['K']} {c['a_dtype']}" + (" bias=1" if c["bias"] else "")
                + (" beta=1" if c["beta"] else "") + (" a_t=1" if c["a_t"] else "") + (" b_t=1" if c["b_t"] and c["op"] != "linear" else ""))
        call = parse_record_spec(spec)
        got, want = a.find(call), b.find(call)
        assert len(got) == len(want) == 1
        assert (got[0].plan and got[0].plan.arithmetic(), got[0].why) == (want[0].plan and want[0].plan.arithmetic(),
                                                                        want[0].why)


def test_recording_fixture_says_where_it_came_from():
    with gzip.open(SUBSET, "rt") as f:
        data = json.load(f)
    assert data["subset_of"]["file"] == "h200_layers_16bit_sample.json.gz"
    assert data["device"]["gpu"] == "NVIDIA H200" and SUBSET.stat().st_size < 20000


# ------------------------------------------------------------------ with torch (CPU): the real dispatch mode
SCRIPT = textwrap.dedent("""
    import sys
    import torch
    torch.manual_seed(0)
    dt = getattr(torch, sys.argv[1])
    lin = torch.nn.Linear(64, 48, bias=True, dtype=dt)
    x = torch.randn(2, 12, 64, dtype=dt, requires_grad=True)
    lin(x).sum().backward()                            # forward, input gradient, weight gradient
    torch.bmm(torch.randn(4, 8, 16, dtype=dt), torch.randn(4, 16, 8, dtype=dt))
    torch.baddbmm(torch.randn(4, 8, 8, dtype=dt), torch.randn(4, 8, 16, dtype=dt), torch.randn(4, 16, 8, dtype=dt))
    q = torch.randn(10, 3 * 64, dtype=dt)[:, :64]       # a slice: not a layout the recorder makes
    q @ torch.randn(64, 32, dtype=dt)
""")


def test_dispatch_mode_sees_a_cpu_program(runner, tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    r = runner.invoke(record_cmd, ["--script", str(script), "--dry-run", "--", "bfloat16"])
    assert r.exit_code == 0, r.output
    specs = [line.split("#")[0].strip() for line in r.output.splitlines() if not line.startswith("#")]
    assert specs == sorted([
        "addmm 24x48x64 bfloat16 bias=1 b_t=1 beta=1",  # forward: addmm(b, x.view(-1, 64), W.t()) ...
        "linear 24x48x64 bfloat16 bias=1",              # ... which is F.linear's call
        "mm 24x64x48 bfloat16",                         # input gradient: grad @ W
        "mm 48x64x24 bfloat16 a_t=1",                   # weight gradient: grad.t() @ x
        "bmm 8x8x16x4 bfloat16",
    ])
    assert "skipped 1 x: baddbmm: tcsmt has no plan model" in r.output
    assert "skipped 1 x: A bfloat16 [10, 64] strides [192, 1]: neither contiguous" in r.output


def test_dispatch_mode_keeps_the_program_running(tmp_path):
    torch = pytest.importorskip("torch")
    from tcsmt.hwcheck.gemm_calls import collect

    out = {}

    def prog():
        a = torch.randn(5, 7, dtype=torch.float32)
        b = torch.randn(7, 3, dtype=torch.float32)
        out["y"] = a @ b
        out["want"] = (a.double() @ b.double()).float()

    found = collect(torch, prog)
    assert torch.allclose(out["y"], out["want"], atol=1e-5)
    (entry,) = found.calls.values()
    assert entry["call"]["op"] == "mm" and entry["device"] == "cpu" and entry["setting"]["blas"] in ("cublas", "cublaslt")


# ------------------------------------------------------------------ on a GPU: record for real
@pytest.mark.gpu
def test_record_on_the_gpu(runner, tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from tcsmt.hwcheck.stamp import running_stamp

    specs = ["mm 64x96x4096 bfloat16", "linear 7x4096x4096 bfloat16", "mm 4096x4096x77 bfloat16 a_t=1"]
    r = runner.invoke(record_cmd, [*sum((["--call", s] for s in specs), []), "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    monkeypatch.setenv("TCSMT_PLANS", str(tmp_path))
    stamp = running_stamp(torch)
    from tcsmt.arith.registry import gpu_of_device

    gpu = gpu_of_device(stamp["gpu_name"])
    for s in specs:
        assert answer(parse_record_spec(s), gpu, stamp=stamp).plan is not None


def test_settings_with_environment_variables_need_them_set(monkeypatch):
    from tcsmt.cli.record_cmd import setting_for

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.delenv("CUBLASLT_WORKSPACE_SIZE", raising=False)
    assert setting_for("blas=cublaslt,reduced=off") == {"name": "blas=cublaslt,reduced=off", "blas": "cublaslt",
                                                        "reduced": [False, False], "env": {}}
    with pytest.raises(TcsmtError, match="need CUBLAS_WORKSPACE_CONFIG=:0:0; this process has it unset"):
        setting_for("CUBLAS_WORKSPACE_CONFIG=:0:0")
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0")
    assert setting_for("CUBLAS_WORKSPACE_CONFIG=:0:0")["env"] == {"CUBLAS_WORKSPACE_CONFIG": ":0:0"}
    with pytest.raises(TcsmtError, match="need CUBLAS_WORKSPACE_CONFIG unset; this process has"):
        setting_for("default")


TF32_KERNELS = ["cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>",
                "cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false, float, float, float, "
                "true, false, false, false>"]
"""What cuBLAS ran for mm 200x300x500 float32 tf32=1 on the H100 (evidence/record_h100_check.json), S = 4."""


def test_cutlass_k_iteration_residue_first_and_refused_where_undecided(tmp_path):
    """The tf32 CUTLASS kernels iterate K residue first in their name's K tile (decided from 301 fresh H100 calls:
    tests/test_cutlass_k_iteration.py), so a recorded K = 500, S = 4 call on one (whose slices' residues cut the
    chain's 8-product blocks; before the decision it was refused, and its plan without K tiles gave 60 of 128 H100
    outputs other than the GPU's: evidence/record_h100_check.json) is answered with K tiles of 32, as K = 512 is.  A
    plan of such a kernel without a decided K iteration is still refused where a residue cuts a block."""
    from tcsmt.library.rules import checked_entry

    lt = [(b"cublasLtSSSMatmul", b"x algo=[algoId=21 tile=MATMUL_TILE_64x64 stages=MATMUL_STAGES_32x6 "
           b"reductionScheme=REDUCTION_SCHEME_COMPUTE_TYPE numSplitsK=4] computeDesc=[computeType=COMPUTE_32F_FAST_TF32]")]
    res = {"nodes": [{"name": k, "block": [128, 1, 1], "cluster": None, "grid": [1, 1, 1]} for k in TF32_KERNELS],
           "lt": lt, "err": None}
    calls = [{"op": "mm", "M": 200, "N": 300, "K": k, "a_dtype": "float32", "tf32": True} for k in (500, 512)]
    device = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "driver": "580.159.04", "torch": "2.11.0+cu130",
              "cuda": "13.0", "cublas": "130100", "cublaslt": "130100"}
    rec = recording(calls, [res, res], {"name": "default"}, device, "capture", "test", [])
    build_catalog([("tf32", rec)], tmp_path / "c.sqlite")
    cat = Catalog(tmp_path / "c.sqlite")
    for K in (500, 512):
        (found,) = cat.find(parse_record_spec(f"mm 200x300x{K} float32 tf32=1"))
        assert found.plan is not None and found.plan.split_k == 4 and found.plan.in_round == "rne"
        assert found.plan.k_tile == 32
    entry = {"op": "mm", "a_dtype": "float32", "tf32": True, "split_k": 1, "in_round": "rne", "epilogue": [],
             "chain": {"arch": "hopper", "in_fmt": "tf32", "out_fmt": "fp32", "instr": "cublas"},
             "kernels": ["family none"], "sources": ["test"]}
    kernel = [k for k in TF32_KERNELS if "cutlass" in k]
    refused = checked_entry(entry, {}, [200, 300, 500, 1], kernel, "h100", "t")
    assert "residue of 20 k's cuts a 8-product block" in refused["why"] and "\n" not in refused["why"]
    assert "why" not in checked_entry({**entry, "k_tile": 32}, {}, [200, 300, 500, 1], kernel, "h100", "t")
