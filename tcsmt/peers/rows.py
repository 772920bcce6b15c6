"""Seeded random and adversarial input rows (bit patterns) for comparing tcsmt with a peer model.

A row is one dot product: K elements of A (format ``fa``), K of B (``fb``), one C (``fc``) and, on a
block-scaled path, K / block scale factors of A and of B (``scale``).  The rows of one call are dealt in
equal shares to the kinds below (row i has kind i mod 10).  Six kinds are hwcheck's differential-test
distributions (:mod:`tcsmt.hwcheck.dists`: wide, narrow, cancel, subnormal, tiny, overflow); four are
drawn here:

zeros   "wide" rows with zeros put in: each A and B element is a signed zero with probability 0.3, C
        with 0.5 (no -0 in the fnuz formats, whose -0 pattern is NaN); a third of these rows hold only
        zero products (all -0 in half of them, C = -0 or +0): sums of zeros; another third hold one zero
        times a factor near the format's largest exponent next to small products: the zero-operand
        class of docs/open_questions.md.
spread  every exponent uniform over the format's whole range (subnormals included) for A, B and C:
        the largest exponent spreads.
ties    exponents in -6..2, fractions with their two leading bits only (C likewise, exponents -6..4):
        short exact sums, many of which lie halfway between two outputs (round-to-nearest ties).
carry   every A, B and C at exponent 0 with a fraction in the top eighth of [1, 2), all products and C of
        one sign: sums of 2^4 or more over the largest term's 2^0 (carry bits, class 4; seed 000's d = 8
        test is of this kind).

Scale factors (block-scaled paths): ue8m0 exponents in -8..8 (60 %), uniform over 2^-127..2^127
(39 %), NaN (1 %); ue4m3 values with exponents -3..3 (60 %), uniform over every pattern 0x00..0x7E
(zero and subnormals included, 35 %), zero (4 %), NaN (1 %); and in a row in ten every scale at the
bottom (ue8m0 2^-75..2^-60, two of which put products near fp32's subnormals; ue4m3 0 and its subnormals), in one in ten at
the top (ue8m0 2^117..2^127, ue4m3 256..448).  No A, B or C is NaN or infinite.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from tcsmt.arith.formats import Format, get_format
from tcsmt.hwcheck.dists import from_exponents, generate

KINDS = ("wide", "narrow", "cancel", "subnormal", "tiny", "overflow", "zeros", "spread", "ties", "carry")


@dataclass
class Rows:
    """n rows of bit patterns: a, b (n, K), c (n,), sa, sb (n, K / block) or None, kind (n,) indices into KINDS."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    sa: np.ndarray | None
    sb: np.ndarray | None
    kind: np.ndarray


def _zero(fmt: Format, neg: np.ndarray) -> np.ndarray:
    """Signed zero patterns (+0 where the format has no -0)."""
    sign = np.asarray(neg, bool) & fmt.has_negative_zero
    return fmt.pack_fields(sign, np.zeros(sign.shape, np.uint64), np.zeros(sign.shape, np.uint64))


