"""fp32 matrix products emulated with fp16 (and bf16 / tf32) tensor cores, written once for both back ends.

Every function here takes a back end ``B`` (numpy simulator or SMT) and fp32
bit patterns, and builds the scheme out of :mod:`tcsmt.arith.semantics` operations
only, so the simulator and the SMT encoding compute the same thing.

Notation: ``x`` is an fp32 value, ``fp16(.)`` round-to-nearest-even conversion
to binary16 (subnormals kept, overflow to inf), ``RN32`` an IEEE binary32
operation rounded to nearest even, ``TC(X.Y + C)`` one tensor-core instruction
of the architecture model ``p`` (``semantics.dot`` on at most ``p.instr_k``
products: the model's blocks, alignment, truncation and carry bits; a shorter
last k-block is padded with zero products, as a kernel pads a partial tile).
The k dimension is cut into k-blocks of ``p.instr_k`` products.

Splits (exact arithmetic; the only roundings are the two fp16 conversions):

* ``x_h = fp16(x)``; the residual ``x - x_h`` is exact in fp32 (both are
  multiples of x's fp32 unit in the last place and ``|x - x_h| <= |x|``).
* Markidis: ``r_x = fp16(x - x_h)`` (no scaling: underflows for small x).
* Ootomo-Yokota: ``dx = fp16(2^11 (x - x_h))``; the product by 2^11 is exact in
  fp32, so this is one rounding of the exact scaled residual.

Schemes, for vectors a, b of length K (one entry of C = A.B):

* Markidis (``markidis``): one fp32 accumulator ``acc = +0`` inside the tensor
  cores; for each k-block, in this order, ``acc = TC(A_h.B_h + acc)``,
  ``acc = TC(A_h.R_B + acc)``, ``acc = TC(R_A.B_h + acc)`` (and
  ``acc = TC(R_A.R_B + acc)`` for ``markidis-full``).  D = acc.
* Ootomo-Yokota (``ootomo``): for each k-block ``tmp = TC(A_h.B_h + 0)``,
  ``D_main = RN32(D_main + tmp)`` on ordinary cores; the correction
  accumulates in the tensor cores: ``D_corr = TC(dA.B_h + D_corr)``,
  ``D_corr = TC(A_h.dB + D_corr)``; dA.dB is dropped.  Finally
  ``D = RN32(D_main + D_corr * 2^-11)`` with one rounding (what
  ``fma(D_corr, 2^-11, D_main)`` computes; a separate scaling would round only
  when D_corr * 2^-11 is below fp32's normal range).
* fp32 SIMT (``fp32``): sequential IEEE fp32 FMAs ``d = fma(a_k, b_k, d)``
  from d = +0 (the registry's ``ieee-fma32`` reference).

Vendor schemes (:func:`piece_scheme`, on the architecture's bf16 -> fp32 or
tf32 -> fp32 tensor-core path): each x is cut into n pieces of the narrow
format, x_0 = fmt(x), x_i = fmt(x - x_0 - ... - x_{i-1}) (RNE, every residual
exact in fp32: :func:`pieces`), and the chosen piece products A_i.B_j are
accumulated in one tensor-core accumulator from +0, k-block by k-block, in a
stated pair order (:func:`piece_pairs`):

* ``bf16x9``: three bf16 pieces, all nine products, least significant first
  (i + j = 4, 3, ..., 0); ``bf16x9-large-first`` the reverse.  cuBLAS exposes
  FP32 emulation with three bf16 pieces as the compute type
  ``CUBLAS_COMPUTE_32F_EMULATED_16BFX9`` (CUDA 12.9+, Blackwell; NVIDIA
  technical blog "Boosting Matrix Multiplication Speed and Flexibility with
  NVIDIA cuBLAS 12.9", and "Unlocking Tensor Core Performance with Floating
  Point Emulation in cuBLAS", Brower, Gunnels, Lopez, 2025).  Neither states
  the splitting rounding nor the order of the nine products: both are
  assumptions here (RNE splits; the order is the scheme's name).
* ``bf16x3``: two bf16 pieces, products x_0 y_0, x_0 y_1, x_1 y_0 in that
  order (the split XNNPACK describes for its fp32-via-bf16 dots, PR #9444:
  a_bf16 b_bf16 + a_bf16 b_res + a_res b_bf16, the residual product dropped).
* ``tf32x3``: the same with tf32 pieces (CUTLASS's "3xTF32" fast-accurate
  SGEMM); ``tf32x3-small-first`` accumulates x_1 y_0, x_0 y_1, then x_0 y_0.
  The order of the big and small products in vendor kernels is not stated in
  the sources at hand: it is a parameter.

NaN and infinities propagate as IEEE arithmetic would (an fp32 input beyond
fp16's range gives x_h = inf and a residual of -inf or NaN).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import Format, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.arith.registry import reference_params
from tcsmt.errors import TcsmtError

V = Any  # a back-end value
FP16: Format = get_format("fp16")
FP32: Format = get_format("fp32")
OOTOMO_SCALE_LOG2 = 11

#: exact-sum helper parameters: with F = None the semantics only read subnormal_out from it
_EXACT = reference_params("exact", "fp32", "fp32")
_FMA32 = reference_params("ieee-fma32", "fp32", "fp32")
#: F = 48 fraction bits of alignment window for two-addend RN32 additions (see rn32_sum)
_ADD_WINDOW = 48

ALGOS = ("markidis", "markidis-full", "ootomo", "fp32", "bf16x9", "bf16x9-large-first", "bf16x3", "tf32x3",
         "tf32x3-small-first")


def check_path(p: ModelParams, in_fmt: str = "fp16") -> None:
    """The schemes need an ``in_fmt`` -> fp32 tensor-core path with fp32 C and accumulator."""
    if (p.in_fmt, p.out_fmt, p.c_fmt, p.acc_fmt) != (in_fmt, "fp32", "fp32", "fp32"):
        raise TcsmtError(f"model {p.name} is not an {in_fmt} -> fp32 path with an fp32 accumulator "
                         f"(it is {p.in_fmt} -> {p.out_fmt}, C {p.c_fmt}, accumulator {p.acc_fmt})")


def scale(B, t: sem.Term, s: int) -> sem.Term:
    """The addend t * 2^s (exact: only the exponents move)."""
    return dataclasses.replace(t, lsb=B.add(t.lsb, s), top=B.add(t.top, s), lsb_min=t.lsb_min + s,
                               lsb_max=t.lsb_max + s, top_min=t.top_min + s, top_max=t.top_max + s)


def residual_parts(B, x: V, fmt: Format = FP16) -> tuple[V, sem.Decoded, sem.Decoded, V, V]:
    """(x_h pattern, decoded x, decoded x_h, diff, lsb) with |x| = |x_h| + diff * 2^lsb exactly.

    x_h = fmt(x) (round to nearest even; fp16 by default, or bf16 / tf32 for the vendor schemes)
    has x's sign; lsb = e(x) - 23.  Both are multiples of 2^lsb (x_h is coarser: ``fmt`` has at most
    fp32's precision and no smaller exponent range below x's binade) and |x_h| <= 2^(e(x)+1), so
    |x_h| / 2^lsb < 2^25 and the signed difference ``diff`` is an integer with |diff| < 2^25.
    """
    dx = sem.decode(B, FP32, x)
    hi = sem.convert(B, x, FP32, fmt, "rne")
    dh = sem.decode(B, fmt, hi)
    lsb = B.sub(dx.e, FP32.frac_bits)
    shift = B.sub(B.sub(dh.e, fmt.frac_bits), lsb)
    hv = B.shl(dh.sig, B.min(B.max(shift, 0), 25), 25, fmt.frac_bits + 26)
    diff = B.fit(B.sub(dx.sig, hv), 27)
    return hi, dx, dh, diff, lsb


def residual(B, x: V, fmt: Format = FP16) -> tuple[V, sem.Decoded, V, V, V]:
    """(x_h pattern, decoded x, neg, mag, lsb): x - x_h = (-1)^neg * mag * 2^lsb exactly (see residual_parts)."""
    hi, dx, _, diff, lsb = residual_parts(B, x, fmt)
    below = B.lt(diff, 0)
    mag = B.fit(B.ite(below, B.neg(diff), diff), 26)
    neg = B.and_(B.xor(dx.neg, below), B.ne(mag, 0))  # an exact zero difference is +0
    return hi, dx, neg, mag, lsb


def split(B, x: V, residual_log2: int) -> tuple[V, V]:
    """(x_h, lo) in fp16 for fp32 patterns x: x_h = fp16(x), lo = fp16(2^s (x - x_h)), s = residual_log2."""
    hi, dx, neg, mag, lsb = residual(B, x)
    dh = sem.decode(B, FP16, hi)
    lo = sem.round_to(B, neg, mag, B.add(lsb, residual_log2), 25, FP16, FP16.frac_bits, "rne")
    # specials: x NaN or inf -> x - x_h is NaN; finite x with x_h = +-inf -> residual -+inf
    finite_x = B.not_(B.or_(dx.nan, dx.inf))
    h_inf = B.and_(finite_x, dh.inf)
    flags = sem.Flags(B.or_(dx.nan, dx.inf), B.and_(h_inf, dh.neg), B.and_(h_inf, B.not_(dh.neg)))
    return hi, sem.apply_flags(B, FP16, flags, lo)


@dataclass
class SplitUnits:
    """One fp32 input x and its split, as integers on x's grid 2^lsb (lsb = e(x) - 23), exactly:

    |x| = sig, x - x_h = r (signed, x's sign read as positive when x >= 0: r = |x| - |x_h| carries the
    sign of x), 2^-s lo = lo_units (signed, same convention), tail t = r - lo_units.  The patterns
    x_h, lo are :func:`split`'s; ``neg`` is x's sign.
    """

    hi: V
    lo: V
    neg: V
    e: V
    lsb: V
    sig: V
    r: V
    lo_units: V
    t: V


def split_units(B, x: V, residual_log2: int) -> SplitUnits:
    """x's split as exact integers on x's grid (see :class:`SplitUnits`), for finite x with finite x_h.

    lo is a multiple of 2^(e(x) - 23 + s): fp16(v) of a multiple v of 2^g is v itself or v rounded to
    a coarser grid (subnormals included), so 2^-s lo and the tail are integer multiples of 2^(e(x) - 23).
    Magnitudes: |r| < 2^26 (:func:`residual_parts`), |lo_units| <= 2 |r| < 2^27, |t| < 2^28.
    """
    hi, dx, _, diff, lsb = residual_parts(B, x)
    _, lo = split(B, x, residual_log2)
    dl = sem.decode(B, FP16, lo)
    shift = B.sub(B.sub(dl.e, FP16.frac_bits), B.add(lsb, residual_log2))  # |lo| = sig * 2^shift units
    up = B.shl(dl.sig, B.min(B.max(shift, 0), 27), 27, FP16.frac_bits + 28)
    lo_mag = B.ite(B.lt(shift, 0), B.shr(dl.sig, B.max(B.neg(shift), 0)), up)
    lo_units = B.ite(B.xor(dl.neg, dx.neg), B.neg(lo_mag), lo_mag)  # relative to x's sign
    t = B.fit(B.sub(diff, lo_units), 29)
    return SplitUnits(hi, lo, dx.neg, dx.e, lsb, dx.sig, diff, lo_units, t)


def kblocks(K: int, p: ModelParams) -> list[tuple[int, int]]:
    """The k-blocks [k0, k1) of one instruction each (instr_k products; all K if instr_k = 0)."""
    step = p.instr_k or K
    return [(k0, min(K, k0 + step)) for k0 in range(0, K, step)]


def tc(B, p: ModelParams, xs: Sequence[V], ys: Sequence[V], acc: V) -> V:
    """One tensor-core instruction TC(X.Y + acc) of model p (fp32 result pattern)."""
    return sem.dot(B, p, list(xs), list(ys), acc)


def rn32_sum(B, terms: Sequence[tuple[V, int]]) -> V:
    """RN32(sum_i x_i * 2^s_i) for fp32 patterns x_i: exact sum, one rounding, IEEE specials.

    Two addends are aligned in a window of 48 bits below the larger one's
    exponent E (truncating what falls below): this is exact rounding, because
    a smaller addend that reaches below 2^(E-48) has its leading bit below
    2^(E-25), i.e. under a quarter of the larger addend's ulp (half of the ulp
    below a power of two), so both it and its truncation leave RN32 at the
    larger addend.  More addends use the exact (unbounded) sum.
    """
    parts, flags = [], []
    for x, s in terms:
        t, fl = sem.value_term(B, sem.decode(B, FP32, x))
        parts.append(scale(B, t, s) if s else t)
        flags.append(fl)
    bits = sem.sum_and_round(B, parts, _ADD_WINDOW if len(parts) == 2 else None, _EXACT, FP32,
                             FP32.frac_bits, "rne")
    return sem.apply_flags(B, FP32, sem.merge_flags(B, flags), bits)


def markidis(B, p: ModelParams, a: Sequence[V], b: Sequence[V], full: bool = False) -> V:
    """Markidis et al.'s refinement: every partial product accumulated inside the tensor cores."""
    check_path(p)
    sa = [split(B, x, 0) for x in a]
    sb = [split(B, x, 0) for x in b]
    return markidis_chain(B, p, [s[0] for s in sa], [s[1] for s in sa], [s[0] for s in sb], [s[1] for s in sb],
                          full)


