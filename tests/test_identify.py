"""tcsmt identify: hypothesis space, soundness of canonicalisation, identification of built-in models, CLI."""
from __future__ import annotations

import dataclasses
import json
import random
import time

import numpy as np
import pytest
from click.testing import CliRunner

from tcsmt.arith.params import validate
from tcsmt.cli.identify_cmd import identify_cmd
from tcsmt.errors import TcsmtError
from tcsmt.identify import Separator, feature_table, identify, replay, summary_lines, toml_entry
from tcsmt.identify.search import random_rows, random_separating
from tcsmt.identify.space import FACTOR_NAMES, Hypothesis, HypothesisSpace, PathInfo, parse_path
from tcsmt.identify.target import ModelTarget
from tcsmt.sim.simulator import simulate_params
from tcsmt.solve.inert import canonical

F16F32_4 = PathInfo("fp16", "fp32", "fp32", "mma", 4)


def truth_of(target: ModelTarget) -> Hypothesis:
    """The target's own model as a hypothesis of its path's space (canonical form)."""
    p = canonical(validate(dataclasses.replace(target.params, name="truth", sources=(), notes="")))
    return Hypothesis(p, "truth", (0,), 0)


# ------------------------------------------------------------------ space
def test_space_named_points_and_rings():
    space = HypothesisSpace.for_path(F16F32_4, radius=1)
    hyps = list(space)
    names = [h.name for h in hyps if h.ring == 0]
    assert any("volta" in n for n in names) and any("ieee-fma32" in n for n in names)
    assert len({h.key for h in hyps}) == len(hyps)  # deduplicated
    assert all(h.params.instr_k == 4 and 4 % (h.params.block_k or 4) == 0 for h in hyps)
    ring1 = [h for h in hyps if h.ring == 1]
    assert ring1 and all("+" in h.name for h in ring1)
    # ring 1 around volta holds every single-parameter change that is not a duplicate
    volta = next(h for h in hyps if "volta" in h.name.split(" = ") and h.ring == 0)
    for v in space.factors["carry_bits"]:
        q = canonical(validate(dataclasses.replace(volta.params, carry_bits=v)))
        assert q.semantic_key() in {h.key for h in hyps}
    assert space.product_size() > len(hyps)


def test_parse_path_errors():
    assert parse_path("f16.f32") == ("fp16", "fp32")
    assert parse_path("e4m3.f32") == ("e4m3", "fp32")
    for bad in ("f16", "f16.", "x.f32"):
        with pytest.raises(TcsmtError):
            parse_path(bad)


def test_canonical_is_sound():
    """Canonicalisation only changes parameters the semantics never reads: same outputs."""
    space = HypothesisSpace.for_path(PathInfo("fp16", "fp16", "fp16", "mma", 8), radius=1)
    rng = np.random.default_rng(5)
    a, b, c = random_rows("fp16", "fp16", 8, 600, rng)
    pyr = random.Random(1)
    changed = 0
    for h in pyr.sample(list(space), 40):
        for name in FACTOR_NAMES:
            if name not in space.factors:
                continue
            for v in space.factors[name]:
                try:
                    raw = validate(dataclasses.replace(h.params, **{name: v}))
                except TcsmtError:
                    continue
                can = canonical(raw)
                if can.semantic_key() == raw.semantic_key():
                    continue
                changed += 1
                assert np.array_equal(simulate_params(raw, a, b, c), simulate_params(can, a, b, c)), (raw, can)
    assert changed > 0


def test_random_search_separates_block_widths():
    space = HypothesisSpace.for_path(PathInfo("fp16", "fp32", "fp32", "mma", 8), radius=0)
    p = next(h.params for h in space if "turing" in h.name.split(" = "))
    q = dataclasses.replace(p, block_k=4 if p.block_k == 8 else 8)  # turing is one block of 8 (models/turing.toml)
    rows = random_separating(p, q, 8, np.random.default_rng(0))
    assert rows
    for a, b, c in rows:
        A, B = np.array([a], dtype=np.uint16), np.array([b], dtype=np.uint16)
        C = np.array([c], dtype=np.uint32)
        assert simulate_params(p, A, B, C)[0] != simulate_params(q, A, B, C)[0]


