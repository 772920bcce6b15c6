"""Rows for ``tcsmt verify --compare`` built where two schemes part: a rounding decision of the accumulator.

Four families, all seeded (the same rows on every machine) and all checked only by exact replay (they pick
inputs, they compute no model output):

* **Midpoint rows** (:func:`midpoint_rows`): the exact sum A.B lies within a small fraction of an fp32 unit of a
  rounding midpoint.  A scheme that rounds many times (bf16x9's nine instructions, each rounding the accumulator)
  can round the wrong way there, pushed across the midpoint by intermediate errors far below a unit, while a
  scheme with fewer roundings, or whose dropped parts move its sum by less than the distance to the next midpoint,
  lands on the correctly rounded value: the first's error is then just above half a unit, the second's just below.
  Entries are cut to 8, 11, 16 or 24 significant bits (one bf16 piece, one fp16 / tf32 piece, two bf16 pieces,
  fp32), so that the narrow schemes' splits hold some of them exactly.
* **Tuned midpoint rows** (:func:`tuned_rows`): the first K - 1 products as in a midpoint row, and the last one
  chosen to put the exact sum next to a midpoint: with P the sum of the others, the aim s = P (half the rows) or
  P plus the last product as drawn, and u the fp32 unit at s, the target is a midpoint M = (floor(s / u) + 1/2 +
  h) u (h in -1, 0, 1); a_(K-1) is a value of a random width in a binade that leaves (M - P) / a_(K-1) in the
  domain, and b_(K-1) = fp32((M - P) / a_(K-1)) moved by -2..2 units.  Where the
  last product is as small as half a unit of P (entries of different binades: x and y below fp16's range beside
  a product on its grid), a scheme that drops it returns P's rounding, the correctly rounded value, while one
  that accumulates its pieces first can be carried across M.
* **Short tuned rows** (:func:`short_tuned_rows`): tuned rows whose first K - 1 entries are short values (1 to 3
  significant bits), half of them at the top of the domain.  Every scheme's first piece holds a short value
  exactly where that piece is normal on its model, so the schemes agree on P exactly, and the last product, half a
  unit of P, decides the rounding alone.  On a domain below fp16's normal range the random entries of the other
  families have fp16 heads that a flushing model (CDNA2) reads as zero, so Markidis's error there is |A.B| and no
  scheme can exceed it; at the top of such a domain (2^-14, fp16's smallest normal value) Markidis holds P and
  drops x y (its error |x y|, just below half a unit), while bf16x9 adds x_0 y_0, its head pieces' product, to P
  last: where x_0 y_0 and x y lie on either side of the midpoint, it rounds the other way (its error just above half
  a unit).
* **Factored rows** (:func:`factored_rows`): a_0 = u v, b_0 = w z, a_1 = u w, b_1 = -v z (integers u, v, w, z of
  4 to 12 bits times powers of two, signs chosen so that the two products cancel), and likewise for every further
  pair of k: A.B = 0 exactly while the two products' pieces differ, so the piece products do not cancel
  instruction by instruction.  A scheme whose intermediate accumulators round can end non-zero where one that
  reads its pieces as zero (a flushing model below 2^-14) or whose piece products cancel returns 0 exactly.
"""
from __future__ import annotations

import numpy as np

from tcsmt.verify.domain import Domain
from tcsmt.verify.evaluate import random_inputs

MAG = np.int64(0x7FFFFFFF)
SIGN = np.int64(0x80000000)
#: significant bits an entry of a midpoint row is cut to (24: fp32's own)
WIDTHS = (8, 11, 16, 24)


def clip(m: np.ndarray, dom: Domain) -> np.ndarray:
    """fp32 patterns with their magnitudes clipped into the domain (signs kept)."""
    mag = np.clip(m.astype(np.int64) & MAG, dom.lo_pattern, dom.hi_pattern)
    return ((m.astype(np.int64) & SIGN) | mag).astype(np.uint32)


def cut(x: np.ndarray, bits: np.ndarray | int) -> np.ndarray:
    """fp32 patterns with their significands cut to ``bits`` significant bits (1..24; trailing fraction bits
    cleared)."""
    drop = 24 - np.asarray(bits, dtype=np.int64)
    return (x.astype(np.int64) & ~((np.int64(1) << drop) - 1)).astype(np.uint32)


