"""Bad input to the ``python -m`` scripts: one CLI framework, one error trap.

Every script of tcsmt and hwcheck that takes options is a click command run by
``tcsmt.io.trap.script_main``: an unknown option, a missing file and a bad value are each one
``tcsmt: error:`` line on stderr and exit status 2, with no traceback and no output file left behind
(the argparse scripts once printed a usage block, and several a traceback for a missing file).
The one script of the package left on argparse, ``tools/device/library_plans.py``, runs on a bare GPU
host without tcsmt (its docstring says so); a test below keeps it the only one.  The benchmarks are click
commands too (``benchmarks/bench_fp8.py`` excepted for now: another branch is rewriting it).
"""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: (module, arguments) -> each must be one error line and exit 2; ``{tmp}`` is a fresh empty folder
CASES = {
    "tcsmt.library.convert": [
        ["{tmp}/plans.json", "--bogus"],                       # unknown option
        ["{tmp}/missing.json"],                                # missing file
        ["{tmp}/not-json.json", "-o", "{tmp}/out.toml"],       # bad value: not JSON
        ["{tmp}/plans.json", "--calls", "{tmp}/missing.json"],
    ],
    "tcsmt.library.replay": [
        ["{tmp}/plans.json", "--bogus"],
        ["{tmp}/missing.json"],
        ["{tmp}/plans.json", "--max-samples", "0"],
        ["{tmp}/not-json.json", "--json", "{tmp}/out.json"],
    ],
    "tcsmt.verify.device": [
        ["--bogus"],
        ["--n", "0", "--out", "{tmp}/out.json"],
        ["--k", "x"],
        ["--device", "model:hopper", "--n", "1", "--witness", "zz", "--out", "{tmp}/out.json"],
        ["--device", "model:nosuch", "--n", "1", "--out", "{tmp}/out.json"],
    ],
    "tcsmt.hwcheck.campaign": [
        ["--arch", "volta", "--out", "{tmp}/out.json", "--bogus"],
        ["--arch", "volta", "--device", "model:volta", "--extra-file", "{tmp}/missing.txt", "--out", "{tmp}/out.json"],
        ["--arch", "volta", "--out", "{tmp}/out.json", "--budget", "nan"],
        ["--arch", "volta"],                                   # --out missing
        ["--arch", "nosuch", "--device", "model:volta", "--out", "{tmp}/out.json"],
    ],
    "tcsmt.hwcheck.questions": [
        ["--out", "{tmp}/out.json", "--bogus", "{tmp}/plans.json"],
        ["--out", "{tmp}/out.json", "--device", "model:volta", "{tmp}/missing.json"],
        ["--out", "{tmp}/out.json", "--device", "nosuch", "{tmp}/plans.json"],
        ["--out", "{tmp}/out.json"],                           # no question file
    ],
    "tcsmt.solve.decisions": [
        ["ampere", "--bogus"],
        ["ampere", "--retry", "--output", "{tmp}/missing.json"],
        ["ampere", "--timeout", "0", "--output", "{tmp}/out.json"],
        ["nosuch", "--output", "{tmp}/out.json"],
        [],                                                    # no generation named
    ],
    "tools.library.decide": [
        ["--bogus"],
        ["--plans", "{tmp}/missing.json", "-o", "{tmp}/out.json"],
        ["--plans", "{tmp}/not-json.json", "-o", "{tmp}/out.json"],
    ],
    "tools.library.h200_own_plans": [
        ["--bogus"],
        ["-o", "{tmp}"],                                       # a folder, not a file
    ],
    "tools.device.emulation_cublas": [
        ["--out", "{tmp}/out.json", "--bogus"],
        ["--n", "1"],                                          # --out missing
        ["--out", "{tmp}/out.json", "--n", "0"],
        ["--out", "{tmp}/out.json", "--ks", "16,x"],
        ["--out", "{tmp}/out.json", "--ks", "0"],
    ],
    "tools.library.plans_build": [
        ["{tmp}", "--bogus"],
        ["{tmp}/missing", "--results", "{tmp}/results"],
        ["{tmp}", "--results", "{tmp}/results", "--workspace", "-1"],
        ["{tmp}", "--results", "{tmp}/results"],               # a folder without the device run's files
    ],
    "tools.library.h200_confirm": [
        ["nosuch"],                                            # unknown sub-command
        ["ingest", "{tmp}/missing"],
        ["ingest"],                                            # no folder
        ["summary", "--bogus"],
    ],
    "tools.library.plans_compare": [
        ["--bogus"],
        ["--a", "{tmp}/missing.json", "-o", "{tmp}/out.json"],
        ["--a", "{tmp}/not-json.json", "-o", "{tmp}/out.json"],
    ],
}


def _case_ids():
    return [(m, args) for m, cases in CASES.items() for args in cases]


@pytest.mark.parametrize("module,args", _case_ids(), ids=lambda x: x if isinstance(x, str) else " ".join(x) or "-")
def test_script_bad_input_is_one_line_and_exit_2(module, args, tmp_path, monkeypatch, capsys):
    (tmp_path / "plans.json").write_text('{"gpu": "NVIDIA H100", "calls": [], "families": []}\n')
    (tmp_path / "not-json.json").write_text("this is not JSON\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    monkeypatch.chdir(tmp_path)
    main = importlib.import_module(module).main
    status = main([a.replace("{tmp}", str(tmp_path)) for a in args])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("tcsmt: error: ") and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, no claim left behind


@pytest.mark.parametrize("module", sorted(CASES))
def test_script_help_is_exit_0(module, capsys):
    assert importlib.import_module(module).main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("Usage: ")


def test_only_the_bare_device_script_is_on_argparse():
    """One CLI framework: click everywhere, except the script that must run where tcsmt is not installed."""
    users = sorted(str(p.relative_to(REPO)) for d in ("tcsmt", "tools") for p in (REPO / d).rglob("*.py")
                   if re.search(r"^\s*import argparse|^\s*from argparse", p.read_text(), re.M))
    # the device scripts, shipped to a GPU host without tcsmt, and the stdlib-only summary of the recordings
    assert users == ["tools/device/invariance_witnesses.py", "tools/device/library_plans.py",
                     "tools/device/record_plans.py", "tools/device/summarize_recordings.py"]
    assert "argparse, not click" in (REPO / "tools" / "device" / "library_plans.py").read_text()


#: the benchmarks (benchmarks/ is on sys.path: tests/conftest.py), likewise: one line and exit 2
BENCHMARKS = {
    "bench_hwcheck": ["--n", "0"],
    "bench_library": ["--shape", "8", "x", "8"],
    "bench_simulator": ["--cpu", "-1"],
    "bench_smt": ["--timeout", "inf"],
    "bench_value_arrays": ["--K", "0"],
    "bench_verify": ["--runs", "0"],
    "bench_verify_proofs": ["--timeout", "0"],
    "bench_verify_composed": ["--algos", "markidis,nosuch"],
    "bench_verify_compare": ["--pairs", "markidis:nosuch"],
}


@pytest.mark.parametrize("module", sorted(BENCHMARKS))
@pytest.mark.parametrize("bad", ["unknown", "value"])
def test_benchmark_bad_input_is_one_line_and_exit_2(module, bad, capsys):
    args = ["--bogus"] if bad == "unknown" else BENCHMARKS[module]
    assert importlib.import_module(module).main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tcsmt: error: ") and "Traceback" not in err, err
