"""Option ranges, exit statuses and progress lines of the tcsmt commands.

Every out-of-range option is one line ``tcsmt: error: ...`` and exit status 2; every solver
timeout or UNKNOWN in ``query`` and ``verify`` is exit status 2 with what was and was not answered;
``--progress`` prints elapsed-time lines on stderr.  Solver timeouts here are tiny on purpose.
"""
from __future__ import annotations

import contextlib
import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from tcsmt.arith.registry import resolve
from tcsmt.cli import main
from tcsmt.cli import commands as cli
from tcsmt.errors import TcsmtError

SMALL_QUERY = """name = "small-extra-bits"
title = "Extra alignment bits (small test query)"
question = "Does Volta keep 0, 1 or 2 bits below the fp32 LSB of the largest addend?"
source = "seed 000 sec. 3.1.4 (Volta: no extra bit)"
model = "volta"
k = 1
minimize = false
hypotheses = ["extra_bits=0", "extra_bits=1", "extra_bits=2"]
"""


def _small_query(tmp_path) -> str:
    """A feature query that the solver answers in well under a second (K = 1, no minimisation)."""
    p = tmp_path / "small-extra-bits.toml"
    p.write_text(SMALL_QUERY)
    return str(p)


@contextlib.contextmanager
def _cwd(path):
    """Run in ``path`` (generated/ goes there)."""
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


@pytest.fixture
def runner():
    return CliRunner()


def _one_line_usage_error(r, option: str) -> None:
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tcsmt: error:") and option in lines[0], r.stderr


# ----------------------------------------------------------------- option ranges
BAD = [
    (["discriminate", "volta", "ampere", "--k", "0"], "--k"),
    (["discriminate", "volta", "ampere", "--k", "-3"], "--k"),
    (["discriminate", "volta", "ampere", "--count", "0"], "--count"),
    (["discriminate", "volta", "ampere", "--timeout", "nan"], "--timeout"),
    (["discriminate", "volta", "ampere", "--timeout", "inf"], "--timeout"),
    (["discriminate", "volta", "ampere", "--timeout", "0"], "--timeout"),
    (["discriminate", "volta", "ampere", "--timeout", "-1"], "--timeout"),
    (["query", "carry-bits", "--timeout", "0"], "--timeout"),
    (["query", "carry-bits", "--timeout", "nan"], "--timeout"),
    (["verify", "--algo", "markidis", "--timeout", "-inf"], "--timeout"),
    (["verify", "--algo", "markidis", "--budget", "-1"], "--budget"),
    (["verify", "--algo", "markidis", "--k", "0"], "--k"),
    (["verify", "--stats", "--n", "0"], "--n"),
    (["verify", "--stats", "--seed", "-1"], "--seed"),
    (["identify", "--model", "volta", "--path", "f16.f32", "--timeout", "-1"], "--timeout"),
    (["identify", "--model", "volta", "--path", "f16.f32", "--quick-timeout", "0"], "--quick-timeout"),
    (["identify", "--model", "volta", "--path", "f16.f32", "--time-limit", "0"], "--time-limit"),
    (["identify", "--model", "volta", "--path", "f16.f32", "--max-experiments", "0"], "--max-experiments"),
    (["identify", "--model", "volta", "--path", "f16.f32", "--candidates", "0"], "--candidates"),
    (["identify", "--model", "volta", "--path", "f16.f32", "--seed", "-1"], "--seed"),
    (["identify", "--model", "volta", "--path", "f16.f32", "--solver", "yices"], "--solver"),
    (["hwcheck", "--random", "0", "--arch", "volta", "--path", "f16.f32", "--device", "model:volta"], "--random"),
    (["hwcheck", "--random", "8", "--arch", "volta", "--path", "f16.f32", "--device", "model:volta", "--k", "0"], "--k"),
    (["hwcheck", "--random", "8", "--arch", "volta", "--path", "f16.f32", "--device", "model:volta", "--jobs", "-1"], "--jobs"),
    (["hwcheck", "--random", "8", "--arch", "volta", "--path", "f16.f32", "--device", "model:volta", "--seed", "-2"], "--seed"),
]