def markidis_chain(B, p: ModelParams, ah: Sequence[V], al: Sequence[V], bh: Sequence[V], bl: Sequence[V],
                   full: bool = False) -> V:
    """Markidis's tensor-core chain on given fp16 pieces (x_h, r_x): the scheme after its splits."""
    a_pieces, b_pieces = (ah, al), (bh, bl)
    acc: V = B.const(0)
    for k0, k1 in kblocks(len(ah), p):
        for i, j in markidis_pairs(full):
            acc = tc(B, p, a_pieces[i][k0:k1], b_pieces[j][k0:k1], acc)
    return acc


def markidis_pairs(full: bool = False) -> list[tuple[int, int]]:
    """Markidis's piece products (i, j) = A_i . B_j in chain order, piece 0 = x_h, piece 1 = r_x:
    A_h.B_h, A_h.R_B, R_A.B_h (and R_A.R_B for ``markidis-full``)."""
    return [(0, 0), (0, 1), (1, 0)] + ([(1, 1)] if full else [])


def ootomo(B, p: ModelParams, a: Sequence[V], b: Sequence[V]) -> V:
    """Ootomo-Yokota: main term summed with RN32 outside, scaled correction inside the tensor cores."""
    check_path(p)
    sa = [split(B, x, OOTOMO_SCALE_LOG2) for x in a]
    sb = [split(B, x, OOTOMO_SCALE_LOG2) for x in b]
    ah, da = [s[0] for s in sa], [s[1] for s in sa]
    bh, db = [s[0] for s in sb], [s[1] for s in sb]
    zero: V = B.const(0)
    main: V = zero
    for k0, k1 in kblocks(len(a), p):
        tmp = tc(B, p, ah[k0:k1], bh[k0:k1], zero)
        main = rn32_sum(B, [(main, 0), (tmp, 0)])
    corr = ootomo_corr_chain(B, p, ah, da, bh, db)
    return rn32_sum(B, [(main, 0), (corr, -OOTOMO_SCALE_LOG2)])


