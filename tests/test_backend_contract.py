"""Every static bound that semantics.py claims holds (the back-end contract, tcsmt/arith/contract.py).

The SMT back end sizes its bit-vectors from the bounds the semantics passes to ``fit``, ``mul``,
``shl`` and ``msb``; the numpy back end does not need them.  A wrong bound would make the solver's
circuit wrap where the simulator does not, silently.  Here the semantics runs on the checking numpy
back end for every built-in path, every named hypothesis and every reference, on random and
edge-case inputs (those of tests/test_smt_agreement.py), and must give the simulator's bits.
"""
from __future__ import annotations

import zlib
from fractions import Fraction

import numpy as np
import pytest
from conftest import sweep_sample
from test_smt_agreement import _edge_patterns, _random_patterns

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import get_format
from tcsmt.arith.params import ModelParams, validate
from tcsmt.arith.registry import REFERENCES, all_paths, reference_params
from tcsmt.backends.numpy import BoundViolation, CheckedNumpyBackend
from tcsmt.sim.simulator import simulate_params

N_EACH = 300


def _cases():
    out = []
    for _arch, path in all_paths():
        out.append(pytest.param(path.params, id=path.params.name))
        for hyp, over in path.hypotheses.items():
            out.append(pytest.param(validate(path.params.with_overrides(over)), id=f"{path.params.name}:{hyp}"))
    for ref in REFERENCES:
        out.append(pytest.param(reference_params(ref, "fp16", "fp32"), id=f"{ref}/fp16.fp32"))
    return out


def _inputs(p: ModelParams, K: int):
    fin, fb, fc = get_format(p.in_fmt), get_format(p.b_format), get_format(p.c_fmt)
    rng = np.random.default_rng(zlib.crc32(p.name.encode()))
    a = [_random_patterns(rng, fin, (N_EACH, K), m) for m in ("bits", "narrow", "wide")]
    b = [_random_patterns(rng, fb, (N_EACH, K), m) for m in ("bits", "narrow", "wide")]
    c = [_random_patterns(rng, fc, (N_EACH,), m) for m in ("bits", "narrow", "wide")]
    ea, eb, ec = _edge_patterns(fin), _edge_patterns(fb), _edge_patterns(fc)
    a.append(ea[rng.integers(0, len(ea), size=(N_EACH, K))])
    b.append(eb[rng.integers(0, len(eb), size=(N_EACH, K))])
    c.append(ec[rng.integers(0, len(ec), size=N_EACH)])
    scales = {}
    if p.scale_fmt:  # block-scaled: every scale pattern (NaN included), a third of them 1.0 .. 2^+-3
        fs = get_format(p.scale_fmt)
        shape = (4 * N_EACH, -(-K // p.scale_block))
        for name in ("sa", "sb"):
            near = (rng.integers(fs.bias - 3, fs.bias + 4, size=shape) << fs.frac_bits)
            scales[name] = np.where(rng.random(shape) < 0.3, near,
                                    rng.integers(0, 1 << fs.storage_bits, size=shape)).astype(np.uint8)
    return (np.concatenate(a).astype(fin.dtype), np.concatenate(b).astype(fb.dtype),
            np.concatenate(c).astype(fc.dtype), scales)


@pytest.mark.parametrize("p", sweep_sample(_cases()))
def test_semantics_bounds_hold(p):
    K = p.instr_k or 2 * (p.block_k or 2)  # library chains: two blocks through the accumulator
    if p.in_fmt == "fp64":
        K = 2
    a, b, c, scales = _inputs(p, K)
    cols = {k: [v[:, j] for j in range(v.shape[1])] for k, v in scales.items()}
    d = sem.dot(CheckedNumpyBackend(), p, [a[:, k] for k in range(K)], [b[:, k] for k in range(K)], c,
                cols.get("sa", []), cols.get("sb", []))
    expect = simulate_params(p, a, b, c, **scales)
    assert np.array_equal(np.asarray(d).astype(expect.dtype), expect)


def test_checking_backend_catches_a_false_claim():
    cb = CheckedNumpyBackend()
    with pytest.raises(BoundViolation):
        cb.fit(np.array([1 << 10]), 10)  # 2^10 does not fit 10-bit two's complement
    with pytest.raises(BoundViolation):
        cb.shl(np.array([3]), np.array([5]), 4, 20)  # shift beyond smax
    with pytest.raises(BoundViolation):
        cb.mul(np.array([1 << 20]), np.array([1 << 20]), 40)  # product 2^40 is not below 2^40
    assert int(cb.fit(np.array([-(1 << 9)]), 10)[0]) == -(1 << 9)



def test_inert_carry_bits_are_left_out_of_the_circuit():
    """The fp8 identify example: with e4m3 products (at most (15/8)^2 * 2^E each, converted exactly to fp16)
    a Hopper fp8 block of 16 plus its C stays below 2^(F + 6), so 5 carry bits never bind and the
    solver proves the two models equal at once, up to one whole instruction (K = 32)."""
    from tcsmt.solve.discriminate import discriminate

    o = discriminate(["hopper", "hopper:carry_bits=5"], "e4m3", "fp32", None, 32, 1, False, None, "auto", 30)
    assert o.status == "equivalent"


def test_carry_bits_that_can_bind_still_do():
    """4 carry bits do bind: 16 products (15/8)^2 sum to 56.25 * 2^E >= 2^(E + 5) (window F = 25)."""
    from conftest import dot1

    x = [Fraction(15, 8)] * 16
    assert dot1("hopper", x, x, 0, "e4m3", "fp32") == Fraction(225, 4)
    assert dot1("hopper:carry_bits=4", x, x, 0, "e4m3", "fp32") != Fraction(225, 4)