@pytest.mark.parametrize("args,option", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_out_of_range_options_are_one_line_errors(runner, tmp_path, args, option):
    with _cwd(tmp_path):
        r = runner.invoke(main, args)
        _one_line_usage_error(r, option)


def test_identify_radius_negative(runner, tmp_path):
    with _cwd(tmp_path):
        r = runner.invoke(main, ["identify", "--model", "volta", "--path", "f16.f32", "--radius", "-1", "--no-log"])
    assert r.exit_code == 2 and "--radius" in r.stderr


def test_identify_time_up_before_first_experiment_prints_no_table(runner, tmp_path):
    """A run that the time limit ends before any experiment identifies nothing: exit 2, no TOML entry."""
    with _cwd(tmp_path):
        r = runner.invoke(main, ["identify", "--model", "volta", "--path", "f16.f32", "--time-limit", "1e-9",
                                 "--no-log", "--radius", "0"])
    assert r.exit_code == 2, r.output
    assert "[[paths]]" not in r.output and "| Inputs |" not in r.output
    assert "before its first experiment" in r.stderr


# ----------------------------------------------------------------- --instr
def test_unknown_instr_rejected_by_discriminate(runner, tmp_path):
    with _cwd(tmp_path):
        r = runner.invoke(main, ["discriminate", "volta", "ampere", "--instr", "tensor", "--k", "1"])
        assert r.exit_code == 2, r.output
        assert "'tensor'" in r.stderr and "volta: mma" in r.stderr
        assert not list(tmp_path.rglob("*.json"))  # nothing written


def test_instr_that_one_model_has_is_accepted(runner, tmp_path):
    """--instr applies to the models that have it: volta (mma only) against hopper's wgmma."""
    with _cwd(tmp_path):
        r = runner.invoke(main, ["discriminate", "volta", "hopper", "--instr", "wgmma", "--k", "1", "--no-save"])
    assert r.exit_code == 0, r.output


def test_unknown_instr_rejected_by_resolve_and_dot(runner):
    from tcsmt.arith.registry import check_instr

    with pytest.raises(TcsmtError, match="instructions there: hopper: cublas, mma, simt_ffma, wgmma"):
        resolve("hopper", "fp16", "fp32", "tensor")
    with pytest.raises(TcsmtError, match="reference has no instruction"):
        check_instr("mma", ["exact"], "fp16", "fp32")
    r = runner.invoke(main, ["dot", "--arch", "volta", "--instr", "wgmma", "1", "1"])
    assert r.exit_code == 2 and "volta: mma" in r.stderr


# ----------------------------------------------------------------- hwcheck reads our files
def test_hwcheck_reads_discriminate_output(runner, tmp_path):
    """The quick start's file stores "instr": ["mma"] (one per model); hwcheck runs it."""
    with _cwd(tmp_path):
        r = runner.invoke(main, ["discriminate", "volta", "ampere", "--k", "1", "--timeout", "60"])
        assert r.exit_code == 0, r.output
        f = "generated/volta-vs-ampere-fp16-fp32.json"
        assert json.load(open(f))["instr"] == ["mma"]
        h = runner.invoke(main, ["hwcheck", f, "--device", "model:volta"])
    assert h.exit_code == 1, h.output  # ampere refuted by a device computing with volta
    assert "volta: confirmed" in h.output and "ampere: refuted" in h.output


def test_hwcheck_reads_query_output(runner, tmp_path):
    """A feature query's file: the base model and every hypothesis of its pairs, on the pairs' inputs."""
    with _cwd(tmp_path):
        r = runner.invoke(main, ["query", _small_query(tmp_path), "--timeout", "60", "--output", "q.json"])
        assert r.exit_code == 0, r.output
        assert "volta is the hypothesis: volta:extra_bits=0" in r.output
        h = runner.invoke(main, ["hwcheck", "q.json", "--device", "model:volta"])
    assert h.exit_code == 1, h.output
    assert "volta: confirmed" in h.output and "volta:extra_bits=0: confirmed" in h.output
    assert "volta:extra_bits=1: refuted" in h.output and "volta:extra_bits=2: refuted" in h.output


def test_hwcheck_file_with_two_instructions_needs_instr(runner, tmp_path):
    doc = {"in_fmt": "fp16", "out_fmt": "fp32", "instr": ["mma", "wgmma"], "models": ["hopper"],
           "inputs": [{"a": ["0x3c00"] * 16, "b": ["0x3c00"] * 16, "c": "0x00000000"}]}
    p = tmp_path / "two.json"
    p.write_text(json.dumps(doc))
    r = runner.invoke(main, ["hwcheck", str(p), "--device", "model:hopper"])
    assert r.exit_code == 2 and "--instr" in r.stderr
    r = runner.invoke(main, ["hwcheck", str(p), "--device", "model:hopper", "--instr", "mma"])
    assert r.exit_code == 0, r.output


# ----------------------------------------------------------------- timeouts are exit 2
def test_query_timeout_is_exit_2_without_conclusion(runner, tmp_path):
    with _cwd(tmp_path):
        r = runner.invoke(main, ["query", "carry-bits", "--timeout", "0.001", "--output", "q.json"])
        assert r.exit_code == 2, r.output
        assert "is the hypothesis" not in r.output and "no conclusion" in r.output
        assert "unanswered" in r.stderr
        doc = json.load(open("q.json"))
    assert doc["complete"] is False and doc["model_matches"] is None
    assert ["volta:carry_bits=2", "volta:carry_bits=3"] in doc["unanswered"]


def test_verify_compare_timeout_is_exit_2(runner):
    # bf16x9 less accurate than Markidis below 2^-14 on CDNA2 (which reads fp16 subnormal pieces as zero): no row of
    # the simulator search answers it and no composed proof applies, so it goes to the solver, which has 1 ms
    r = runner.invoke(main, ["verify", "--compare", "bf16x9", "markidis", "--arch", "cdna2", "--k", "1",
                             "--range", "2^-36..2^-14", "--timeout", "0.001"])
    assert r.exit_code == 2, r.output
    assert "1 of 2 comparisons unanswered" in r.stderr


def test_verify_bound_unknown_is_exit_2(runner):
    r = runner.invoke(main, ["verify", "--algo", "markidis", "--arch", "volta", "--k", "1", "--range", "1..2",
                             "--bound", "2^-4", "--timeout", "0.001"])
    assert r.exit_code == 2, r.output
    assert "UNKNOWN" in r.output and "UNKNOWN for volta" in r.stderr


def test_verify_worst_search_cut_by_timeouts_is_exit_2(runner):
    # plain fp32 FMAs: no composed proof covers them (the tensor-core schemes are proven, relative and --abs),
    # so the solver search runs and its first 1 ms query times out
    r = runner.invoke(main, ["verify", "--algo", "fp32", "--arch", "volta", "--k", "2", "--timeout", "0.001"])
    assert r.exit_code == 2, r.output
    assert "did not converge for volta" in r.stderr


def test_discriminate_count_cut_by_time_limit_says_so(runner, tmp_path):
    with _cwd(tmp_path):
        r = runner.invoke(main, ["discriminate", "volta", "ampere", "--k", "4", "--count", "100000",
                                 "--timeout", "8", "--output", "d.json"])
        assert r.exit_code == 2, r.output
        n = len(json.load(open("d.json"))["inputs"])
    assert 1 <= n < 100000
    assert f"after {n} of the 100000 inputs" in r.stderr and "time limit" in r.stderr


# ----------------------------------------------------------------- progress
def test_verify_progress_lines_on_stderr_only(runner):
    args = ["verify", "--compare", "ootomo", "markidis", "--arch", "volta", "--k", "2", "--range", "1..2",
            "--timeout", "0.001"]
    quiet = runner.invoke(main, args)
    loud = runner.invoke(main, args + ["--progress"])
    assert not any(line.startswith("[") for line in quiet.stderr.splitlines())
    lines = [line for line in loud.stderr.splitlines() if line.startswith("[")]
    assert len(lines) == 2 and all(" s] volta, 1..2: " in line for line in lines)
    assert not any(line.startswith("[") for line in loud.stdout.splitlines())


def test_query_progress_line_per_pair(runner, tmp_path):
    with _cwd(tmp_path):
        r = runner.invoke(main, ["query", _small_query(tmp_path), "--timeout", "60", "--no-save", "--progress"])
    assert r.exit_code == 0, r.output
    lines = [line for line in r.stderr.splitlines() if line.startswith("[")]
    assert [line.split("] ")[1].split(":")[0] for line in lines] == ["pair 1/2", "pair 2/2"]


def test_identify_progress_line_per_query(runner, tmp_path):
    with _cwd(tmp_path):
        r = runner.invoke(main, ["identify", "--model", "volta", "--path", "f16.f32", "--radius", "0", "--no-log",
                                 "--progress", "--max-experiments", "3", "--time-limit", "60"])
    lines = [line for line in r.stderr.splitlines() if line.startswith("[")]
    assert lines and all("] query " in line for line in lines)


def test_simulate_progress_in_chunks(runner, tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "SIMULATE_PROGRESS_ROWS", 100)
    rng = np.random.default_rng(1)
    a = rng.integers(0, 0x7bff, (250, 4)).astype(np.uint16)
    b = rng.integers(0, 0x7bff, (250, 4)).astype(np.uint16)
    c = np.zeros(250, np.uint32)
    np.savez(tmp_path / "in.npz", a=a, b=b, c=c)
    outs = []
    for extra in ([], ["--progress"]):
        out = tmp_path / f"out{len(extra)}.npz"
        r = runner.invoke(main, ["simulate", "--arch", "volta", "--in", "fp16", "--out", "fp32",
                                 str(tmp_path / "in.npz"), str(out)] + extra)
        assert r.exit_code == 0, r.output
        outs.append((r, np.load(out)["d"]))
    assert outs[0][0].stderr == ""
    lines = outs[1][0].stderr.strip().splitlines()
    assert [line.split("] ")[1] for line in lines] == ["simulated 100 of 250 dot products",
                                                       "simulated 200 of 250 dot products",
                                                       "simulated 250 of 250 dot products"]
    assert np.array_equal(outs[0][1], outs[1][1])  # chunks give the same bits


@pytest.mark.parametrize("module,args", [
    ("tcsmt.hwcheck.campaign", ["--arch", "volta", "--out", "x.json", "--budget", "-1"]),
    ("tcsmt.hwcheck.campaign", ["--arch", "volta", "--out", "x.json", "--n", "0"]),
    ("tcsmt.hwcheck.campaign", ["--arch", "volta", "--out", "x.json", "--seed", "-1"]),
    ("tcsmt.verify.device", ["--n", "0"]),
    ("tcsmt.verify.device", ["--k", "-4"]),
])
def test_scripts_share_the_ranges(module, args, tmp_path, capsys):
    import importlib

    with _cwd(tmp_path):
        assert importlib.import_module(module).main(args) == 2
    assert args[-2] in capsys.readouterr().err and not (tmp_path / "x.json").exists()