def ootomo_corr_chain(B, p: ModelParams, ah: Sequence[V], da: Sequence[V], bh: Sequence[V], db: Sequence[V]) -> V:
    """Ootomo-Yokota's correction chain D_corr on given fp16 pieces (x_h, dx), from +0."""
    corr: V = B.const(0)
    for k0, k1 in kblocks(len(ah), p):
        corr = tc(B, p, da[k0:k1], bh[k0:k1], corr)
        corr = tc(B, p, ah[k0:k1], db[k0:k1], corr)
    return corr


# ------------------------------------------------------------------ vendor schemes
BF16: Format = get_format("bf16")
TF32: Format = get_format("tf32")


def pieces(B, x: V, fmt: Format, n: int) -> list[V]:
    """n pieces of an fp32 pattern x in ``fmt`` (bf16 or tf32: fp32's exponent range):
    x_0 = fmt(x), x_i = fmt(x - x_0 - ... - x_{i-1}), each rounded to nearest even.

    Every residual is exact in fp32 (:func:`residual_parts`: a multiple of x's fp32 unit, below
    half a unit of the piece) and is rounded into fp32 without loss (``round_to`` of an exactly
    representable value).  Three bf16 pieces hold 3 x 8 = 24 significant bits, so for normal x
    whose residuals stay normal, x = x_0 + x_1 + x_2 exactly; two pieces hold 16 (bf16) or 22 (tf32).
    Specials: x NaN or inf gives NaN residuals; a first piece that overflows (x near fp32's largest
    value rounds to inf in fmt) gives a residual -+inf, as IEEE subtraction would.
    """
    out = []
    cur = x
    for i in range(n):
        hi, dx, neg, mag, lsb = residual(B, cur, fmt)
        out.append(hi)
        if i == n - 1:
            break
        dh = sem.decode(B, fmt, hi)
        r = sem.round_to(B, neg, mag, lsb, 26, FP32, FP32.frac_bits, "rne")
        finite_x = B.not_(B.or_(dx.nan, dx.inf))
        h_inf = B.and_(finite_x, dh.inf)
        flags = sem.Flags(B.or_(dx.nan, dx.inf), B.and_(h_inf, dh.neg), B.and_(h_inf, B.not_(dh.neg)))
        cur = sem.apply_flags(B, FP32, flags, r)
    return out