def midpoint_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row, |frac(|S| / u) - 1/2| for S = sum_k a_k b_k in fp64 and u the fp32 unit at S (2^-149 below the
    normal range): 0 at a rounding midpoint of fp32, 1/2 on the grid; 1 where S = 0.  A filter only (fp64 sums of
    exact fp64 products, the answer is checked exactly by replay)."""
    af, bf = a.view(np.float32).astype(np.float64), b.view(np.float32).astype(np.float64)
    s = np.abs((af * bf).sum(axis=1))
    with np.errstate(invalid="ignore", over="ignore"):
        _, ex = np.frexp(s)  # s = m 2^ex, 1/2 <= m < 1: the fp32 unit is 2^(ex - 24)
        units = np.ldexp(s, -np.maximum(ex - 24, -149))
        d = np.abs(units - np.floor(units) - 0.5)
    return np.where((s > 0) & np.isfinite(s), d, 1.0)


def midpoint_rows(rng: np.random.Generator, n: int, K: int, dom: Domain, pool: int = 16
                  ) -> tuple[np.ndarray, np.ndarray]:
    """n rows (module docstring): of ``pool`` x n log-uniform rows with every entry cut to a random width of
    WIDTHS, the n whose exact sum lies nearest to an fp32 rounding midpoint (:func:`midpoint_distance`)."""
    N = n * pool
    a, b = random_inputs(rng, N, K, dom, "loguniform")
    a = clip(cut(a, rng.choice(WIDTHS, (N, K))), dom)
    b = clip(cut(b, rng.choice(WIDTHS, (N, K))), dom)
    keep = np.argsort(midpoint_distance(a, b), kind="stable")[:n]
    return a[keep], b[keep]


def tuned_rows(rng: np.random.Generator, n: int, K: int, dom: Domain) -> tuple[np.ndarray, np.ndarray]:
    """n rows (module docstring, "tuned midpoint rows"); K = 1 gives no rows."""
    a, b = random_inputs(rng, n, K, dom, "loguniform")
    if K < 2:
        return a[:0], b[:0]
    a = clip(cut(a, rng.choice(WIDTHS, (n, K))), dom)
    b = clip(cut(b, rng.choice(WIDTHS, (n, K))), dom)
    return _tune_last(rng, a, b, dom)


def short_tuned_rows(rng: np.random.Generator, n: int, K: int, dom: Domain) -> tuple[np.ndarray, np.ndarray]:
    """n rows (module docstring, "short tuned rows"): the first K - 1 entries of a and b short values (1 to 3
    significant bits, random signs), in the domain's top binade (clipped to HI) with probability 1/2, else in a
    random binade of the domain; the last product tuned as in :func:`tuned_rows`.  K = 1 gives no rows."""
    a, b = random_inputs(rng, n, K, dom, "loguniform")
    if K < 2:
        return a[:0], b[:0]
    a = clip(cut(a, rng.choice(WIDTHS, (n, K))), dom)
    b = clip(cut(b, rng.choice(WIDTHS, (n, K))), dom)
    lo_e, hi_e = dom.exp_range
    a, b = a.astype(np.int64), b.astype(np.int64)
    for m in (a, b):
        shape = (n, K - 1)
        e = np.where(rng.random(shape) < 0.5, hi_e, rng.integers(lo_e, hi_e + 1, shape))
        frac = rng.integers(0, 4, shape) << 21  # 1 to 3 significant bits
        sign = rng.integers(0, 2, shape).astype(np.int64) << 31
        m[:, :-1] = sign | ((np.maximum(e, -126) + 127) << 23) | frac
    return _tune_last(rng, clip(a, dom), clip(b, dom), dom)


def _tune_last(rng: np.random.Generator, a: np.ndarray, b: np.ndarray, dom: Domain) -> tuple[np.ndarray, np.ndarray]:
    """The rows with their last product tuned next to a midpoint of the other products' sum (module docstring,
    "tuned midpoint rows")."""
    n = len(a)
    af, bf = a.view(np.float32).astype(np.float64), b.view(np.float32).astype(np.float64)
    p = (af[:, :-1] * bf[:, :-1]).sum(axis=1)
    lo_e, hi_e = dom.exp_range
    with np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
        # half the rows aim at a midpoint next to P, half next to P plus the last product as drawn
        s = p + np.where(rng.random(n) < 0.5, 0.0, af[:, -1] * bf[:, -1])
        _, ex = np.frexp(np.abs(s))
        unit = np.ldexp(1.0, np.maximum(ex - 24, -149))  # the fp32 unit at the aim
        t = (np.floor(s / unit) + 0.5 + rng.integers(-1, 2, n)) * unit - p
        # a_(K-1) in a binade that leaves t / a_(K-1) in the domain where one does
        lt = np.floor(np.log2(np.where(t != 0, np.abs(t), 1.0))).astype(np.int64)
        lo_a, hi_a = np.maximum(lo_e, lt - hi_e), np.minimum(hi_e, lt - lo_e)
        ea = np.where(lo_a <= hi_a, lo_a + np.floor(rng.random(n) * (hi_a - lo_a + 1)).astype(np.int64), lo_e)
        x = np.ldexp(1.0 + rng.random(n), ea)
        a_last = cut(np.asarray(x, dtype=np.float32).view(np.uint32), rng.choice(WIDTHS, n))
        y = np.abs(t) / a_last.view(np.float32).astype(np.float64)
        b_last = np.asarray(y, dtype=np.float32).view(np.uint32).astype(np.int64) + rng.integers(-2, 3, n)
    a = a.astype(np.int64)
    b = b.astype(np.int64)
    a[:, -1] = a_last.astype(np.int64) | (a[:, -1] & SIGN)
    b[:, -1] = np.where(np.isfinite(y) & (t != 0), b_last, b[:, -1]) & MAG
    b[:, -1] |= np.where((t < 0) != (a[:, -1] >= SIGN), SIGN, 0)  # the sign of t over a_(K-1)'s
    return clip(a, dom), clip(b, dom)


def factored_rows(rng: np.random.Generator, n: int, K: int, dom: Domain) -> tuple[np.ndarray, np.ndarray]:
    """n rows (module docstring): for each pair (k, k + 1) = (2m, 2m + 1), a_k = s u v 2^p, b_k = w z 2^q,
    a_(k+1) = t u w 2^r, b_(k+1) = -s t v z 2^(p + q - r) with u, v, w, z integers in [2^(bits - 1), 2^bits)
    (bits from 4 to 12, one per row), signs s, t and the exponents p, q, r placing a_k, b_k, a_(k+1) in random binades
    of the domain: a_k b_k + a_(k+1) b_(k+1) = 0 exactly where b_(k+1) lies in the domain too (entries outside are
    clipped into it, and that pair no longer cancels).  A last k of odd K keeps a log-uniform entry; K = 1 gives
    no rows."""
    a, b = random_inputs(rng, n, K, dom, "loguniform")
    if K < 2:
        return a[:0], b[:0]
    a, b = a.astype(np.int64), b.astype(np.int64)
    lo_e, hi_e = dom.exp_range
    bits = rng.integers(4, 13, n)
    for k in range(0, K - 1, 2):
        u, v, w, z = (rng.integers(np.int64(1) << (bits - 1), np.int64(1) << bits).astype(np.float64)
                      for _ in range(4))

        def place(m: np.ndarray) -> np.ndarray:  # an exponent putting m 2^e in a random binade of the domain
            return rng.integers(lo_e, hi_e + 1, n) - np.floor(np.log2(m)).astype(np.int64)

        p, q, r = place(u * v), place(w * z), place(u * w)
        s, t = rng.choice([-1.0, 1.0], n), rng.choice([-1.0, 1.0], n)
        with np.errstate(over="ignore", under="ignore"):
            vals = [s * np.ldexp(u * v, p), np.ldexp(w * z, q), t * np.ldexp(u * w, r),
                    -s * t * np.ldexp(v * z, p + q - r)]
        pats = [np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.int64) for x in vals]
        a[:, k], b[:, k], a[:, k + 1], b[:, k + 1] = pats
    return clip(a, dom), clip(b, dom)
