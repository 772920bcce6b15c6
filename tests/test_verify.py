"""tcsmt verify: the emulation schemes (Markidis, Ootomo-Yokota) in the simulator and the SMT encoding."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import round_fraction

from tcsmt import verify as V
from tcsmt.arith.formats import get_format
from tcsmt.cli.verify_cmd import verify_cmd
from tcsmt.sim.simulator import simulate_params
from tcsmt.solve.evaluate import evaluate
from tcsmt.verify.schemes import split

FP32, FP16 = get_format("fp32"), get_format("fp16")


def f32(values) -> np.ndarray:
    """fp32 patterns of exactly representable values (a 2-D row)."""
    return np.array([[FP32.from_fraction(Fraction(v)) for v in values]], dtype=np.uint32)


def val32(bits: int) -> Fraction:
    return FP32.to_fraction(int(bits))


# ------------------------------------------------------------ hand cases
def test_split_hand_cases():
    nb = V.NB
    # x = 2^-20 + 2^-25: fp16 subnormal grid 2^-24, tie -> even (2^-20); residual 2^-25
    x = np.array([FP32.from_fraction(Fraction(2) ** -20 + Fraction(2) ** -25)], dtype=np.int64)
    hi, lo_m = split(nb, x, 0)
    _, lo_o = split(nb, x, 11)
    assert FP16.to_fraction(int(hi[0])) == Fraction(2) ** -20
    assert FP16.to_fraction(int(lo_m[0])) == 0  # 2^-25 is a tie between 0 and 2^-24: even is 0
    assert FP16.to_fraction(int(lo_o[0])) == Fraction(2) ** -14  # 2^11 * 2^-25, exact
    # x = 1 - 2^-24 rounds up to 1 in fp16; residual -2^-24 (fp16's smallest subnormal)
    x = np.array([FP32.from_fraction(1 - Fraction(2) ** -24)], dtype=np.int64)
    hi, lo_m = split(nb, x, 0)
    _, lo_o = split(nb, x, 11)
    assert FP16.to_fraction(int(hi[0])) == 1
    assert FP16.to_fraction(int(lo_m[0])) == -Fraction(2) ** -24
    assert FP16.to_fraction(int(lo_o[0])) == -Fraction(2) ** -13


def test_volta_truncation_hand_case():
    """a = 1 - 2^-24, b = 1 on Volta (truncating adder, no extra bits).

    Markidis: acc = TC(1*1) = 1; TC(1*0 + 1) = 1; TC(-2^-24 * 1 + 1): the
    product lies below the 2^-23 grid of the largest term and is truncated,
    so D = 1.  Ootomo-Yokota: D_main = 1, D_corr = -2^-13, D = RN32(1 - 2^-24)
    = 1 - 2^-24 exactly.
    """
    p = V.model_for("volta")
    a, b = f32([1 - Fraction(2) ** -24]), f32([1])
    assert val32(V.simulate_scheme("markidis", p, a, b)[0]) == 1
    assert val32(V.simulate_scheme("ootomo", p, a, b)[0]) == 1 - Fraction(2) ** -24
    assert val32(V.simulate_scheme("fp32", None, a, b)[0]) == 1 - Fraction(2) ** -24
    w = V.replay(["markidis", "ootomo"], p, [int(a[0, 0])], [int(b[0, 0])], relative=False)
    assert w.errors["markidis"] == Fraction(2) ** -24 and w.errors["ootomo"] == 0


def test_markidis_residual_underflow_hand_case():
    """a = 2^-20 + 2^-25, b = 1: Markidis drops the residual (it rounds to 0 in fp16), Ootomo keeps it."""
    p = V.model_for("hopper")
    x = Fraction(2) ** -20 + Fraction(2) ** -25
    a, b = f32([x]), f32([1])
    assert val32(V.simulate_scheme("markidis", p, a, b)[0]) == Fraction(2) ** -20
    assert val32(V.simulate_scheme("ootomo", p, a, b)[0]) == x


def _reference_scheme(algo: str, p, a: np.ndarray, b: np.ndarray) -> Fraction:
    """An independent implementation: numpy fp16 casts (RNE) for the splits, the model's
    simulate_params for each tensor-core instruction, exact rationals for RN32 sums."""
    af = a.view(np.float32)
    bf = b.view(np.float32)
    ah, bh = af.astype(np.float16), bf.astype(np.float16)
    ra = af - ah.astype(np.float32)  # exact in fp32
    rb = bf - bh.astype(np.float32)
    scale = np.float32(2048) if algo == "ootomo" else np.float32(1)
    al, bl = (ra * scale).astype(np.float16), (rb * scale).astype(np.float16)
    K = a.shape[1]
    step = p.instr_k
    zero = np.zeros(1, dtype=np.uint32)

    def tc(x, y, acc):
        return simulate_params(p, x.view(np.uint16)[None, :], y.view(np.uint16)[None, :], acc)

    if algo == "markidis":
        acc = zero
        for k0 in range(0, K, step):
            s = slice(k0, k0 + step)
            for x, y in ((ah[0, s], bh[0, s]), (ah[0, s], bl[0, s]), (al[0, s], bh[0, s])):
                acc = tc(x, y, acc)
        return val32(acc[0])
    main, corr = Fraction(0), zero
    for k0 in range(0, K, step):
        s = slice(k0, k0 + step)
        main = round_fraction(main + val32(tc(ah[0, s], bh[0, s], zero)[0]), "fp32")
        corr = tc(al[0, s], bh[0, s], corr)
        corr = tc(ah[0, s], bl[0, s], corr)
    return round_fraction(main + val32(corr[0]) / 2048, "fp32")


@pytest.mark.parametrize("arch", ["volta", "ampere"])
@pytest.mark.parametrize("algo", ["markidis", "ootomo"])
def test_schemes_match_independent_reference(arch, algo):
    p = V.model_for(arch)
    rng = np.random.default_rng(7)
    K = 2 * p.instr_k + 3  # several k-blocks and a partial one
    a, b = V.random_inputs(rng, 40, K, V.parse_range("2^-10..2^6"), "loguniform")
    got = V.simulate_scheme(algo, p, a, b)
    for i in range(len(got)):
        assert val32(got[i]) == _reference_scheme(algo, p, a[i:i + 1], b[i:i + 1]), i


#: the piece products of the vendor schemes, in chain order, written out by hand (independent of
#: verify_schemes.piece_pairs): bf16x9 least significant first, the 3-product schemes most significant first
_VENDOR_REFERENCE = {
    "bf16x9": ("bf16", 3, [(2, 2), (2, 1), (1, 2), (2, 0), (1, 1), (0, 2), (1, 0), (0, 1), (0, 0)]),
    "bf16x9-large-first": ("bf16", 3, [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (2, 0), (1, 2), (2, 1), (2, 2)]),
    "bf16x3": ("bf16", 2, [(0, 0), (0, 1), (1, 0)]),
    "tf32x3": ("tf32", 2, [(0, 0), (0, 1), (1, 0)]),
}


def _reference_vendor(algo: str, p, a_row: np.ndarray, b_row: np.ndarray) -> Fraction:
    """Pieces by exact rationals (x_0 = fmt(x), x_i = fmt(x - x_0 - ... - x_{i-1}), RNE), each tensor-core
    instruction by the model's simulate_params, one accumulator chain from +0."""
    fmt_name, n, pairs = _VENDOR_REFERENCE[algo]
    fmt = get_format(fmt_name)

    def pieces(bits):
        rest, out = val32(int(bits)), []
        for _ in range(n):
            piece = round_fraction(rest, fmt_name)
            out.append(fmt.from_fraction(piece))
            rest -= piece
        return out

    pa = [pieces(x) for x in a_row]
    pb = [pieces(y) for y in b_row]
    acc = np.zeros(1, dtype=np.uint32)
    for k0 in range(0, len(a_row), p.instr_k):
        blk = range(k0, min(len(a_row), k0 + p.instr_k))
        for i, j in pairs:
            x = np.array([[pa[k][i] for k in blk]], dtype=fmt.dtype)
            y = np.array([[pb[k][j] for k in blk]], dtype=fmt.dtype)
            acc = simulate_params(p, x, y, acc)
    return val32(acc[0])


