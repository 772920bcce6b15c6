"""MMA-Sim's rules as parameters, the primary choices, CDNA3, decision bundles.

Expected values are derived by hand from the published rules they test (each test names its source):
MMA-Sim = github microsoft/MMA-Sim c785138 (arXiv 2511.10909), file and lines as cited; seed 000 = Fasi et
al. 2020; docs/open_questions.md says why each primary reading was chosen.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tcsmt import TcsmtError, resolve, simulate

ROOT = Path(__file__).resolve().parent.parent


def _hex(spec, a, b, c, fi, fo, instr=None) -> int:
    return int(simulate(spec, a, b, c, fi, fo, instr)[0])


def test_zero_product_joins_the_alignment_at_minus_126():
    """MMA-Sim arithmetic.py L93-94, L151-155: a zero operand has exponent -126, so 0 * 2^114 has alignment
    exponent -12; with F = 24 the window's last bit is 2^-36 and the products 2^-100 and 0.75 * 2^-100 are lost
    (+0).  Zeros left out (Ampere's primary reading): 1.75 * 2^-100 = 0x0de00000."""
    a, b = [[0.0, 2.0**-50, 2.0**-50]], [[2.0**114, 2.0**-50, 3 * 2.0**-52]]
    assert _hex("ampere", a, b, [0.0], "bf16", "fp32") == 0x0DE00000
    assert _hex("ampere:zero_exp126", a, b, [0.0], "bf16", "fp32") == 0


@pytest.mark.parametrize("arch", ["volta", "turing", "ampere", "ada", "blackwell"])
def test_all_negative_zero_sum_sign(arch):
    """Products -0 * 1 and 0 * -1 and C = -0: every addend is -0.  The primary reading gives +0 (zero_sign =
    plus): MMA-Sim returns +0 for every zero sum (arithmetic.py L182-193) and the H100 gives +0 for every
    all-(-0) block (evidence/h100_hopper_questions.json); IEEE 754 (sec. 6.3) gives -0, the reading
    replaced (ARCH:zero_positive)."""
    a, b = [[-0.0, 0.0]], [[1.0, -1.0]]
    assert _hex(arch, a, b, [-0.0], "fp16", "fp32") == 0
    assert _hex(f"{arch}:zero_positive", a, b, [-0.0], "fp16", "fp32") == 0x80000000
    if arch != "volta" and arch != "turing":
        assert _hex(arch, a, b, [-0.0], "bf16", "fp32") == 0


def test_fp64_keeps_ieee_zero_signs():
    """Ampere's fp64 path is a chain of IEEE FMAs (seed 001 Table IV): -0 * 1 + -0 = -0 (IEEE 754 sec. 6.3);
    zero_sign = plus is for the non-fp64 paths only (the H200 pins IEEE signs on Hopper's fp64 path,
    models/hopper.toml)."""
    assert _hex("ampere", [[-0.0]], [[1.0]], [-0.0], "fp64", "fp64") == 0x8000000000000000


def test_three_wrapping_carry_bits_break_ordinary_sums():
    """16 products 1.5 * 1.5 = 2.25 (raw exponent 0): the exact sum is 36.  With 3 carry bits a block of 8
    holds |sum| < 2^4, so 18 wraps to 2 and the second block gives 20 (the rejected reading carry3); the
    primary reading keeps every carry (MMA-Sim arithmetic.py L115-129)."""
    a = np.full((1, 16), 1.5, np.float16)
    assert simulate("ampere", a, a, np.zeros(1, np.float32), "fp16", "fp32").view(np.float32)[0] == 36
    assert simulate("ampere:carry3", a, a, np.zeros(1, np.float32), "fp16", "fp32").view(np.float32)[0] == 20


def test_overflow_gives_inf_on_every_nvidia_fp32_path():
    """bf16: 2^127 * 1.5 + 2^127 * 1.5 = 3 * 2^127 >= 2^128: inf under the primary reading (Hopper's measured
    rule, MMA-Sim arithmetic.py L177-193), the largest finite 0x7f7fffff under IEEE RZ (overflow_max)."""
    a, b = [[2.0**127, 2.0**127]], [[1.5, 1.5]]
    for arch in ("ampere", "ada", "blackwell"):
        assert _hex(arch, a, b, [0.0], "bf16", "fp32") == 0x7F800000
        assert _hex(f"{arch}:overflow_max", a, b, [0.0], "bf16", "fp32") == 0x7F7FFFFF


def test_turing_one_block_of_eight():
    """MMA-Sim nv_ptx.py L17-49: Turing's m16n8k8 is one fused block of 8 (F = 24).  a = 1, 2^-24 at k = 1
    and k = 4, b = 1: one block keeps both 2^-24 terms (window LSB 2^-24) and RZ gives 1 + 2^-23 = 0x3f800001;
    two blocks of 4 (blocks4) round 1 + 2^-24 to 1 (RZ to fp32) after the first block and again after the
    second: 1.0 = 0x3f800000."""
    a = [[1.0, 2.0**-24, 0.0, 0.0, 2.0**-24, 0.0, 0.0, 0.0]]
    assert _hex("turing", a, [[1.0] * 8], [0.0], "fp16", "fp32") == 0x3F800001
    assert _hex("turing:blocks4", a, [[1.0] * 8], [0.0], "fp16", "fp32") == 0x3F800000


def test_cdna3_c_floored_to_24_bits():
    """MMA-Sim arithmetic.py L281-285: the product sum 1 (M = 0) plus C = -2^-30 floored to 24 fraction bits
    below M: floor(-2^-6) * 2^-24 = -2^-24, so the result is 1 - 2^-24 = 0x3f7fffff (RNE of an exact value);
    the exact sum rounded once (exact_block) gives 1.0."""
    assert _hex("cdna3", [[1.0]], [[1.0]], [-(2.0**-30)], "bf16", "fp32") == 0x3F7FFFFF
    assert _hex("cdna3:exact_block", [[1.0]], [[1.0]], [-(2.0**-30)], "bf16", "fp32") == 0x3F800000


def test_cdna3_fp8_even_odd_windows():
    """MMA-Sim arithmetic.py L261-273: the even products (1) and the odd ones (-2^-30) are summed apart and each
    floored to 24 fraction bits below the larger exponent: 1 - 2^-24 = 0x3f7fffff.  One window of 16 truncates
    -2^-30 toward zero: 1.0."""
    a = np.array([[1.0, -(2.0**-15)] + [0.0] * 30]).astype(ml_dtypes.float8_e5m2fnuz)
    b = np.array([[1.0, 2.0**-15] + [0.0] * 30]).astype(ml_dtypes.float8_e5m2fnuz)
    assert _hex("cdna3", a, b, [0.0], "e5m2fnuz", "fp32") == 0x3F7FFFFF
    assert _hex("cdna3:one_window", a, b, [0.0], "e5m2fnuz", "fp32") == 0x3F800000


def test_cdna2_pairwise_groups_miss_fttn_porting_result():
    """Seed 001 sec. V: FTTN measured 0 on an MI250X; the primary reading (an FMA chain) reproduces it
    (tests/test_fttn.py), MMA-Sim's pairwise groups of 4 give 255.875 (amd.py L35-38, L75-86)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_fttn import porting_d

    assert porting_d("cdna2") == 0
    assert abs(porting_d("cdna2:pairwise4")) == 255.875


def test_after_sum_needs_a_window():
    with pytest.raises(TcsmtError, match="after_sum"):
        resolve("cdna3:extra_bits=exact", "fp16", "fp32")


def _bundle(tmp_path: Path) -> Path:
    """A one-question bundle (the schema tcsmt/solve/decisions.py writes) on Ampere's fp16 path."""
    from tcsmt.solve.decisions import SCHEMA, Question, answer

    q = Question("carry-bits", "ampere", "ampere:carry3", "fp16", "fp32", "mma", 8, count=1, where="a>=0,b>=0,c=0")
    doc = answer(q, 60.0)
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps({"schema": SCHEMA, "arch": "ampere",
                                "questions": [{"class": q.cls, "primary": q.primary, "hypothesis": q.hypothesis,
                                               **doc}]}))
    return path


