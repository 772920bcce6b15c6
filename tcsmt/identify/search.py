"""Simulator-side search for separating inputs, the fallback when a solver query runs out of time.

Random inputs are drawn from shapes that exercise the block-FMA features
(products of nearby exponents so that alignment, carries and cancellation
matter; C of the products' size and of the opposite sign; occasional
subnormals), simulated under two hypotheses in one vectorised call each, and
the rows where they differ are returned.  The identification loop marks
experiments found this way as ``random`` rather than ``solver``.
"""
from __future__ import annotations

import numpy as np

from tcsmt.arith.formats import Format, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.sim.simulator import simulate_params


def _patterns(fmt: Format, neg: np.ndarray, e: np.ndarray, frac: np.ndarray) -> np.ndarray:
    """Bit patterns of (-1)^neg * (1.frac) * 2^e, clamped into the finite range (subnormal below emin)."""
    e = np.clip(e, fmt.emin - fmt.frac_bits, fmt.emax)
    frac = frac & ((1 << fmt.frac_bits) - 1)
    normal = e >= fmt.emin
    expf = np.where(normal, e + fmt.bias, 0)
    # below emin: a subnormal with the leading bit at 2^e
    sub_frac = np.where(normal, frac, (1 << fmt.frac_bits) >> np.clip(fmt.emin - e, 0, fmt.frac_bits))
    f = np.where(normal, frac, sub_frac)
    if fmt.specials == "fn":  # e4m3: the top pattern S.1111.111 is NaN
        top = (expf == (1 << fmt.exp_bits) - 1) & (f == (1 << fmt.frac_bits) - 1)
        f = np.where(top, f - 1, f)
    return fmt.pack_fields(neg, expf, f)


def random_rows(in_fmt: str, c_fmt: str, K: int, n: int, rng: np.random.Generator
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` random one-instruction inputs (a (n, K), b (n, K), c (n,)) of feature-test shapes."""
    fin, fc = get_format(in_fmt), get_format(c_fmt)
    centre = rng.integers(fin.emin // 2, fin.emax // 2 + 1, size=(n, 1))
    spread = rng.choice([0, 1, 3, 8, 30], size=(n, 1))
    ea = centre + rng.integers(-spread, spread + 1, size=(n, K))
    eb = rng.integers(-2, 3, size=(n, K)) + rng.choice([0, 0, 0, fin.emin], size=(n, 1))
    fa = rng.integers(0, 1 << fin.frac_bits, size=(n, K))
    fb = np.where(rng.random((n, K)) < 0.5, 0, rng.integers(0, 1 << fin.frac_bits, size=(n, K)))
    # a third of the rows have products of one sign and large significands (carry-out tests)
    same = rng.random((n, 1)) < 0.35
    na = (rng.random((n, K)) < 0.5) & ~same
    nb = (rng.random((n, K)) < 0.3) & ~same
    fa = np.where(same & (rng.random((n, 1)) < 0.5), (1 << fin.frac_bits) - 1, fa)
    live = rng.integers(1, K + 1, size=(n, 1))
    keep = np.arange(K)[None, :] < live
    a = np.where(keep, _patterns(fin, na, ea, fa), 0).astype(fin.dtype)
    b = np.where(keep, _patterns(fin, nb, eb, fb), 0).astype(fin.dtype)
    # C near the largest product, often of the opposite sign
    ec = (ea + eb).max(axis=1) + rng.integers(-3, 4, size=n) + rng.choice([0, 0, 0, -30], size=n)
    fcr = rng.integers(0, 1 << fc.frac_bits, size=n)
    nc = rng.random(n) < 0.6
    c = _patterns(fc, nc, ec, fcr)
    c = np.where(rng.random(n) < 0.1, 0, c).astype(fc.dtype)
    return a, b, c


def random_separating(p1: ModelParams, p2: ModelParams, K: int, rng: np.random.Generator,
                      n: int = 4096, rounds: int = 3, want: int = 3) -> list[tuple[list[int], list[int], int]]:
    """Up to ``want`` random inputs on which ``p1`` and ``p2`` give different outputs (fewest products first)."""
    found: list[tuple[list[int], list[int], int]] = []
    for _ in range(rounds):
        a, b, c = random_rows(p1.in_fmt, p1.c_fmt, K, n, rng)
        d1 = np.asarray(simulate_params(p1, a, b, c))
        d2 = np.asarray(simulate_params(p2, a, b, c))
        idx = np.nonzero(d1 != d2)[0]
        if idx.size:
            nz = (a[idx] != 0).sum(axis=1)
            for i in idx[np.argsort(nz, kind="stable")][:want - len(found)]:
                found.append(([int(x) for x in a[i]], [int(x) for x in b[i]], int(c[i])))
        if len(found) >= want:
            break
    return found
