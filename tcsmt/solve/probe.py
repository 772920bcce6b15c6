"""The simulator probe of ``tcsmt discriminate``: fixed rows on which two or more models are run before the solver
is asked (:func:`tcsmt.solve.discriminate.discriminate`).

Rows with every product equal reach what a random row almost never does, such as a block sum that needs a carry
bit beyond the model's (every addend at the largest exponent: hopper vs hopper:carry_bits=4 on e4m3 -> fp32 at
K = 32, which bit-blasting took 64 s to find).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from tcsmt.arith.formats import INF, NAN, Format, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.errors import TcsmtError
from tcsmt.sim.simulator import simulate_params

#: significands of the probe's equal-product rows: the format's largest, 1.5 and 1 (times 2^e)
PROBE_SIGNIFICANDS = ("max", Fraction(3, 2), Fraction(1))
#: the probe's random rows (seeded: the same rows on every run)
PROBE_RANDOM = 2048


def _probe_values(fmt: Format) -> list[int]:
    """Positive patterns m 2^e of ``fmt`` for m in PROBE_SIGNIFICANDS, at up to 24 exponents spread over its
    normal range (every exponent of a narrow format)."""
    step = max(1, -(-(fmt.emax - fmt.emin + 1) // 24))
    out = []
    for e in range(fmt.emin, fmt.emax + 1, step):
        for m in PROBE_SIGNIFICANDS:
            sig = (2 - Fraction(1, 1 << fmt.frac_bits)) if m == "max" else Fraction(m)
            try:
                out.append(fmt.from_fraction(sig * Fraction(2) ** e))
            except TcsmtError:  # past the format's largest finite value
                continue
    return sorted(set(out))


def _random_finite(rng: np.random.Generator, fmt: Format, shape: tuple[int, ...]) -> np.ndarray:
    """Random finite patterns of ``fmt`` (uniform over the patterns; non-finite ones replaced by +0)."""
    x = rng.integers(0, 1 << fmt.storage_bits, size=shape, dtype=np.uint64)
    if fmt.pad_bits:
        x &= ~np.uint64((1 << fmt.pad_bits) - 1)
    x = x.astype(fmt.dtype)
    cls = fmt.classify(x)
    return np.where((cls == NAN) | (cls == INF), np.zeros_like(x), x)


def probe_row(params: list[ModelParams], K: int, c_zero: bool, seed: int = 0) -> tuple[list[int], list[int], int] | None:
    """A discriminating input from a fixed set of rows, by the simulator (no solver): every row with all
    products equal, a = [x]*K, b = [y]*K, C = +0, for x and y in :func:`_probe_values` (y of either sign),
    then PROBE_RANDOM random rows of finite patterns (seed ``seed``; C = +0 on a path that takes none).
    The first row (a, b, c patterns) on which the models' outputs differ, or None; the solver is still asked
    where the probe finds nothing."""
    p0 = params[0]
    fa, fb, fc = get_format(p0.in_fmt), get_format(p0.b_format), get_format(p0.c_fmt)
    xa, xb = _probe_values(fa), _probe_values(fb)
    neg_b = 1 << (fb.storage_bits - 1)
    ys = xb + [y | neg_b for y in xb]
    ea = np.repeat(np.array(xa, dtype=np.uint64), len(ys))
    eb = np.tile(np.array(ys, dtype=np.uint64), len(xa))
    rng = np.random.default_rng(seed)
    ra, rb = _random_finite(rng, fa, (PROBE_RANDOM, K)), _random_finite(rng, fb, (PROBE_RANDOM, K))
    rc = np.zeros(PROBE_RANDOM, dtype=fc.dtype) if c_zero else _random_finite(rng, fc, (PROBE_RANDOM,))
    a = np.concatenate([np.repeat(ea[:, None], K, axis=1).astype(fa.dtype), ra])
    b = np.concatenate([np.repeat(eb[:, None], K, axis=1).astype(fb.dtype), rb])
    c = np.concatenate([np.zeros(len(ea), dtype=fc.dtype), rc])
    outs = [simulate_params(p, a, b, c) for p in params]
    differ = np.zeros(len(c), dtype=bool)
    for o in outs[1:]:
        differ |= o != outs[0]
    if not differ.any():
        return None
    i = int(np.argmax(differ))
    return [int(x) for x in a[i]], [int(x) for x in b[i]], int(c[i])