def test_bundle_on_a_virtual_device(tmp_path):
    """A device computing with ampere:carry3 settles the question for the hypothesis (exit 1: the model file's
    primary reading is refuted); one computing with ampere settles it for the primary reading (exit 0)."""
    path = _bundle(tmp_path)
    run = [sys.executable, "-m", "tcsmt", "hwcheck", str(path), "--jobs", "1", "--device"]
    r = subprocess.run([*run, "model:ampere:carry3"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "settled: the hypothesis ampere:carry3" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([*run, "model:ampere"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "settled: the primary reading ampere" in r.stdout, r.stdout + r.stderr


def test_bundle_without_a_gpu_prints_its_plan(tmp_path):
    """No CUDA device: the plan (path, instruction, each reading's prediction) on stdout, one line on stderr,
    exit 2."""
    pytest.importorskip("pysmt")
    try:
        import cupy  # noqa: F401
        pytest.skip("a CUDA stack is installed: the plan is printed only without one")
    except Exception:
        pass
    path = _bundle(tmp_path)
    r = subprocess.run([sys.executable, "-m", "tcsmt", "hwcheck", str(path)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2
    assert "would run [carry-bits] ampere vs ampere:carry3" in r.stdout and "ampere:carry3 predicts" in r.stdout
    assert r.stderr.count("\n") == 1 and "nothing was run" in r.stderr


def _bundles() -> list[Path]:
    return sorted((ROOT / "vectors").glob("*.json"))


@pytest.mark.parametrize("path", _bundles(), ids=lambda p: p.stem)
def test_committed_bundles_predict_what_the_models_compute(path):
    """Every answered question of a committed decision bundle still separates its two readings, and the outputs
    it records are what the model files compute now (a changed model file means: rebuild the bundle with
    ``python -m tcsmt.solve.decisions ARCH --force``)."""
    from tcsmt.arith.formats import get_format
    from tcsmt.sim.simulator import simulate_params

    data = json.loads(path.read_text())
    assert data["schema"] == "tcsmt.decisions/1" and data["questions"]
    found = [q for q in data["questions"] if q["status"] == "found"]
    assert found, f"{path.name}: no question has inputs"
    for q in found:
        fin, fc = get_format(q["in_fmt"]), get_format(q["c_fmt"])
        fb = get_format(q.get("b_fmt", q["in_fmt"]))
        instr = q["instr"][0]
        for item in q["inputs"]:
            a = np.array([[int(x, 16) for x in item["a"]]], dtype=fin.dtype)
            b = np.array([[int(x, 16) for x in item["b"]]], dtype=fb.dtype)
            c = np.array([int(item["c"], 16)], dtype=fc.dtype)
            scales = {}
            if "scale_fmt" in q:  # block-scaled questions carry each input's scale patterns
                scales = {k: np.array([[int(x, 16) for x in item[k]]], dtype=np.uint8) for k in ("sa", "sb")}
            got = {s: int(simulate_params(resolve(s, q["in_fmt"], q["out_fmt"], instr), a, b, c, **scales)[0])
                   for s in (q["primary"], q["hypothesis"])}
            want = {s: int(item["outputs"][s], 16) for s in got}
            assert got == want, f"{path.name}: {q['command']}"
            assert got[q["primary"]] != got[q["hypothesis"]]


def test_retry_keeps_only_entries_the_models_still_predict():
    """``python -m tcsmt.solve.decisions ARCH --retry`` keeps an answered entry only where today's model files give
    every output it records (``still_predicted``): the committed zero-scale entry of vectors/blackwell.json is
    kept; the same entry recording the hypothesis's output for the primary reading (what a changed primary
    reading leaves behind) is stale and asked again."""
    from tcsmt.solve.decisions import QUESTIONS, still_predicted

    data = json.loads((ROOT / "vectors" / "blackwell.json").read_text())
    q = next(q for q in QUESTIONS["blackwell"] if q.cls == "zero-scale")
    entry = next(e for e in data["questions"] if e["command"] == q.command())
    assert entry["status"] == "found" and still_predicted(entry, q)
    stale = json.loads(json.dumps(entry))
    first = stale["inputs"][0]["outputs"]
    first[q.primary] = first[q.hypothesis]
    assert not still_predicted(stale, q)


def test_rtx_blackwell_bundle_on_virtual_devices():
    """The committed sm_120 bundle (block-scaled mma.sync: real ue8m0/ue4m3 scales per input) runs through the
    whole hwcheck path (file -> scale tiles -> device -> models): a device computing with the model file settles
    every question for the primary reading (exit 0); one computing with the f34 reading (34 mxf4nvf4 bits)
    settles the f34 questions for the hypothesis (exit 1) and cannot run the mxf8f6f4 ones (no f34 there)."""
    path = ROOT / "vectors" / "rtx_blackwell.json"
    run = [sys.executable, "-m", "tcsmt", "hwcheck", str(path), "--jobs", "1", "--device"]
    r = subprocess.run([*run, "model:rtx_blackwell"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    n = len(json.loads(path.read_text())["questions"])
    assert r.stdout.count("settled: the primary reading rtx_blackwell") == n
    r = subprocess.run([*run, "model:rtx_blackwell:f34"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.count("settled: the hypothesis rtx_blackwell:f34") == 2


def test_blackwell_zero_scale_question_on_virtual_devices(tmp_path):
    """The zero-scale question of vectors/blackwell.json (a group with a zero ue4m3 scale: left out of the
    alignment, or joining it at the format's emin), run as a B200 owner runs the bundle: a device computing with
    the model file settles it for the primary reading (exit 0), one computing with blackwell:zero_scale_emin for
    the hypothesis (exit 1)."""
    data = json.loads((ROOT / "vectors" / "blackwell.json").read_text())
    data["questions"] = [q for q in data["questions"] if q["class"] == "zero-scale"]
    assert len(data["questions"]) == 1 and len(data["questions"][0]["inputs"]) == 4
    path = tmp_path / "zero_scale.json"
    path.write_text(json.dumps(data))
    run = [sys.executable, "-m", "tcsmt", "hwcheck", str(path), "--jobs", "1", "--device"]
    r = subprocess.run([*run, "model:blackwell"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "settled: the primary reading blackwell" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([*run, "model:blackwell:zero_scale_emin"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "settled: the hypothesis blackwell:zero_scale_emin" in r.stdout, r.stdout + r.stderr


def test_block_scaled_kernels_refuse_other_gpus():
    """On a Hopper (compute capability 9.0) every block-scaled kernel path is refused in one line naming the
    sm_120a / sm_100a target it needs: tcsmt hwcheck then skips those questions and runs nothing."""
    from types import SimpleNamespace

    from tcsmt.hwcheck.device import CudaDevice
    from tcsmt.hwcheck.paths import PATHS

    h100 = SimpleNamespace(cc=90, gpu_name="NVIDIA H100 80GB HBM3")
    scaled = [s for s in PATHS.values() if s.scale_fmt]
    assert scaled
    assert {s.cc for s in scaled} == {100, 120}
    for s in scaled:
        why = CudaDevice.supports(h100, s)  # type: ignore[arg-type]
        need = "needs compute capability 12.0 (sm_120a)" if s.cc == 120 else "needs compute capability 10.0 (sm_100a)"
        assert why and need in why and "has compute capability 9.0" in why
