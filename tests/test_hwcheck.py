"""Tests of the hardware-check harness (tcsmt hwcheck).

Without a GPU the checking logic runs against virtual devices backed by models
(``--device model:SPEC``); the tests marked ``gpu`` need CuPy and a CUDA device
and are skipped otherwise.
"""
from __future__ import annotations

import json
import os
import shutil

import click
import numpy as np
import pytest
from click.testing import CliRunner

from tcsmt.arith.registry import resolve
from tcsmt.cli.hwcheck_cmd import hwcheck_cmd
from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.check import ModelRunner, check_inputs, load_inputs, mismatch_kinds, resolve_models, run_random
from tcsmt.hwcheck.device import ModelDevice, expand_tiles, get_device
from tcsmt.hwcheck.dists import DISTRIBUTIONS, generate
from tcsmt.hwcheck.paths import PATHS, find_path, parse_path
from tcsmt.hwcheck.runner import check_layout, run_dot
from tcsmt.io.trap import Group as _Group
from tcsmt.sim.simulator import simulate_params


@click.group(cls=_Group)
def cli() -> None:
    """The CLI group with hwcheck registered, as cli.py will have it."""


cli.add_command(hwcheck_cmd)


def _cuda_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


HAVE_GPU = _cuda_available()


def invoke(*args):
    return CliRunner().invoke(cli, ["hwcheck", *args])


# ------------------------------------------------------------------ errors
@pytest.mark.skipif(HAVE_GPU, reason="a CUDA device is present")
def test_no_cuda_device_is_a_one_line_error():
    r = invoke("--random", "16", "--arch", "hopper", "--path", "f16.f32")
    assert r.exit_code == 2
    assert "no CUDA device found" in r.output
    assert r.output.strip().count("\n") == 0


@pytest.mark.parametrize("args, msg", [
    (("--random", "16", "--arch", "hopper", "--path", "f16.q7", "--device", "model:hopper"), "unknown number format"),
    (("--random", "16", "--arch", "hopper", "--path", "f16", "--device", "model:hopper"), "IN.OUT"),
    (("--random", "16", "--path", "f16.f32", "--device", "model:hopper"), "--arch"),
    (("--random", "16", "--arch", "hopper", "--path", "f16.f32", "--k", "24", "--device", "model:hopper"), "multiple of 16"),
    (("--random", "16", "--arch", "volta", "--path", "f16.f32", "--instr", "wgmma", "--device", "model:hopper"), "volta has no path"),
    (("--device", "model:hopper"), "exactly one of"),
    (("--random", "16", "--arch", "hopper", "--path", "f16.f32", "--device", "tpu"), "unknown device"),
])
def test_user_errors_exit_2(args, msg):
    r = invoke(*args)
    assert r.exit_code == 2, r.output
    assert msg in r.output


# ------------------------------------------------------------ random mode
def test_virtual_device_finds_volta_vs_ampere_differences(tmp_path):
    out = tmp_path / "r.json"
    r = invoke("--random", "512", "--arch", "ampere", "--path", "f16.f32", "--device", "model:volta",
               "--dist", "narrow", "--save", str(out), "--jobs", "1")
    assert r.exit_code == 1, r.output
    assert "ampere: refuted" in r.output
    doc = json.loads(out.read_text())
    res = doc["results"][0]
    assert res["distribution"] == "narrow" and res["n"] == 512
    m = res["models"][0]
    assert m["mismatches"] > 0 and m["verdict"] == "refuted"
    ex = m["counterexamples"][0]
    assert ex["gpu"] != ex["model"] and len(ex["a"]) == 16
    # the counterexample reproduces: volta gives the "gpu" bits, ampere the model bits
    a = np.array([[int(x, 16) for x in ex["a"]]], dtype=np.uint16)
    b = np.array([[int(x, 16) for x in ex["b"]]], dtype=np.uint16)
    c = np.array([int(ex["c"], 16)], dtype=np.uint32)
    assert int(simulate_params(resolve("volta", "fp16", "fp32"), a, b, c)[0]) == int(ex["gpu"], 16)
    assert int(simulate_params(resolve("ampere", "fp16", "fp32"), a, b, c)[0]) == int(ex["model"], 16)
    for key in ("device", "path", "tcsmt_commit", "seed", "instr", "shape"):
        assert key in doc