def test_separator_proves_equivalence_and_finds_inputs():
    space = HypothesisSpace.for_path(F16F32_4, radius=0)
    volta = next(h for h in space if "volta" in h.name.split(" = "))
    # with 5 addends below 2^(E+2) each, 4 or 5 carry bits never bind: provably equal to unbounded
    c5 = Hypothesis(dataclasses.replace(volta.params, carry_bits=5), "c5", (1,), 1)
    cu = Hypothesis(dataclasses.replace(volta.params, carry_bits="unbounded"), "cu", (1,), 1)
    sep = Separator(F16F32_4, timeout=120, readable=False)
    st, row, _, _ = sep.separate(c5, cu)
    assert st == "unsat"
    c2 = Hypothesis(dataclasses.replace(volta.params, carry_bits=2), "c2", (1,), 1)
    st, row, k, _ = sep.separate(volta, c2)
    assert st == "sat" and row is not None
    A, B = np.array([row[0]], dtype=np.uint16), np.array([row[1]], dtype=np.uint16)
    C = np.array([row[2]], dtype=np.uint32)
    assert simulate_params(volta.params, A, B, C)[0] != simulate_params(c2.params, A, B, C)[0]


def test_inert_align_floor_leaves_the_circuit_unchanged(monkeypatch):
    """An align_floor below every addend's smallest alignment exponent never binds, with any carry bits.

    fp16 products have raw exponents >= 2*emin = -28 and an fp32 C has e >= -126, so Hopper's floor
    (-133, models/hopper.toml) and -126 cannot raise E.  The SMT circuit must then be the one without
    the floor: the solver proved Volta equal to Hopper's floored variants with 3 carry bits in 40 s
    each before (most of `identify --model volta`'s 127 s), in under 1 s now.  The simulator with
    the floor forced in gives the same bits (the static fact is sound)."""
    from tcsmt.arith import semantics
    from tcsmt.solve.encode import make_inputs, output_term

    volta = next(h for h in HypothesisSpace.for_path(F16F32_4, radius=0) if "volta" in h.name.split(" = "))
    inp = make_inputs("fp16", "fp32", 4, prefix="floor_")
    plain = output_term(volta.params, inp)
    rng = np.random.default_rng(3)
    a, b, c = random_rows("fp16", "fp32", 4, 3000, rng)
    a[:50], b[:50], c[:50] = 0, 0, 0  # all-zero rows: E has no non-zero addend at all
    c[50:100] = 0x00000001  # the smallest subnormal C
    for floor in (-133, -126):
        floored = dataclasses.replace(volta.params, align_floor=floor)
        assert output_term(floored, inp) is plain, floor
        new = simulate_params(floored, a, b, c)
        monkeypatch.setattr(semantics, "_floor_is_inert", lambda terms, F, p: False)
        forced = simulate_params(floored, a, b, c)
        monkeypatch.undo()
        assert np.array_equal(new, forced)
    # a floor above the smallest C exponent does bind: the circuit keeps it
    assert output_term(dataclasses.replace(volta.params, align_floor=-100), inp) is not plain


# ------------------------------------------------------------------ identification
def _check_identified(spec: str, path: str, tmp_path, **kw):
    target = ModelTarget(spec, path)
    t0 = time.time()
    res = identify(target, log_dir=str(tmp_path / "log"), **kw)
    took = time.time() - t0
    assert res.status in ("identified", "undecided"), summary_lines(res)
    assert len(res.experiments) <= 30
    truth = truth_of(target)
    keys = {h.key for h in res.classes[0]}
    # sound elimination: the model itself (a named point of the space) always survives
    assert truth.key in {h.key for h in res.survivors}, summary_lines(res)
    if res.status == "undecided":
        # some survivors could not be told apart from the best within the solver time limit
        # (e.g. 5 carry bits vs unbounded at K = 32): the best must then have the model's value
        # of every parameter the space varies
        for name in res.space.factors:
            assert getattr(res.best.params, name) == getattr(truth.params, name), (name, summary_lines(res))
    elif truth.key not in keys:
        # not the same parameters: the solver must prove the best survivor equal to the truth
        st, _, _, _ = Separator(target.path, timeout=300, readable=False).separate(res.best, truth)
        assert st == "unsat", f"{spec}: identified {res.best.name}, not provably equal to the model"
    # every experiment is consistent with the truth (the virtual device is the truth)
    for e in res.experiments:
        out = simulate_params(truth.params, np.array([e.a]), np.array([e.b]), np.array([e.c]), bits=True)
        assert int(out[0]) == e.d
    log = json.loads((tmp_path / "log" / "experiments.json").read_text())
    assert len(log["experiments"]) == len(res.experiments) and log["status"] == res.status
    print(f"{spec} {path}: {len(res.experiments)} experiments, {res.hypotheses_checked} hypotheses, {took:.0f} s")
    return res