#: pair orders of the piece products (i, j) = A_i . B_j; "small-first" accumulates the least
#: significant products first, "large-first" the reverse.  NVIDIA has not published the order cuBLAS
#: uses for BF16x9 (as far as the sources in this repository's history show): it is a stated parameter.
PAIR_ORDERS = ("small-first", "large-first")


def piece_pairs(n: int, full: bool, order: str) -> list[tuple[int, int]]:
    """The products A_i . B_j a piece scheme computes: all n x n (``full``) or those with i + j < n,
    sorted by significance i + j (ties: i descending) in the stated ``order``."""
    if order not in PAIR_ORDERS:
        raise TcsmtError(f"unknown pair order {order!r} (known: {', '.join(PAIR_ORDERS)})")
    pairs = [(i, j) for i in range(n) for j in range(n) if full or i + j < n]
    pairs.sort(key=lambda ij: (-(ij[0] + ij[1]), -ij[0]))
    return pairs if order == "small-first" else pairs[::-1]


def piece_scheme(B, p: ModelParams, a: Sequence[V], b: Sequence[V], fmt: Format, n: int, full: bool,
                 order: str) -> V:
    """fp32 emulation with n pieces in ``fmt`` and one tensor-core accumulator chain from +0: for each
    k-block, for each pair (i, j) of :func:`piece_pairs`, acc = TC(A_i . B_j + acc)."""
    check_path(p, fmt.name)
    pa = [pieces(B, x, fmt, n) for x in a]
    pb = [pieces(B, x, fmt, n) for x in b]
    acc: V = B.const(0)
    for k0, k1 in kblocks(len(a), p):
        for i, j in piece_pairs(n, full, order):
            acc = tc(B, p, [x[i] for x in pa[k0:k1]], [y[j] for y in pb[k0:k1]], acc)
    return acc


