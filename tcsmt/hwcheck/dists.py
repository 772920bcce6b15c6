"""Random input distributions for differential testing (tiles of bit patterns).

Each generator returns ``(a, b, c)`` tiles for a path: a (T, m, K) and
b (T, n, K) in the input format, c (T, m, n) in the output format.  Values are
drawn by exponent: an element with leading-bit exponent ``e`` is a normal
number ``2^e * 1.f`` with a uniformly random fraction ``f`` (or a subnormal
whose leading bit is at ``e`` when ``e < emin``); NaN/Inf patterns are never
drawn.  The distributions:

wide       exponents of A and B spread over +-S (S = 12, less for narrow
           formats), random signs, C's exponent within +-24 of the products'
           scale (one C in 8 is zero): alignment shifts of all sizes.
narrow     exponents in {-1, 0, 1}, every A, B and C positive, C of the size of
           the sum: carries out of the top of the adder.
cancel     exponents in -3..3, random signs; in half of the tiles the second
           half of every instruction's products repeats the first half with A
           negated (one B in four nudged by one unit in the last place), and C
           is -(the sum of the products) rounded to C's format and moved by up
           to 2 units in the last place: massive cancellation.
subnormal  in half of the tiles, half of the A/B elements lie at the input
           format's subnormal boundary (exponents emin-f .. emin+2); in the
           other half the products are steered to C's subnormal boundary and
           C is drawn there (exponents emin-f .. emin+2 of C's format).
tiny       every addend below C's smallest normal number: products steered to
           exponents P = emin-f-4 .. emin-9 of C's format (a tile's factors
           within +-3 of their share of P), C's exponent within -6..+3 of P (one
           C in 8 is zero): sums that
           stay in the accumulator's subnormal range, where an exponent floor
           of the alignment shows (reachable only where the input format's
           products get there: bf16, tf32 and fp64 inputs).
overflow   products steered to C's largest exponents (as close as the input
           format allows), C within a factor 4 of C's largest finite value,
           random signs: overflow, saturation and inf handling.
"""
from __future__ import annotations

import numpy as np

from tcsmt.arith.formats import Format
from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.paths import PathSpec

DISTRIBUTIONS = ("wide", "narrow", "cancel", "subnormal", "overflow", "tiny")