@pytest.mark.parametrize("radius", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_identify_volta(radius, tmp_path, monkeypatch):
    """Volta f16 -> f32 identified from a virtual device: ring 1 in CI (about 10 s on 2 cores), ring 2 (the
    CLI default, 2,000+ hypotheses, minutes) with the slow tests.  Expected values: Volta's published
    parameters (Fasi, Higham, Mikaitis, Pranesh 2020, sec. 3.1; 3 carry bits: Valpey et al.; models/volta.toml).
    The result's [[paths]] TOML entry loads as a model with the identified parameters (_check_toml_entry:
    the check of the former test_toml_entry_loads_as_model, which ran a ring-1 identification of its own)."""
    kw = {} if radius == 2 else {"radius": 1, "candidates": 1, "quick_timeout": 4, "timeout": 30}
    res = _check_identified("volta", "f16.f32", tmp_path, **kw)
    p = res.best.params
    assert (p.block_k, p.extra_bits, p.carry_bits, p.align, p.block_round) == (4, 0, 3, "trunc", "rz")
    table = "\n".join(feature_table(res))
    assert "truncate" in table and "| 3 |" in table
    # the replayed log gives the same survivors
    again = replay(str(tmp_path / "log"))
    assert again.status == "identified" and again.best.key == res.best.key
    # and each experiment's survivor counts, recomputed in log order
    assert [(e.before, e.after) for e in again.experiments] == [(e.before, e.after) for e in res.experiments]
    _check_toml_entry(res, tmp_path, monkeypatch)


# every built-in model's instruction path that identify can run as a virtual device
BUILTIN = [
    ("volta", "f16.f32"), ("hopper", "e4m3.f32"),
    ("cdna1", "f16.f32"),  # exact (Kulisch) blocks of 4
    # CI time: these seven (10-26 s each on 2 cores) run with the slow tests; the three above keep a
    # truncating NVIDIA path, an fp8 path and an exact-block AMD path in every CI run
    *(pytest.param(s, p, marks=pytest.mark.slow) for s, p in (
        ("turing", "f16.f32"), ("hopper", "f16.f32"),
        ("ampere", "f16.f32"), ("ada", "f16.f32"), ("blackwell", "f16.f32"), ("ada", "e4m3.f32"),
        ("cdna2", "f16.f32"),  # pairwise RNE, no subnormals
    )),
]


@pytest.mark.parametrize("spec,path", BUILTIN)
def test_identify_builtin_among_named_models(spec, path, tmp_path):
    """Every built-in model is recovered among the named points of its path's space (ring 0: every
    built-in model with those formats, their named hypotheses, exact, ieee-fma32, pairwise-rne),
    then checked on 512 random inputs.  Seconds each; the ring-1 runs below are the slow variant.

    10 s for each hard pair (was 30 s on the fp16 paths): the pairs no query separates in 10 s here
    (overflow_max on the fp16 paths of Ada and Ampere, where no fp16 dot product overflows fp32;
    keep_subnormal_c on CDNA2) were not separated in 30 s either, and every path ended with the same status
    and best survivor with 10 s as with 30 s (2026-11-26, each path run with both); such a run ends
    "undecided" and is checked as one (every parameter the space varies at the model's value)."""
    _check_identified(spec, path, tmp_path, radius=0, candidates=1, quick_timeout=4, timeout=10)


@pytest.mark.slow
@pytest.mark.parametrize("spec,path", BUILTIN[1:])  # volta: test_identify_volta (ring 2)
def test_identify_builtin(spec, path, tmp_path):
    # ring 1 and one solver candidate per round keep the time down (about 15 to 260 s a path, most of it
    # solver queries that run out of time at K = 32 and on the CDNA paths); the CLI default is ring 2
    _check_identified(spec, path, tmp_path, radius=1, candidates=1, quick_timeout=4,
                      timeout=10 if path.startswith("e") else 30)


def test_space_too_small_gives_counterexample(tmp_path):
    """Volta with 1 carry bit is no named model: with ring 0 only, nothing survives.  (4 carry bits never bind
    on Volta's 4 products + C, so they equal the named hypothesis volta:carry_unbounded.)"""
    res = identify(ModelTarget("volta:carry_bits=1", "f16.f32"), radius=0, log_dir=None)
    assert res.status == "none" and res.experiments
    lines = summary_lines(res)
    assert "too small" in lines[0] and "device" in lines[2]


# ------------------------------------------------------------------ TOML entry
def _check_toml_entry(res, tmp_path, monkeypatch) -> None:
    """The [[paths]] entry of an identify result loads as a model with the identified parameters."""
    entry = toml_entry(res)
    d = tmp_path / "models"
    d.mkdir()
    (d / "found.toml").write_text('name = "found"\ntitle = "identified"\n\n' + entry)
    from tcsmt.arith import registry

    monkeypatch.setenv("TCSMT_MODELS", str(d))
    registry._archs_cached.cache_clear()
    try:
        p = registry.resolve("found", "fp16", "fp32")
        assert canonical(dataclasses.replace(p, name="")).semantic_key() == \
            dataclasses.replace(res.best.params, name="").semantic_key()
    finally:
        registry._archs_cached.cache_clear()


# ------------------------------------------------------------------ CLI
def test_cli_model_write_and_replay(tmp_path):
    runner = CliRunner()
    out = tmp_path / "volta.toml"
    log = tmp_path / "log"
    # ring 1 with one candidate per round and 4 s quick queries, as test_identify_volta[1] (half the time of the
    # CLI defaults; test_cli_options runs identify with them)
    args = ["--model", "volta", "--path", "f16.f32", "--radius", "1", "--candidates", "1", "--quick-timeout", "4",
            "--log-dir", str(log), "--write", str(out)]
    r = runner.invoke(identify_cmd, args)
    assert r.exit_code == 0, r.output
    assert "Subnormal inputs handled?" in r.output and "[[paths]]" in r.output and "carry_bits = 3" in r.output
    assert out.read_text().startswith("[[paths]]")
    r2 = runner.invoke(identify_cmd, args)
    assert r2.exit_code == 2 and "exists" in r2.output
    r3 = runner.invoke(identify_cmd, ["--replay", str(log)])
    assert r3.exit_code == 0, r3.output
    assert "carry_bits = 3" in r3.output


@pytest.mark.parametrize("args,msg", [
    (["--model", "volta", "--path", "f16.f99"], "format"),
    (["--model", "volta", "--path", "e4m3.f32"], "no path"),
    (["--model", "nosucharch", "--path", "f16.f32"], "unknown architecture"),
    (["--path", "f16.f32"], "exactly one"),
    (["--model", "volta", "--gpu", "--path", "f16.f32"], "exactly one"),
    (["--model", "volta"], "--path"),
    (["--model", "volta", "--path", "f16.f32", "--radius", "x"], "--radius"),
    (["--replay", "/nonexistent/dir"], "cannot read"),
])
def test_cli_user_errors(args, msg):
    r = CliRunner().invoke(identify_cmd, args)
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("tcsmt: error:") and msg in lines[0]


def test_cli_gpu_without_cuda():
    try:
        from tcsmt.hwcheck.runner import default_device

        default_device()
        pytest.skip("a CUDA device is present")
    except TcsmtError:
        pass
    r = CliRunner().invoke(identify_cmd, ["--gpu", "--path", "f16.f32"])
    assert r.exit_code == 2 and "CUDA" in r.output