def test_model_against_itself_is_confirmed_for_every_distribution():
    r = invoke("--random", "256", "--arch", "hopper", "--path", "e4m3.f32", "--device", "model:hopper",
               "--k", "64", "--jobs", "1")
    assert r.exit_code == 0, r.output
    assert "hopper: confirmed" in r.output
    for d in DISTRIBUTIONS:
        assert d in r.output


def test_run_random_is_reproducible_and_counts():
    spec = find_path("bf16", "fp32", "mma")
    dev = ModelDevice("ampere")
    models = resolve_models(["ampere", "hopper"], spec)
    with ModelRunner(1) as runner:
        r1 = run_random(dev, spec, models, "wide", 300, 32, 7, runner, batch=128)
        r2 = run_random(dev, spec, models, "wide", 300, 32, 7, runner, batch=128)
    assert r1.n == 384  # rounded up to whole 16x8 tiles
    assert r1.tallies[0].mismatches == 0  # ampere against the ampere device
    assert [t.mismatches for t in r1.tallies] == [t.mismatches for t in r2.tallies]
    assert r1.tallies[1].checked == 384


# -------------------------------------------------------------- run_dot
@pytest.mark.parametrize("key", [("fp16", "fp32", "mma"), ("e5m2", "fp16", "wgmma"), ("fp64", "fp64", "mma")])
def test_run_dot_packs_independent_dot_products(key):
    spec = PATHS[key]
    rng = np.random.default_rng(3)
    n, K = 19, spec.instr_k + 3  # not a multiple of the tile or of k: padding on both
    a, b, c = generate("wide", spec, 4, spec.instr_k * 2, rng)
    A = a.reshape(-1, a.shape[-1])[:n, :K]
    B = b.reshape(-1, b.shape[-1])[:n, :K]
    C = c.reshape(-1)[:n]
    dev = ModelDevice("hopper")
    got = run_dot(key, A, B, C, device=dev)
    pad = -(-K // spec.instr_k) * spec.instr_k
    Ap = np.zeros((n, pad), A.dtype)
    Bp = np.zeros((n, pad), B.dtype)
    Ap[:, :K], Bp[:, :K] = A, B
    want = simulate_params(resolve("hopper", *key), Ap, Bp, C)
    assert np.array_equal(got, want)


def test_run_dot_rejects_bad_patterns():
    with pytest.raises(TcsmtError):
        run_dot(("tf32", "fp32", "mma"), np.array([[1]], np.uint32), np.array([[0]], np.uint32),
                np.array([0], np.uint32), device=ModelDevice("hopper"))


# ------------------------------------------------------------- layouts
def test_layout_check_passes_on_a_model_device():
    """Every path with a model runs its integer layout check on a virtual device of that model (the Blackwell
    kernels whose model paths live elsewhere, e.g. the sm_120 mma.sync kinds, are left out until they exist)."""
    checked = 0
    for arch in ("hopper", "blackwell"):
        dev = ModelDevice(arch)
        for spec in PATHS.values():
            if dev.supports(spec) is not None:
                continue
            r = check_layout(spec, dev, tiles=4)
            assert r["ok"], r
            checked += 1
    assert checked >= 30


class _SwappedColumns(ModelDevice):
    """A device with a wrong B layout: columns 0 and 1 of every tile exchanged."""

    def run_tiles(self, path, a, b, c):
        b = b.copy()
        b[:, [0, 1]] = b[:, [1, 0]]
        return super().run_tiles(path, a, b, c)


def test_layout_check_detects_a_misplaced_fragment():
    r = check_layout(find_path("fp16", "fp32", "mma"), _SwappedColumns("hopper"), tiles=4)
    assert not r["ok"] and r["wrong"] > 0 and r["first_wrong"]


def test_layouts_command_on_model_device():
    r = invoke("--layouts", "--device", "model:hopper")
    assert r.exit_code == 0, r.output
    dev = ModelDevice("hopper")
    assert r.output.count(" ok ") == sum(dev.supports(s) is None for s in PATHS.values()) >= 29


# ------------------------------------------------------------ file mode
def _write_inputs(tmp_path, models, inputs, **extra):
    doc = {"in_fmt": "fp16", "out_fmt": "fp32", "instr": "mma", "models": models, "inputs": inputs, **extra}
    p = tmp_path / "gen.json"
    p.write_text(json.dumps(doc))
    return p


def _volta_ampere_inputs(n):
    spec = find_path("fp16", "fp32", "mma")
    a, b, c = generate("narrow", spec, 1, 16, np.random.default_rng(5))
    A, B, C = expand_tiles(a, b, c)
    return [{"a": [f"0x{x:04x}" for x in A[i]], "b": [f"0x{x:04x}" for x in B[i]], "c": f"0x{C[i]:08x}"}
            for i in range(n)]


def test_file_mode_confirms_and_refutes(tmp_path):
    p = _write_inputs(tmp_path, ["volta"], _volta_ampere_inputs(12))
    r = invoke(str(p), "--model", "ampere", "--device", "model:ampere", "--save", str(tmp_path / "o.json"))
    assert r.exit_code == 1, r.output
    assert "ampere: confirmed (0 of 12" in r.output
    assert "volta: refuted" in r.output
    assert "gpu   0x" in r.output and "model 0x" in r.output
    doc = json.loads((tmp_path / "o.json").read_text())
    assert {m["model"]: m["verdict"] for m in doc["models"]} == {"volta": "refuted", "ampere": "confirmed"}


def test_file_mode_all_confirmed_exits_0(tmp_path):
    p = _write_inputs(tmp_path, ["ampere"], _volta_ampere_inputs(3) + [{"a": ["0x3c00"], "b": ["0x3c00"], "c": "0x0"}])
    r = invoke(str(p), "--device", "model:ampere")
    assert r.exit_code == 0, r.output


def test_npz_input(tmp_path):
    p = tmp_path / "in.npz"
    np.savez(p, a=np.array([[1.0, 2.0]]), b=np.array([[0.5, 0.25]]), c=np.array([1.0]))
    r = invoke(str(p), "--path", "f16.f32", "--model", "hopper", "--device", "model:hopper")
    assert r.exit_code == 0, r.output
    assert "hopper: confirmed" in r.output


@pytest.mark.parametrize("doc, msg", [
    ("not json", "not a readable JSON"),
    ({"in_fmt": "fp16", "out_fmt": "fp32", "models": ["volta"]}, "lacks the field 'inputs'"),
    ({"in_fmt": "fp16", "out_fmt": "fp32", "models": ["volta"], "inputs": [{"a": ["0x3c00"], "b": []}]}, "inputs[0].b: an empty list"),
    ({"in_fmt": "fp16", "out_fmt": "fp32", "models": ["volta"],
      "inputs": [{"a": ["0x3c00"], "b": ["0xzz"], "c": "0x0"}]}, "inputs[0].b[0]: '0xzz' is not a bit pattern of fp16"),
    ({"in_fmt": "fp16", "out_fmt": "fp32", "models": ["volta"],
      "inputs": [{"a": ["0x13c00"], "b": ["0x1"], "c": "0x0"}]}, "inputs[0].a[0]: '0x13c00' is not a bit pattern of fp16"),
    ({"in_fmt": "fp16", "out_fmt": "fp32", "models": ["volta"],
      "inputs": [{"a": ["0x3c00", "0x0"], "b": ["0x1"], "c": "0x0"}]}, "same, non-zero length"),
    ({"in_fmt": "fp16", "out_fmt": "fp32", "models": "nosuch", "inputs": [{"a": ["0x0"], "b": ["0x0"], "c": "0x0"}]},
     "unknown architecture"),
    ({"in_fmt": "fp16", "out_fmt": "fp32", "inputs": [{"a": ["0x0"], "b": ["0x0"], "c": "0x0"}]}, "names no models"),
    ({"in_fmt": "fp16", "out_fmt": "bf16", "models": ["volta"], "inputs": []}, "no hardware path"),
])
def test_malformed_files_exit_2(tmp_path, doc, msg):
    p = tmp_path / "bad.json"
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    r = invoke(str(p), "--device", "model:hopper")
    assert r.exit_code == 2, r.output
    assert msg in r.output
    assert r.output.strip().count("\n") == 0


def test_file_inputs_of_mixed_lengths_are_grouped(tmp_path):
    inputs = [{"a": ["0x3c00"] * k, "b": ["0x3c00"] * k, "c": "0x3f800000"} for k in (1, 5, 17, 16)]
    p = _write_inputs(tmp_path, ["hopper"], inputs)
    fi = load_inputs(str(p))
    with ModelRunner(1) as runner:
        t = check_inputs(ModelDevice("hopper"), fi, resolve_models(["hopper"], fi.spec), runner)[0]
    assert t.checked == 4 and t.mismatches == 0


# --------------------------------------------------------- distributions
@pytest.mark.parametrize("key", list(PATHS))
def test_distributions_give_valid_finite_inputs(key):
    spec = PATHS[key]
    rng = np.random.default_rng(11)
    K = 2 * spec.instr_k
    for d in DISTRIBUTIONS:
        a, b, c = generate(d, spec, 3, K, rng)
        assert a.shape == (3, spec.m, K) and b.shape == (3, spec.n, K) and c.shape == (3, spec.m, spec.n)
        assert a.dtype == spec.fin.dtype and c.dtype == spec.c_fmt.dtype
        for x, f in ((a, spec.fin), (b, spec.fin_b), (c, spec.c_fmt)):
            assert f.valid_pattern(x).all()
            assert np.isfinite(f.decode_array(x)).all(), (d, f.name)


def test_cancel_distribution_cancels():
    spec = find_path("fp16", "fp32", "mma")
    a, b, c = generate("cancel", spec, 8, 16, np.random.default_rng(2))
    s = np.einsum("trk,tjk->trj", spec.fin.decode_array(a), spec.fin.decode_array(b))
    cv = spec.c_fmt.decode_array(c)
    big = np.abs(s) > 1
    assert big.any()
    assert (np.abs(s + cv)[big] <= 1e-5 * np.abs(s)[big]).all()


def test_subnormal_distribution_reaches_subnormals():
    from tcsmt.arith.formats import SUBNORMAL

    spec = find_path("bf16", "fp32", "mma")
    a, b, c = generate("subnormal", spec, 32, 16, np.random.default_rng(4))
    assert (spec.fin.classify(a) == SUBNORMAL).any()
    assert (spec.c_fmt.classify(c) == SUBNORMAL).any()


@pytest.mark.parametrize("in_fmt", ["bf16", "tf32"])
def test_tiny_distribution_keeps_every_addend_below_the_accumulator_emin(in_fmt):
    """tiny: every product and C below 2^-126 (fp32's smallest normal), many all below 2^-129."""
    spec = find_path(in_fmt, "fp32", "mma")
    a, b, c = generate("tiny", spec, 64, 8, np.random.default_rng(6))
    prods = np.abs(np.einsum("trk,tjk->trjk", spec.fin.decode_array(a), spec.fin.decode_array(b)))
    cv = np.abs(spec.c_fmt.decode_array(c))
    top = np.maximum(prods.max(axis=-1), cv)
    assert (top < 2.0 ** -126).all()
    assert (top < 2.0 ** -129).mean() > 0.3 and (top > 0).mean() > 0.9


def _mismatches(device_spec: str, key: tuple[str, str, str], specs: list[str], dist: str, n: int, K: int) -> dict:
    """Mismatch count per model spec of a random run on a virtual device (``model:device_spec``)."""
    spec = find_path(*key)
    with ModelRunner(1) as runner:
        res = run_random(ModelDevice(device_spec), spec, resolve_models(specs, spec), dist, n, K, 0, runner)
    return {t.label: t.mismatches for t in res.tallies}


def test_tiny_distribution_tells_alignment_floors_apart():
    """A virtual device with an alignment exponent floor is refuted for the model without one."""
    counts = _mismatches("hopper:align_floor=-130", ("tf32", "fp32", "mma"), ["hopper", "hopper:align_floor=-130"],
                         "tiny", 20000, 8)
    assert counts["hopper"] > 0 and counts["hopper:align_floor=-130"] == 0


def test_mismatch_kinds():
    from tcsmt.arith.formats import FP32

    dev = np.array([0x7f800000, 0x00000000, 0x3f800001, 0x3f800000, 0xbf800000], dtype=np.uint32)
    mod = np.array([0x7f7fffff, 0x80000000, 0x3f800000, 0x3f800003, 0x3f800000], dtype=np.uint32)
    assert mismatch_kinds(FP32, dev, mod) == {"inf/finite": 1, "zero sign": 1, "device +1 ulp": 1,
                                              "|diff| > 1 ulp": 1, "sign": 1}


def test_parse_path_and_devices():
    assert parse_path("e4m3.f32", "wgmma").kernel == "wgmma_e4m3_f32"
    assert parse_path("tf32.fp32").shape == "m16n8k8"
    with pytest.raises(TcsmtError):
        get_device("model:")


# ------------------------------------------------------------- real GPU
@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs CuPy and a CUDA device")
@pytest.mark.parametrize("key", list(PATHS))
def test_gpu_fragment_layouts(key):
    dev = get_device("cuda")
    spec = PATHS[key]
    if dev.supports(spec):
        pytest.skip(dev.supports(spec))
    r = check_layout(spec, dev)
    assert r["ok"], r


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs CuPy and a CUDA device")
def test_gpu_fp16_mma_matches_hopper_or_ampere_model():
    dev = get_device("cuda")
    spec = find_path("fp16", "fp32", "mma")
    arch = "hopper" if dev.cc == 90 else "ampere"
    with ModelRunner(1) as runner:
        r = run_random(dev, spec, resolve_models([arch], spec), "wide", 4096, 32, 0, runner)
    assert r.tallies[0].checked == 4096


# ------------------------------------------------------- library GEMM paths
def test_library_paths_take_no_c():
    """cuBLAS calls through torch compute A.B: generated C is +0, and a file with C != 0 is refused."""
    spec = find_path("fp16", "fp32", "cublas")
    assert spec.library and not spec.has_c and spec.check_k == 256
    a, b, c = generate("wide", spec, 1, 32, np.random.default_rng(0))
    assert c.shape == (1, 256, 256) and not c.any()
    with pytest.raises(TcsmtError, match="without C"):
        run_dot(spec, np.zeros((2, 16), np.uint16), np.zeros((2, 16), np.uint16),
                np.array([0, 0x3F800000], np.uint32), device=ModelDevice("hopper"))


def test_library_path_hypotheses_on_a_virtual_device():
    """A model device of the cuBLAS fp16 path confirms its model and refutes blocks of 8 (as the H100 did)."""
    counts = _mismatches("hopper", ("fp16", "fp32", "cublas"), ["hopper", "hopper:block8"], "narrow", 4096, 64)
    assert counts["hopper"] == 0 and counts["hopper:block8"] > 0


def test_scaled_mm_promotion_interval_is_visible():
    """Promotion every 128 products differs from every 64 once K spans more than one interval."""
    counts = _mismatches("hopper", ("e4m3", "fp32", "scaled_mm"), ["hopper", "hopper:promote64", "hopper:fast"],
                         "narrow", 2048, 256)
    assert counts["hopper"] == 0 and counts["hopper:promote64"] > 0 and counts["hopper:fast"] > 0


def test_library_cli_default_k_and_instr_choice():
    r = invoke("--random", "256", "--arch", "hopper", "--path", "tf32.f32", "--instr", "cublas",
               "--device", "model:hopper", "--dist", "wide", "--jobs", "1")
    assert r.exit_code == 0, r.output
    assert "K = 256" in r.output and "hopper: confirmed" in r.output
    r = invoke("--random", "256", "--arch", "hopper", "--path", "tf32.f32", "--instr", "cublas", "--k", "12",
               "--device", "model:hopper", "--jobs", "1")
    assert r.exit_code == 2 and "multiple of 8" in r.output


# ------------------------------------------------- Blackwell kernels (compiled here, never run on hardware)
_BLACKWELL = [s for s in PATHS.values() if s.cc in (100, 120)]


def test_blackwell_paths_say_they_are_unchecked():
    assert len(_BLACKWELL) >= 14
    for s in _BLACKWELL:
        assert s.unchecked and s.arch_specific, s.label
        assert "sm_100a" in s.requirement() or "sm_120a" in s.requirement()
    assert not any(s.unchecked for s in PATHS.values() if s.cc < 100)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("arch", ["sm_100a", "sm_120a"])
def test_blackwell_kernels_compile(arch, tmp_path):
    """kernels.cu compiles for the Blackwell targets with every kernel a path names (nvcc 13 here)."""
    from tcsmt.hwcheck.device import compile_cubin

    os.environ["TCSMT_CACHE"] = str(tmp_path)
    try:
        data = compile_cubin(arch).read_bytes()
    finally:
        os.environ.pop("TCSMT_CACHE", None)
    want = 100 if arch == "sm_100a" else 120
    for s in _BLACKWELL:
        if s.cc == want:
            assert s.kernel.encode() in data, s.kernel


# ------------------------------------------------- block-scaled paths: real scales from the host to the tiles
_SCALED = [s for s in PATHS.values() if s.scale_fmt]
_ARCH = {100: "blackwell", 120: "rtx_blackwell"}


def test_every_blackwell_hardware_path_is_a_model_path():
    """Each Blackwell kernel path names an instruction exactly as a model file does (the f8f6f4 / mxf8f6f4 kinds
    with their A and B types), so ``--device model:...``, the decision bundles and the models all find it."""
    from tcsmt.arith.registry import architectures

    for s in _BLACKWELL:
        hits = [a.name for a in architectures().values() if a.find_paths(s.in_fmt, s.out_fmt, s.instr)]
        assert hits, s.label
    assert len(_SCALED) == 8  # 4 tcgen05 (sm_100a), 4 mma.sync (sm_120a)


@pytest.mark.parametrize("spec", _SCALED, ids=lambda s: s.label)
def test_run_dot_carries_each_rows_scales(spec):
    """run_dot puts dot product i on its tile's diagonal with its own scales (row i of scale_A, column i of
    scale_B; tile_scales); on the virtual device every output equals the simulator's on the same row and scales.
    Scales drawn over the whole format (ue8m0 2^-127..2^127, ue4m3 0 and subnormals to 448), 20 rows."""
    from tcsmt.hwcheck.runner import run_dot
    from tcsmt.sim.simulator import simulate_params

    arch = _ARCH[spec.cc]
    dev = get_device(f"model:{arch}")
    p = dev.params(spec)
    rng = np.random.default_rng(3)
    n, K = 20, 2 * spec.instr_k
    lim = 1 << (spec.fin.storage_bits)
    a = rng.integers(0, lim, size=(n, K)).astype(np.uint8)
    b = rng.integers(0, lim, size=(n, K)).astype(np.uint8)
    if spec.in_fmt == "e4m3":  # no NaN operand (S.1111.111)
        a[(a & 0x7F) == 0x7F] = 0
        b[(b & 0x7F) == 0x7F] = 0
    c = (rng.integers(0x30000000, 0x50000000, size=n) | (rng.integers(0, 2, size=n) << 31)).astype(np.uint32)
    nb = K // spec.scale_block
    if spec.scale_fmt == "ue8m0":  # mostly 2^-16..2^15, one row at each end of the format (2^-127, 2^127)
        sa = rng.integers(0x6F, 0x8F, size=(n, nb)).astype(np.uint8)
        sb = rng.integers(0x6F, 0x8F, size=(n, nb)).astype(np.uint8)
        sa[0], sb[0], sa[1], sb[1] = 0x00, 0x7F, 0xFE, 0x70
    else:  # ue4m3: every pattern but NaN (0x7F), zero and subnormals included
        sa = rng.integers(0, 0x7F, size=(n, nb)).astype(np.uint8)
        sb = rng.integers(0, 0x7F, size=(n, nb)).astype(np.uint8)
    got = run_dot(spec, a, b, c, device=dev, sa=sa, sb=sb)
    want = simulate_params(p, a, b, c, sa=sa, sb=sb, bits=True)
    assert np.array_equal(got, want)
    # the scales matter: unit scales give other outputs on most rows
    unit = run_dot(spec, a, b, c, device=dev)
    assert (unit != want).sum() > n // 2


def test_scaled_bad_input_is_one_line():
    from tcsmt.hwcheck.runner import run_dot

    spec = next(s for s in _SCALED if s.scale_fmt == "ue4m3")
    dev = get_device("model:rtx_blackwell")
    a = np.zeros((2, 64), dtype=np.uint8)
    c = np.zeros(2, dtype=np.uint32)
    with pytest.raises(TcsmtError, match=r"sa must have shape \(2, 4\)"):
        run_dot(spec, a, a, c, device=dev, sa=np.zeros((2, 3), np.uint8), sb=np.zeros((2, 4), np.uint8))
    with pytest.raises(TcsmtError, match="not a ue4m3 bit pattern"):
        run_dot(spec, a, a, c, device=dev, sa=np.full((2, 4), 0x80, np.uint8), sb=np.zeros((2, 4), np.uint8))
    with pytest.raises(TcsmtError, match="takes no scale factors"):
        run_dot(PATHS[("fp16", "fp32", "mma")], np.zeros((1, 16), np.uint16), np.zeros((1, 16), np.uint16),
                np.zeros(1, np.uint32), device=get_device("model:ampere"), sa=np.zeros((1, 1), np.uint8))


def test_question_file_scales_are_read_and_checked(tmp_path):
    """A discriminate record of a block-scaled path carries sa/sb per input; hwcheck reads them (a missing or
    short list is a one-line error) and runs them on the virtual device with the recorded verdict."""
    import json

    from tcsmt.hwcheck.check import inputs_from_doc

    spec = next(s for s in _SCALED if s.cc == 120 and s.instr_k == 32 and s.in_fmt == "e4m3")
    doc = {"in_fmt": "e4m3", "out_fmt": "fp32", "instr": spec.instr, "models": ["rtx_blackwell"],
           "inputs": [{"a": ["0x38"] * 32, "b": ["0x38"] * 32, "c": "0x0", "sa": ["0x80"], "sb": ["0x7d"]}]}
    inp = inputs_from_doc("f.json", doc)
    assert inp.sa is not None and inp.sb is not None and int(inp.sa[0][0]) == 0x80 and int(inp.sb[0][0]) == 0x7D
    bad = json.loads(json.dumps(doc))
    del bad["inputs"][0]["sb"]
    with pytest.raises(TcsmtError, match="sb must be a list of 1 ue8m0 hex pattern"):
        inputs_from_doc("f.json", bad)
    path = tmp_path / "q.json"
    path.write_text(json.dumps(doc))
    r = invoke(str(path), "--device", "model:rtx_blackwell", "--jobs", "1")
    assert r.exit_code == 0, r.output  # 32 * 1 * 2 * 2^-2 = 16


class _SwappedScaleBlocks(ModelDevice):
    """A device that reads the scale bytes of the wrong block (scale_A's blocks reversed) or of the wrong row
    (scale_A's rows 0 and 8 exchanged: the g / g + 8 halves of the sm_120 fragment)."""

    def __init__(self, spec, how):
        super().__init__(spec)
        self.how = how

    def run_tiles(self, path, a, b, c, sa=None, sb=None):
        if sa is not None:
            rows = list(range(sa.shape[1]))
            rows[0], rows[8] = 8, 0
            sa = sa[:, :, ::-1].copy() if self.how == "blocks" else sa[:, rows].copy()
        return super().run_tiles(path, a, b, c, sa=sa, sb=sb)


def test_layout_check_covers_the_scales():
    """--layouts on a block-scaled path gives every row of A, column of B and scale block its own power-of-two
    scale (exact small-integer results): it passes on the model and fails where a scale byte reaches the wrong
    block or row, which unit scales could never show."""
    for spec in _SCALED:
        assert check_layout(spec, ModelDevice(_ARCH[spec.cc]), tiles=1)["ok"], spec.label
    for mx4 in (s for s in _SCALED if s.instr_k == 64 and s.scale_block == 32):  # two scale blocks per instruction
        for how in ("blocks", "rows"):
            r = check_layout(mx4, _SwappedScaleBlocks(_ARCH[mx4.cc], how), tiles=1)
            assert not r["ok"] and r["wrong"] > 0, (mx4.label, how)


@pytest.mark.parametrize("key", ["sm120-mxf4", "tcgen05-mxf8"])
def test_random_mode_draws_real_scales(key):
    """--random on a block-scaled path draws a scale per row of A, column of B and scale block (dists.random_scales)
    and hands the same scales to the device and the models: the model confirms itself on its own virtual device,
    another reading (25 instead of 35 mxf4nvf4 window bits; scales on the block sum instead of each mxf8f6f4
    product) is refuted, and its counterexamples carry their scales."""
    spec, arch, other = {
        "sm120-mxf4": (next(s for s in _SCALED if s.cc == 120 and s.scale_fmt == "ue4m3"), "rtx_blackwell",
                       "rtx_blackwell:f25"),
        "tcgen05-mxf8": (next(s for s in _SCALED if s.cc == 100 and s.instr_k == 32), "blackwell",
                         "blackwell:exact_block_sum"),
    }[key]
    models = resolve_models([arch, other], spec)
    with ModelRunner(1) as runner:
        res = run_random(get_device(f"model:{arch}"), spec, models, "wide", 2 * spec.per_tile, spec.instr_k, 5,
                         runner)
    own, hyp = res.tallies
    assert own.mismatches == 0 and own.checked == 2 * spec.per_tile
    assert hyp.mismatches > 0 and len(hyp.examples[0]["sa"]) == spec.instr_k // spec.scale_block
