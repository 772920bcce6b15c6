"""The tcsmt command line: models, simulate, dot; user errors are one line and exit status 2."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from tcsmt import simulate
from tcsmt.cli import main


@pytest.fixture
def runner():
    return CliRunner()


def test_models_lists_architectures(runner):
    r = runner.invoke(main, ["models"])
    assert r.exit_code == 0
    for name in ("volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna1", "cdna2"):
        assert name in r.output
    assert "references: exact" in r.output


def test_models_one_architecture(runner):
    r = runner.invoke(main, ["models", "volta"])
    assert r.exit_code == 0
    assert "fp16 -> fp32" in r.output and "fp16 -> fp16" in r.output
    assert "carry_bits" in r.output and "volta:carry2" in r.output


def test_models_alias(runner):
    assert "hopper" in runner.invoke(main, ["models", "h100"]).output


def test_dot_monotonicity_example(runner):
    """Seed 000 sec. 3.1.4 (monotonicity): c11 = 1-2^-24 and four products 2^-24 give 1+2^-23 on the V100."""
    r = runner.invoke(main, ["dot", "--arch", "volta", "1,1,1,1", "2^-24,2^-24,2^-24,2^-24", "--c", "1-2^-24"])
    assert r.exit_code == 0, r.output
    dline = [ln for ln in r.output.splitlines() if ln.startswith("d ")][0]
    assert dline.split("=")[-1].strip() == "1+2^-23"
    assert "0x3f800001" in dline


def test_dot_c_equal_one(runner):
    """Seed 000 sec. 3.1.4: with c11 = 1 the same products give 1."""
    r = runner.invoke(main, ["dot", "--arch", "volta", "1,1,1,1", "2^-24,2^-24,2^-24,2^-24", "--c", "1"])
    dline = [ln for ln in r.output.splitlines() if ln.startswith("d ")][0]
    assert dline.split("=")[-1].strip() == "1"


def _npz(tmp_path, n=50, K=4):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((n, K)).astype(np.float16)
    b = rng.standard_normal((n, K)).astype(np.float16)
    c = rng.standard_normal(n).astype(np.float32)
    path = tmp_path / "in.npz"
    np.savez(path, a=a.view(np.uint16), b=b.view(np.uint16), c=c.view(np.uint32))
    return path, a, b, c


def test_simulate_npz_and_force(runner, tmp_path):
    inp, a, b, c = _npz(tmp_path)
    out = tmp_path / "out.npz"
    args = ["simulate", "--arch", "volta", "--in", "fp16", "--out", "fp32", str(inp), str(out)]
    r = runner.invoke(main, args)
    assert r.exit_code == 0, r.output
    with np.load(out) as z:
        d = z["d"]
    assert np.array_equal(d, simulate("volta", a, b, c, "fp16", "fp32"))
    # refuses to overwrite without --force, and leaves the file alone
    before = out.read_bytes()
    r = runner.invoke(main, args)
    assert r.exit_code == 2
    assert "--force" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert out.read_bytes() == before
    r = runner.invoke(main, args[:1] + ["--force"] + args[1:-2] + ["--arch", "hopper"] + args[-2:])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("args", [
    ["models", "nosuchgpu"],
    ["dot", "--arch", "nosuchgpu", "1", "1"],
    ["dot", "--arch", "volta", "1,1", "1"],
    ["dot", "--arch", "volta", "0.1", "1"],
    ["dot", "--arch", "volta", "1", "abc"],
    ["dot", "--arch", "volta:nohyp", "1", "1"],
    ["dot", "--arch", "volta", "--in", "bf16", "1", "1"],
    ["simulate", "--arch", "volta", "--in", "fp16", "--out", "fp32", "/nonexistent/in.npz", "/tmp/x.npz"],
])
def test_errors_one_line_exit_2(runner, args):
    r = runner.invoke(main, args)
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tcsmt: error:")
    assert "Traceback" not in r.output


def test_bad_npz_contents(runner, tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, a=np.zeros((2, 4), np.uint16))
    r = runner.invoke(main, ["simulate", "--arch", "volta", "--in", "fp16", "--out", "fp32", str(bad), str(tmp_path / "o.npz")])
    assert r.exit_code == 2 and "lacks" in r.stderr
    notnpz = tmp_path / "x.npz"
    notnpz.write_text("hello")
    r = runner.invoke(main, ["simulate", "--arch", "volta", "--in", "fp16", "--out", "fp32", str(notnpz), str(tmp_path / "o.npz")])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1


def test_error_subprocess_no_traceback():
    """The installed entry point: exit status 2, one line on stderr, no traceback."""
    p = subprocess.run([sys.executable, "-m", "tcsmt", "dot", "--arch", "volta", "1,1", "2"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr
    assert p.stderr.startswith("tcsmt: error:")