def from_exponents(fmt: Format, e: np.ndarray, neg: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Patterns with leading-bit exponent ``e`` (clipped to the format's range) and sign ``neg``.

    Normal results get a uniformly random fraction; subnormal ones (e < emin)
    a random tail below their leading bit.  The largest exponent of an "fn"
    format never yields the NaN pattern.
    """
    f = fmt.frac_bits
    e = np.clip(np.asarray(e, dtype=np.int64), fmt.emin - f, fmt.emax)
    shape = e.shape
    frac = rng.integers(0, 1 << f, size=shape, dtype=np.uint64)
    normal = e >= fmt.emin
    expf = np.where(normal, e + fmt.bias, 0).astype(np.uint64)
    if fmt.specials == "fn":
        top = normal & (expf == (1 << fmt.exp_bits) - 1)
        frac = np.where(top & (frac == (1 << f) - 1), frac - np.uint64(1), frac)
    lead = np.where(normal, 0, e - (fmt.emin - f)).astype(np.uint64)   # bit position of a subnormal's leading 1
    sub_frac = (np.uint64(1) << lead) | (frac & ((np.uint64(1) << lead) - np.uint64(1)))
    frac = np.where(normal, frac, sub_frac)
    return fmt.pack_fields(np.asarray(neg, dtype=bool), expf, frac)


def _signs(rng, shape, p_neg: float = 0.5) -> np.ndarray:
    return rng.random(shape) < p_neg


def _steered(fin: Format, P: np.ndarray, sa: tuple, sb: tuple, rng: np.random.Generator, jitter: int,
             fin_b: Format | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A and B tiles whose products have exponents near P (shape (T, 1, 1)).

    For every tile and k an exponent split alpha + (P - alpha) is drawn inside
    the input formats' ranges (A in ``fin``, B in ``fin_b``, default ``fin``);
    A's elements get alpha and B's P - alpha, each moved by up to ``jitter``,
    with random signs (clipped where P is out of reach).
    """
    fb = fin_b or fin
    lo, hi = fin.emin - fin.frac_bits, fin.emax
    lo_b, hi_b = fb.emin - fb.frac_bits, fb.emax
    T, _, K = sa
    Pk = np.broadcast_to(P, (T, 1, K))
    al_lo = np.clip(np.maximum(Pk - hi_b, lo), lo, hi)
    al_hi = np.clip(np.minimum(Pk - lo_b, hi), lo, hi)
    al_hi = np.maximum(al_hi, al_lo)
    alpha = rng.integers(0, 1 << 30, size=(T, 1, K)) % (al_hi - al_lo + 1) + al_lo
    ea = np.broadcast_to(alpha, sa) + rng.integers(-jitter, jitter + 1, sa)
    eb = np.broadcast_to(Pk - alpha, sb) + rng.integers(-jitter, jitter + 1, sb)
    return (from_exponents(fin, ea, _signs(rng, sa), rng), from_exponents(fb, eb, _signs(rng, sb), rng))


def _values(fmt: Format, bits: np.ndarray) -> np.ndarray:
    return fmt.decode_array(bits)


def generate(dist: str, spec: PathSpec, T: int, K: int, rng: np.random.Generator
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tiles (a, b, c) of distribution ``dist`` for ``spec`` with T tiles of length K.

    On a path without C (library GEMMs) every C is +0; A and B are drawn as
    for any other path, so ``cancel`` cancels among the products alone.
    """
    if dist not in DISTRIBUTIONS:
        raise TcsmtError(f"unknown distribution {dist!r} (known: {', '.join(DISTRIBUTIONS)}, all)")
    a, b, c = _generate(dist, spec, T, K, rng)
    return a, b, (c if spec.has_c else np.zeros_like(c))


def _generate(dist: str, spec: PathSpec, T: int, K: int, rng: np.random.Generator
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    fin, fb, fc = spec.fin, spec.fin_b, spec.c_fmt  # A's, B's and C's formats
    m, n = spec.m, spec.n
    sa, sb, sc = (T, m, K), (T, n, K), (T, m, n)
    logk = max(1, int(np.ceil(np.log2(K))))
    if dist == "wide":
        S = max(2, min(12, (fin.emax - fin.emin) // 2))
        a = from_exponents(fin, rng.integers(-S, S + 1, sa), _signs(rng, sa), rng)
        Sb = max(2, min(12, (fb.emax - fb.emin) // 2))
        b = from_exponents(fb, rng.integers(-Sb, Sb + 1, sb), _signs(rng, sb), rng)
        c = from_exponents(fc, rng.integers(-24, 25, sc) + rng.integers(0, S + 1, sc), _signs(rng, sc), rng)
        c = np.where(rng.random(sc) < 0.125, np.zeros_like(c), c)
        return a, b, c
    if dist == "narrow":
        a = from_exponents(fin, rng.integers(-1, 2, sa), np.zeros(sa, bool), rng)
        b = from_exponents(fb, rng.integers(-1, 2, sb), np.zeros(sb, bool), rng)
        c = from_exponents(fc, logk + rng.integers(-2, 3, sc), np.zeros(sc, bool), rng)
        return a, b, c
    if dist == "cancel":
        a = from_exponents(fin, rng.integers(-3, 4, sa), _signs(rng, sa), rng)
        b = from_exponents(fb, rng.integers(-3, 4, sb), _signs(rng, sb), rng)
        ik = spec.instr_k
        h = ik // 2
        paired = rng.random(T) < 0.5
        sign_bit = np.array(1 << (fin.storage_bits - 1), dtype=np.uint64).astype(fin.dtype)
        step = np.array(1 << fb.pad_bits, dtype=np.uint64).astype(fb.dtype)
        for k0 in range(0, K, ik):
            lo, hi = slice(k0, k0 + h), slice(k0 + h, k0 + 2 * h)
            a[paired, :, hi] = a[paired, :, lo] ^ sign_bit
            nb = b[paired, :, lo].copy()
            nudge = rng.random(nb.shape) < 0.25
            # one ulp up in magnitude, never past the largest finite pattern (exponents <= 3 keep wide formats far
            # below it; e2m1's largest exponent is 2, where one more ulp would leave the format)
            top = int(fb.from_fraction(fb.max_finite)) & ((1 << (fb.storage_bits - 1)) - 1)
            nudge &= (nb.astype(np.int64) & ((1 << (fb.storage_bits - 1)) - 1)) < top
            nb = np.where(nudge, nb + step, nb)
            b[paired, :, hi] = nb
        s = np.einsum("trk,tjk->trj", _values(fin, a), _values(fb, b))
        c = _round_to(fc, -s)
        mag_mask = np.array((1 << (fc.storage_bits - 1)) - 1, dtype=np.uint64).astype(fc.dtype)
        delta = rng.integers(-2, 3, sc)
        mag = (c & mag_mask).astype(np.int64)
        ok = (mag >= 3) & (mag < int(mag_mask) - (1 << (fc.frac_bits + 1)))
        c = np.where(ok, (c.astype(np.int64) + delta).astype(fc.dtype), c)
        return a, b, c
    if dist == "subnormal":
        half = rng.random(T) < 0.5
        # (1) input subnormals mixed with ordinary values
        e_in = lambda f, shp: np.where(rng.random(shp) < 0.5,  # noqa: E731
                                       rng.integers(f.emin - f.frac_bits, f.emin + 3, shp),
                                       rng.integers(-3, 4, shp))
        a1 = from_exponents(fin, e_in(fin, sa), _signs(rng, sa), rng)
        b1 = from_exponents(fb, e_in(fb, sb), _signs(rng, sb), rng)
        c1 = from_exponents(fc, rng.integers(2 * fin.emin - 4, 4, sc), _signs(rng, sc), rng)
        # (2) products and C at C's subnormal boundary
        P = rng.integers(fc.emin - fc.frac_bits, fc.emin + 3, (T, 1, 1))
        a2, b2 = _steered(fin, P, sa, sb, rng, 2, fb)
        c2 = from_exponents(fc, rng.integers(fc.emin - fc.frac_bits, fc.emin + 3, sc), _signs(rng, sc), rng)
        first = half.reshape(T, 1, 1)
        return np.where(first, a1, a2), np.where(first, b1, b2), np.where(first, c1, c2)
    if dist == "tiny":
        P = rng.integers(fc.emin - fc.frac_bits - 4, fc.emin - 8, (T, 1, 1))
        a, b = _steered(fin, P, sa, sb, rng, 3, fb)
        c = from_exponents(fc, P.reshape(T, 1, 1) + rng.integers(-6, 4, sc), _signs(rng, sc), rng)
        c = np.where(rng.random(sc) < 0.125, np.zeros_like(c), c)
        return a, b, c
    # overflow
    P = rng.integers(fc.emax - 2, fc.emax + 1, (T, 1, 1))
    a, b = _steered(fin, P, sa, sb, rng, 1, fb)
    c = from_exponents(fc, rng.integers(fc.emax - 1, fc.emax + 1, sc), _signs(rng, sc), rng)
    return a, b, c


def _round_to(fmt: Format, v: np.ndarray) -> np.ndarray:
    """Patterns of float64 values rounded to nearest-even in ``fmt`` (fp16, fp32 or fp64)."""
    if fmt.name == "fp64":
        return np.ascontiguousarray(v, dtype=np.float64).view(np.uint64)
    if fmt.name == "fp32":
        with np.errstate(over="ignore"):
            return np.ascontiguousarray(v.astype(np.float32)).view(np.uint32)
    if fmt.name == "fp16":
        with np.errstate(over="ignore"):
            return np.ascontiguousarray(v.astype(np.float16)).view(np.uint16)
    raise TcsmtError(f"C in {fmt.name} is not supported by the cancel distribution")


def random_scales(spec: PathSpec, T: int, K: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Scale tiles of a block-scaled path for random checks: scale_A (T, m, K / scale_block) and scale_B
    (T, n, K / scale_block) patterns, every factor drawn on its own.  ue8m0: mostly 2^-8 .. 2^8 (so scaled sums
    stay in fp32's range and keep their low bits), one factor in 16 anywhere in 2^-127 .. 2^127; ue4m3: any
    pattern but NaN (0x7F), zero and the subnormals included.  Without scale_fmt: TcsmtError."""
    from tcsmt.arith.formats import get_format

    if not spec.scale_fmt:
        raise TcsmtError(f"{spec.label} is not block-scaled")
    fs = get_format(spec.scale_fmt)
    nb = K // spec.scale_block
    out = []
    for rows in (spec.m, spec.n):
        shape = (T, rows, nb)
        if fs.name == "ue8m0":
            near = rng.integers(127 - 8, 127 + 9, size=shape)
            anywhere = rng.integers(0, 255, size=shape)
            out.append(np.where(rng.random(shape) < 1 / 16, anywhere, near).astype(np.uint8))
        else:
            out.append(rng.integers(0, 0x7F, size=shape).astype(np.uint8))
    return out[0], out[1]