def _uniform_exponents(fmt: Format, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    return rng.integers(fmt.emin - fmt.frac_bits, fmt.emax + 1, shape)


def _signs(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.random(shape) < 0.5


def _kind(name: str, fa: Format, fb: Format, fc: Format, n: int, K: int, rng: np.random.Generator
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if name in KINDS[:6]:
        spec = SimpleNamespace(fin=fa, fin_b=fb, c_fmt=fc, m=1, n=1, instr_k=K, has_c=True)
        a, b, c = generate(name, spec, n, K, rng)  # type: ignore[arg-type]
        return a.reshape(n, K), b.reshape(n, K), c.reshape(n)
    if name == "spread":
        return (from_exponents(fa, _uniform_exponents(fa, (n, K), rng), _signs(rng, (n, K)), rng),
                from_exponents(fb, _uniform_exponents(fb, (n, K), rng), _signs(rng, (n, K)), rng),
                from_exponents(fc, _uniform_exponents(fc, (n,), rng), _signs(rng, (n,)), rng))
    if name == "carry":
        neg = _signs(rng, (n,))
        out = []
        for fmt, shape, sign in ((fa, (n, K), neg[:, None]), (fb, (n, K), np.zeros((n, 1), bool)), (fc, (n,), neg)):
            f = fmt.frac_bits
            frac = (1 << f) - 1 - rng.integers(0, max(1, (1 << f) // 8), shape)
            out.append(fmt.pack_fields(np.broadcast_to(sign, shape), np.full(shape, fmt.bias, np.uint64),
                                       frac.astype(np.uint64)))
        return out[0], out[1], out[2]
    if name == "ties":
        out = []
        for fmt, shape, hi in ((fa, (n, K), 2), (fb, (n, K), 2), (fc, (n,), 4)):
            x = from_exponents(fmt, rng.integers(-6, hi + 1, shape), _signs(rng, shape), rng)
            low = max(0, fmt.frac_bits - 2)
            keep = ~np.array(((1 << low) - 1) << fmt.pad_bits, dtype=np.uint64)
            out.append((x.astype(np.uint64) & keep).astype(fmt.dtype))
        return out[0], out[1], out[2]
    # zeros
    a, b, c = _kind("wide", fa, fb, fc, n, K, rng)
    a = np.where(rng.random((n, K)) < 0.3, _zero(fa, _signs(rng, (n, K))), a)
    b = np.where(rng.random((n, K)) < 0.3, _zero(fb, _signs(rng, (n, K))), b)
    c = np.where(rng.random(n) < 0.5, _zero(fc, _signs(rng, (n,))), c)
    part = rng.integers(0, 3, n)
    all_neg = rng.random(n) < 0.5
    only_zero = (part == 1)[:, None]
    a = np.where(only_zero, _zero(fa, np.broadcast_to(all_neg[:, None], (n, K)) | _signs(rng, (n, K))), a)
    sign_b = np.array(1 << (fb.storage_bits - 1), dtype=np.uint64).astype(fb.dtype)
    b = np.where(only_zero & all_neg[:, None], b & ~sign_b, b)  # -0 * |b| = -0: every product -0
    c = np.where(part == 1, _zero(fc, all_neg | _signs(rng, (n,))), c)
    # one zero times a factor near B's largest exponent, the other products small
    big = part == 2
    small_a = from_exponents(fa, rng.integers(-8, 1, (n, K)), _signs(rng, (n, K)), rng)
    small_b = from_exponents(fb, rng.integers(-8, 1, (n, K)), _signs(rng, (n, K)), rng)
    k0 = rng.integers(0, K, n)
    at_k0 = np.arange(K)[None, :] == k0[:, None]
    huge_b = from_exponents(fb, fb.emax - rng.integers(0, 4, (n, K)), _signs(rng, (n, K)), rng)
    a = np.where(big[:, None], np.where(at_k0, _zero(fa, _signs(rng, (n, K))), small_a), a)
    b = np.where(big[:, None], np.where(at_k0, huge_b, small_b), b)
    return a, b, c


def _scales(fmt: Format, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    u = rng.random(shape)
    edge = rng.random(shape[0])[:, None]  # a row in ten has all its scales at the bottom, one in ten at the top
    if fmt.name == "ue8m0":
        near = rng.integers(-8, 9, shape) + fmt.bias
        anywhere = rng.integers(0, 255, shape)
        out = np.where(u < 0.6, near, np.where(u < 0.99, anywhere, 0xFF))
        low, high = rng.integers(52, 68, shape), rng.integers(244, 255, shape)  # 2^-75..2^-60: products near fp32's subnormals
    else:
        near = from_exponents(fmt, rng.integers(-3, 4, shape), np.zeros(shape, bool), rng).astype(np.int64)
        anywhere = rng.integers(0, 0x7F, shape)
        out = np.where(u < 0.6, near, np.where(u < 0.95, anywhere, np.where(u < 0.99, 0, 0x7F)))
        low, high = rng.integers(0, 9, shape), rng.integers(0x70, 0x7F, shape)
    return np.where(edge < 0.1, low, np.where(edge > 0.9, high, out)).astype(np.uint8)


def make_rows(fa: str, fb: str, fc: str, K: int, n: int, seed: int, scale: str = "", block: int = 0) -> Rows:
    """n rows for one path (formats by tcsmt name), the same for the same arguments."""
    fa_, fb_, fc_ = get_format(fa), get_format(fb), get_format(fc)
    rng = np.random.default_rng(seed)
    kind = np.arange(n) % len(KINDS)
    a = np.empty((n, K), fa_.dtype)
    b = np.empty((n, K), fb_.dtype)
    c = np.empty(n, fc_.dtype)
    for i, name in enumerate(KINDS):
        rows = np.flatnonzero(kind == i)
        if rows.size:
            a[rows], b[rows], c[rows] = _kind(name, fa_, fb_, fc_, rows.size, K, rng)
    sa = sb = None
    if scale:
        fs = get_format(scale)
        sa, sb = _scales(fs, (n, K // block), rng), _scales(fs, (n, K // block), rng)
    return Rows(a, b, c, sa, sb, kind)