@pytest.mark.parametrize("arch", ["ampere", "hopper"])
@pytest.mark.parametrize("algo", sorted(_VENDOR_REFERENCE))
def test_vendor_schemes_match_independent_reference(arch, algo):
    fmt_name = _VENDOR_REFERENCE[algo][0]
    p = V.model_for(arch, fmt_name)
    rng = np.random.default_rng(11)
    K = p.instr_k + 3  # a full k-block and a partial one
    a, b = V.random_inputs(rng, 25, K, V.parse_range("2^-30..2^20", fmt_name), "loguniform")
    got = V.simulate_scheme(algo, p, a, b)
    for i in range(len(got)):
        assert val32(got[i]) == _reference_vendor(algo, p, a[i], b[i]), i


# ------------------------------------------------- SMT term == simulator
def _random_patterns(rng, n, K):
    """Mostly fp16-range values, plus any fp32 pattern (huge, tiny, inf, NaN)."""
    a, b = V.random_inputs(rng, n, K, V.parse_range("2^-40..2^15"), "loguniform")
    wild = rng.integers(0, 1 << 32, size=(n // 4, K), dtype=np.uint64).astype(np.uint32)
    a[: n // 4] = wild
    b[n // 8: n // 8 + n // 4] = rng.integers(0, 1 << 32, size=(n // 4, K), dtype=np.uint64).astype(np.uint32)
    return a, b


@pytest.mark.parametrize("arch,algo,K", [("volta", "markidis", 5), ("volta", "ootomo", 5), ("hopper", "ootomo", 3),
                                          ("cdna2", "markidis-full", 2), ("turing", "fp32", 3),
                                          ("hopper", "bf16x9", 2), ("ampere", "tf32x3", 2), ("cdna1", "bf16x3", 2)])
def test_smt_encoding_agrees_with_simulator(arch, algo, K):
    p = V.params_for(algo, arch)
    prob = V.make_problem(K, V.parse_range("2^-14..2^14"))
    term = V.output_pattern(V.scheme_term(algo, p, prob))
    rng = np.random.default_rng(11)
    a, b = _random_patterns(rng, 200, K)
    env = {prob.symbols[f"a{i}"]: a[:, i].astype(np.int64) for i in range(K)}
    env.update({prob.symbols[f"b{i}"]: b[:, i].astype(np.int64) for i in range(K)})
    smt = np.asarray(evaluate(term, env)).astype(np.uint64)
    sim = V.simulate_scheme(algo, p, a, b).astype(np.uint64)
    assert np.array_equal(smt, sim)


def test_smt_error_terms_are_exact():
    """The encoded |D - A.B| (times 2^-L) equals the exact error on random domain inputs."""
    p = V.model_for("volta")
    dom = V.parse_range("2^-20..2^10")
    prob = V.make_problem(2, dom)
    et = V.error_terms(prob, V.scheme_term("markidis", p, prob))
    rng = np.random.default_rng(3)
    a, b = V.random_inputs(rng, 50, 2, dom, "loguniform")
    env = {prob.symbols[f"a{i}"]: a[:, i].astype(np.int64) for i in range(2)}
    env.update({prob.symbols[f"b{i}"]: b[:, i].astype(np.int64) for i in range(2)})
    err = evaluate(SB_pattern(et.err), env)
    d = V.simulate_scheme("markidis", p, a, b)
    for i in range(50):
        want = V.error_of(int(d[i]), list(a[i]), list(b[i]), relative=False)
        assert Fraction(int(err[i])) * Fraction(2) ** et.L == want


def SB_pattern(x):
    return V.SB.pattern(x, x.w)


# --------------------------------------------------------------- solver
def test_bound_proven_and_refuted():
    # K = 1, inputs in [1, 2]: Markidis's relative error is below 2^-4 (a loose bound the solver proves) ...
    dom = V.parse_range("1..2")
    r = V.prove_bound("markidis", "volta", 1, dom, Fraction(1, 1 << 4), True, timeout=40)
    assert r.status == "proven"
    # ... but not zero: some input has a positive error, and the counterexample is replayed
    r = V.prove_bound("markidis", "volta", 1, dom, Fraction(1, 1 << 40), True, timeout=40)
    assert r.status == "counterexample" and r.witness.errors["markidis"] > Fraction(1, 1 << 40)


def test_compare_reproduces_volta_finding():
    """Seed 003: Ootomo-Yokota is less accurate than Markidis for some inputs on Volta."""
    r = V.compare("ootomo", "markidis", "volta", 1, V.parse_range("2^-36..2^-14"), timeout=40)
    assert r.status == "found"
    w = r.witness
    assert w.errors["ootomo"] > w.errors["markidis"]
    assert V.exact_dot(w.a, w.b) == w.exact


# ------------------------------------------------------------------ CLI
@pytest.mark.parametrize("args,needle", [
    (["--algo", "kahan"], "unknown algorithm"),
    (["--algo", "markidis", "--arch", "pascal"], "unknown architecture"),
    (["--algo", "markidis", "--range", "2^3..2^-3"], "bad --range"),
    (["--algo", "markidis", "--range", "1..2^20"], "bad --range"),
    (["--algo", "markidis", "--range", "one..two"], "bad --range"),
    (["--algo", "markidis", "--bound", "0"], "--bound must be positive"),
    (["--algo", "markidis", "--bound", "-2^-20"], "--bound must be positive"),
    (["--compare", "ootomo", "ootomo"], "two different algorithms"),
    ([], "give --algo"),
])
def test_cli_user_errors(args, needle):
    res = CliRunner().invoke(verify_cmd, args)
    assert res.exit_code == 2
    err = res.stderr.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_cli_stats_and_bound():
    res = CliRunner().invoke(verify_cmd, ["--stats", "--arch", "volta", "--n", "300", "--k", "8"])
    assert res.exit_code == 0, res.output
    assert "markidis" in res.output and "ootomo" in res.output and "95th pct" in res.output
    res = CliRunner().invoke(verify_cmd, ["--algo", "markidis", "--arch", "volta", "--k", "1", "--range", "1..2",
                                          "--bound", "2^-4", "--timeout", "40"])
    assert res.exit_code == 0, res.output
    assert "PROVEN" in res.output


# ------------------------------------------------------------ split lemmas
def test_split_units_are_exact():
    """split_units: |x| = sig 2^lsb, x - x_h = sign(x) r 2^lsb, 2^-s lo = sign(x) lo_units 2^lsb, t = r - lo_units."""
    from tcsmt.verify.schemes import split_units

    rng = np.random.default_rng(5)
    a, _ = V.random_inputs(rng, 300, 1, V.parse_range("2^-20..2^15"), "loguniform")
    x = a[:, 0].astype(np.int64)
    for s in (0, 11):
        u = split_units(V.NB, x, s)
        for i in range(len(x)):
            xv = val32(int(x[i]))
            sign = -1 if xv < 0 else 1
            unit = Fraction(2) ** int(u.lsb[i])
            xh = FP16.to_fraction(int(u.hi[i]))
            lo = FP16.to_fraction(int(u.lo[i]))
            assert int(u.sig[i]) * unit == abs(xv)
            assert sign * int(u.r[i]) * unit == xv - xh
            assert sign * int(u.lo_units[i]) * unit == lo / 2 ** s
            assert int(u.t[i]) == int(u.r[i]) - int(u.lo_units[i])


def test_split_lemma_rho_and_markidis_theta():
    """rho: |x - fp16(x)| <= rho |x|; fp16 round-to-nearest has sup u / (1 + u), u = 2^-11 (Higham,
    Accuracy and Stability of Numerical Algorithms, 2nd ed., Thm 2.2 and the remark after it), attained at
    x = 1 + 2^-11 (a tie, to even: x_h = 1).  theta (Markidis, s = 0) on 2^-14 <= |x|: at x = 2^-14 (1 + 2^-11)
    the residual 2^-25 rounds to 0 in fp16 (a tie between 0 and 2^-24), so theta >= u / (1 + u) as well."""
    from tcsmt.verify.pieces import piece_lemma, split_scheme

    dom = V.parse_range("2^-14..2^14")
    sup = Fraction(1, 2048) / (1 + Fraction(1, 2048))
    for piece in (0, 1):  # rho (|x - x_h|), theta (|x - x_h - lo|)
        lem = piece_lemma(split_scheme(0), True, dom, piece, timeout=60)
        assert lem.bound is not None, lem.stopped
        assert sup <= lem.bound <= Fraction(1, 2048) * (1 + Fraction(1, 16))
        assert 0 < lem.found <= lem.bound and lem.bound <= lem.found * (1 + Fraction(1, 16))


@pytest.mark.slow
def test_split_lemma_ootomo_theta():
    """Ootomo-Yokota's scaled residual keeps about 22 significant bits of x (their paper's claim): the tail
    |x - x_h - 2^-11 dx| stays below 2^-20 |x| on 2^-14 <= |x| <= 2^14, and is not zero."""
    from tcsmt.verify.pieces import piece_lemma, split_scheme

    lem = piece_lemma(split_scheme(11), True, V.parse_range("2^-14..2^14"), 1, timeout=60)
    assert lem.bound is not None and 0 < lem.found <= lem.bound < Fraction(1, 1 << 20)


# ------------------------------------------------------------ instruction lemma (composed proofs)
def test_instr_lemma_single_product_is_exact():
    """One product of normal fp16 values has at most 2 x 11 = 22 significant bits, within fp32's 24
    (IEEE 754-2019, Table 3.5: binary16 p = 11, binary32 p = 24), so one Hopper instruction on one product
    and C = +0 returns it exactly: "error > 2^-30 |x y|" is unsat."""
    from tcsmt.verify.lemmas import instr_lemma

    lem = instr_lemma(V.model_for("hopper"), 1, 60, measure="products", heads=True, c_set="zero",
                      start=Fraction(1, 1 << 30), max_steps=1)
    assert lem.steps[0].status == "unsat" and lem.bound == Fraction(1, 1 << 30) and lem.found == 0


@pytest.mark.parametrize("arch, fields", [("volta", (15, 15)), ("cdna2", (0, 1))])
def test_instr_lemma_witness_replays(arch, fields):
    """A truncating accumulator (Volta: F = 23) and a flushing one (CDNA2: fp16 subnormals read as zero,
    exponent field 0 included here) both lose low bits of an fp32 C: the solver's input for "error >
    2^-40 mu" is replayed in the simulator with the values the model reads (tighten raises if the replayed
    error does not exceed the threshold)."""
    from tcsmt.verify.lemmas import instr_lemma

    lem = instr_lemma(V.model_for(arch), 1, 60, exp_fields=fields, start=Fraction(1, 1 << 40), max_steps=1)
    assert lem.steps[0].status == "sat" and lem.found > Fraction(1, 1 << 40) and lem.bound is None


def test_instr_lemma_relative_grid():
    """The relative grid 2^(E - R) (every shift relative to the largest exponent E) proves the single-product
    exactness above, with the bound widened by the (n + 2) 2^-R the truncation to that grid may hide, and
    still finds Volta's truncation of C (a sat answer replayed above the threshold)."""
    from tcsmt.verify.lemmas import instr_lemma

    exact = instr_lemma(V.model_for("hopper"), 1, 60, measure="products", heads=True, c_set="zero",
                        start=Fraction(1, 1 << 30), max_steps=1, relative=40)
    assert exact.steps[0].status == "unsat" and exact.bound == Fraction(1, 1 << 30) + Fraction(3, 1 << 40)
    lossy = instr_lemma(V.model_for("volta"), 1, 60, exp_fields=(15, 15), start=Fraction(1, 1 << 30), max_steps=1,
                        relative=40, top="c")
    assert lossy.steps[0].status == "sat" and lossy.found > Fraction(1, 1 << 30)