#: vendor schemes: name -> (piece format, pieces, all n x n products, pair order)
VENDOR = {
    "bf16x9": (BF16, 3, True, "small-first"),
    "bf16x9-large-first": (BF16, 3, True, "large-first"),
    "bf16x3": (BF16, 2, False, "large-first"),
    "tf32x3": (TF32, 2, False, "large-first"),
    "tf32x3-small-first": (TF32, 2, False, "small-first"),
}


def input_format(name: str) -> str:
    """The tensor-core input format a scheme needs (fp16 for Markidis and Ootomo-Yokota)."""
    key = scheme_key(name)
    return VENDOR[key][0].name if key in VENDOR else "fp16"


def fp32_simt(B, p: ModelParams | None, a: Sequence[V], b: Sequence[V]) -> V:
    """Sequential IEEE fp32 FMAs from +0 (no tensor cores; ``p`` is ignored)."""
    return sem.dot(B, _FMA32, list(a), list(b), B.const(0))


def scheme(name: str) -> Callable[..., V]:
    """The back-end-generic function of algorithm ``name`` (see ALGOS)."""
    key = name.strip().lower()
    if key == "markidis":
        return lambda B, p, a, b: markidis(B, p, a, b, False)
    if key == "markidis-full":
        return lambda B, p, a, b: markidis(B, p, a, b, True)
    if key in ("ootomo", "ootomo-yokota"):
        return ootomo
    if key in ("fp32", "simt", "fp32-simt"):
        return fp32_simt
    if key in VENDOR:
        fmt, n, full, order = VENDOR[key]
        return lambda B, p, a, b: piece_scheme(B, p, a, b, fmt, n, full, order)
    raise TcsmtError(f"unknown algorithm {name!r} (known: {', '.join(ALGOS)})")


def scheme_key(name: str) -> str:
    """The canonical algorithm name (raises TcsmtError for an unknown one)."""
    scheme(name)
    key = name.strip().lower()
    return {"ootomo-yokota": "ootomo", "simt": "fp32", "fp32-simt": "fp32"}.get(key, key)


def tensor_core_calls(name: str, K: int, p: ModelParams) -> int:
    """How many tensor-core instructions the scheme issues for one dot product of length K."""
    nb = len(kblocks(K, p))
    key = scheme_key(name)
    if key in VENDOR:
        _, n, full, order = VENDOR[key]
        return len(piece_pairs(n, full, order)) * nb
    return {"markidis": 3 * nb, "markidis-full": 4 * nb, "ootomo": 3 * nb, "fp32": 0}[key]
