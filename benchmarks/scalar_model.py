"""A scalar, pure-Python implementation of the block-FMA model, one dot product at a time.

Written from the model's description (Fasi et al. 2020 sec. 3.1; the
``ModelParams`` docstring) without using :mod:`tcsmt.arith.semantics` or
:mod:`tcsmt.arith.formats`: it has its own format table, decoder and rounding, and
works on plain Python integers.  It serves two purposes:

* a baseline for ``bench_simulator.py`` (how much the vectorised simulator gains);
* an independent cross-check of the simulator (``tests/test_scalar_crosscheck.py``).

Every value is handled as ``(-1)**neg * mag * 2**lsb`` with integer ``mag``.
Only the model parameters (a :class:`tcsmt.arith.params.ModelParams`, or any object
with the same attribute names) are taken from tcsmt.
"""
from __future__ import annotations

from collections.abc import Sequence

# name: (exponent bits, fraction bits, specials, low pad bits of the stored pattern)
FORMATS = {
    "fp64": (11, 52, "ieee", 0),
    "fp32": (8, 23, "ieee", 0),
    "tf32": (8, 10, "ieee", 13),
    "fp16": (5, 10, "ieee", 0),
    "bf16": (8, 7, "ieee", 0),
    "e4m3": (4, 3, "fn", 0),
    "e5m2": (5, 2, "ieee", 0),
    # OCP MX v1.0 fp4/fp6: no inf, no NaN (every pattern finite); read as inputs only
    "e2m1": (2, 1, "none", 0),
    "e3m2": (3, 2, "none", 0),
    "e2m3": (2, 3, "none", 0),
}


class Fmt:
    """Constants of one binary format."""

    def __init__(self, name: str):
        self.name = name
        self.eb, self.fb, self.specials, self.pad = FORMATS[name]
        self.bias = (1 << (self.eb - 1)) - 1
        self.emin = 1 - self.bias
        self.top = (1 << self.eb) - 1
        self.emax = (self.top - 1 if self.specials == "ieee" else self.top) - self.bias
        self.sign_bit = 1 << (self.eb + self.fb + self.pad)

    def pack(self, neg: bool, expf: int, frac: int) -> int:
        return ((int(neg) << (self.eb + self.fb)) | (expf << self.fb) | frac) << self.pad

    def nan(self) -> int:
        return self.pack(False, self.top, (1 << self.fb) - 1)

    def inf(self, neg: bool) -> int:
        if self.specials != "ieee":
            return self.nan()  # no infinities: saturate to NaN
        return self.pack(neg, self.top, 0)


_FMTS = {name: Fmt(name) for name in FORMATS}


def fmt(name: str) -> Fmt:
    return _FMTS[name]


# --------------------------------------------------------------- decoding
def decode(f: Fmt, bits: int, keep_sub: bool = True):
    """(neg, exponent e, integer significand, is_nan, is_inf) with value sig * 2^(e - fb)."""
    bits = int(bits) >> f.pad
    frac = bits & ((1 << f.fb) - 1)
    expf = (bits >> f.fb) & f.top
    neg = bool((bits >> (f.fb + f.eb)) & 1)
    if f.specials == "ieee" and expf == f.top:
        return neg, 0, 0, frac != 0, frac == 0
    if f.specials == "fn" and expf == f.top and frac == (1 << f.fb) - 1:
        return neg, 0, 0, True, False
    if expf == 0:
        return neg, f.emin, (frac if keep_sub else 0), False, False
    return neg, expf - f.bias, frac | (1 << f.fb), False, False


# --------------------------------------------------------------- rounding
def round_value(neg: bool, mag: int, lsb: int, f: Fmt, frac_bits: int, mode: str, keep_sub: bool = True,
                overflow_inf: bool = False) -> int:
    """Bit pattern of (-1)^neg * mag * 2^lsb rounded to ``frac_bits`` fraction bits in format f.

    With ``overflow_inf`` an overflow always gives inf (else IEEE: rz gives the largest finite).
    """
    if mag == 0:
        return f.pack(neg, 0, 0)
    e = lsb + mag.bit_length() - 1
    e = max(e, f.emin)
    shift = (e - frac_bits) - lsb  # bits to drop
    if shift <= 0:
        q, rest, half = mag << -shift, 0, 0
    else:
        q = mag >> shift
        rest = mag & ((1 << shift) - 1)
        half = 1 << (shift - 1)
    if rest:
        if mode == "rne":
            up = rest > half or (rest == half and q & 1)
        elif mode == "ru":
            up = not neg
        elif mode == "rd":
            up = neg
        else:
            up = False
        q += int(up)
    if q >> (frac_bits + 1):
        q >>= 1
        e += 1
    if q >> frac_bits:  # normal
        if e > f.emax:
            to_inf = {"rne": True, "rz": False, "ru": not neg, "rd": neg}[mode]
            if to_inf or overflow_inf:
                return f.inf(neg)
            return f.pack(neg, f.emax + f.bias, ((1 << frac_bits) - 1) << (f.fb - frac_bits))
        return f.pack(neg, e + f.bias, (q - (1 << frac_bits)) << (f.fb - frac_bits))
    if not keep_sub:
        q = 0
    return f.pack(neg, 0, q << (f.fb - frac_bits))


# ------------------------------------------------------------- block sums
class _Term:
    __slots__ = ("lsb", "mag", "neg", "top", "zero_top")

    def __init__(self, neg, mag, lsb, top, zero_top=None):
        self.neg, self.mag, self.lsb, self.top = neg, mag, lsb, top
        self.zero_top = zero_top  # the exponent a zero addend aligns with (zero_exponent), or None


def _exact_sum(terms: Sequence[_Term]) -> tuple[int, int]:
    """Signed integer S and lsb with sum = S * 2^lsb, exactly."""
    nz = [t for t in terms if t.mag]
    if not nz:
        return 0, 0
    low = min(t.lsb for t in nz)
    s = 0
    for t in nz:
        v = t.mag << (t.lsb - low)
        s += -v if t.neg else v
    return s, low


def _aligned_sum(terms: Sequence[_Term], F: int, p) -> tuple[int, int]:
    """Align to the largest exponent with F fraction bits, lose the low bits, add, wrap."""
    nz = [t for t in terms if t.mag]
    if not nz:
        return 0, 0
    E = max(t.top for t in nz)
    zero_tops = [t.zero_top for t in terms if not t.mag and t.zero_top is not None]
    if zero_tops:  # zeros with an exponent join the maximum (zero_exponent)
        E = max(E, *zero_tops)
    if p.align_floor is not None:
        E = max(E, p.align_floor)
    L = E - F
    s = 0
    for t in nz:
        d = t.lsb - L
        if d >= 0:
            v = t.mag << d
        else:
            r = -d
            v = t.mag >> r
            lost = t.mag & ((1 << r) - 1)
            if p.align == "rne":
                half = 1 << (r - 1)
                if lost > half or (lost == half and v & 1):
                    v += 1
            elif p.align == "floor":
                if t.neg and lost:
                    v += 1  # -(v+1) is the floor of the negative value
        s += -v if t.neg else v
    if p.carry_bits != "unbounded":
        cap = F + 1 + int(p.carry_bits)
        mag = abs(s)
        if p.overflow == "wrap":
            mag &= (1 << cap) - 1
        else:
            mag = min(mag, (1 << cap) - 1)
        s = -mag if s < 0 else mag
    return s, L


def _sum_round(terms, F, p, acc: Fmt, frac_bits: int, mode: str) -> int:
    """Sum (aligned, or exact when F is None) and round into acc; IEEE-like zero signs."""
    if F is None:
        s, lsb = _exact_sum(terms)
    else:
        s, lsb = _aligned_sum(terms, F, p)
    if s == 0:
        if any(t.mag for t in terms):
            neg = mode == "rd"
        else:
            neg = all(t.neg for t in terms)
        return acc.pack(neg and p.zero_sign not in ("plus", "exact_plus"), 0, 0)
    out = round_value(s < 0, abs(s), lsb, acc, frac_bits, mode, p.subnormal_out, p.overflow_result == "inf")
    if p.zero_sign in ("positive", "plus") and out & (acc.sign_bit - 1) == 0:
        return 0  # a non-zero sum that rounded to zero: +0
    return out


def _shift(v: int, d: int, align: str) -> int:
    """The signed integer v * 2^d on the integer grid, its lost bits dropped by ``align``."""
    if d >= 0:
        return v << d
    r = -d
    if align == "floor":
        return v >> r  # Python's >> rounds toward minus infinity
    mag = abs(v)
    q = mag >> r
    if align == "rne":
        lost = mag & ((1 << r) - 1)
        half = 1 << (r - 1)
        if lost > half or (lost == half and q & 1):
            q += 1
    return -q if v < 0 else q


def _window(terms, F: int):
    """(S, E): the window sum of ``terms`` on the grid 2^(E - F), truncated per term; E None if no term has an
    exponent (all zero, and zeros take none)."""
    tops = [t.top for t in terms if t.mag] + [t.zero_top for t in terms if not t.mag and t.zero_top is not None]
    if not tops:
        return 0, None
    E = max(tops)
    return sum(_shift(-t.mag if t.neg else t.mag, t.lsb - (E - F), "trunc") for t in terms), E


def _after_sum(p, terms, ct, F: int, acc: Fmt) -> int:
    """c_mode after_sum, written from the ModelParams docstring (MMA-Sim's CDNA3 group)."""
    g = p.product_groups if len(terms) > 1 else 1
    parts = [_window(terms[j::g], F) for j in range(g)]
    live = [(v, e) for v, e in parts if e is not None]
    if not live:
        S, ES = 0, None
    elif len(parts) == 1:
        S, ES = live[0]
    else:
        ES = max(e for _, e in live)
        S = sum(_shift(v, e - ES, p.late_align) for v, e in live)
    c_top = ct.top if ct.mag else ct.zero_top
    tops = [e for e in (ES, c_top) if e is not None]
    F2 = p.sum_frac_bits
    if tops:
        M = max(tops)
        s2 = _shift(S, ES - F - (M - F2), p.late_align) if ES is not None else 0
        cv = _shift(-ct.mag if ct.neg else ct.mag, ct.lsb - (M - F), p.late_align) << (F2 - F) if ct.mag else 0
        if p.c_drop is not None and c_top is not None and c_top < M - p.c_drop:
            cv = 0
        total, lsb = s2 + cv, M - F2
    else:
        total, lsb = 0, 0
    mode = p.block_round
    if total == 0:
        if any(t.mag for t in [*terms, ct]):
            neg = mode == "rd"
        else:
            neg = all(t.neg for t in [*terms, ct])
        return acc.pack(neg and p.zero_sign not in ("plus", "exact_plus"), 0, 0)
    out = round_value(total < 0, abs(total), lsb, acc, p.block_frac_bits, mode, p.subnormal_out,
                      p.overflow_result == "inf")
    if p.zero_sign in ("positive", "plus") and out & (acc.sign_bit - 1) == 0:
        return 0
    return out


def _value_term(f: Fmt, bits: int, keep_sub: bool = True):
    neg, e, sig, nan, inf = decode(f, bits, keep_sub)
    return _Term(neg, sig, e - f.fb, e), nan, inf


def block_fma(p, a: Sequence[int], b: Sequence[int], c: int, c_fmt: Fmt) -> int:
    fin, acc = fmt(p.in_fmt), fmt(p.acc_fmt)
    fbin = fmt(p.b_fmt) if p.b_fmt else fin  # B's format on a mixed path
    if p.operand_fmt:  # exact conversion of the operands first
        fop = fmt(p.operand_fmt)
        a = [convert(int(x), fin, fop, "rne") for x in a]
        b = [convert(int(y), fbin, fop, "rne") for y in b]
        fin = fbin = fop
    nan = pinf = ninf = False
    terms = []
    for x, y in zip(a, b):
        na, ea, sa, nana, infa = decode(fin, x, p.subnormal_in)
        nb, eb, sb, nanb, infb = decode(fbin, y, p.subnormal_in)
        neg = na != nb
        mag = sa * sb
        lsb = ea + eb - fin.fb - fbin.fb
        if p.product_exponent == "raw":
            top = ea + eb
        else:
            top = lsb + mag.bit_length() - 1
        zt = None
        if p.zero_exponent is not None:  # a zero factor has exponent zero_exponent
            z = p.zero_exponent
            zt = (z if sa == 0 else ea) + (z if sb == 0 else eb)
        terms.append(_Term(neg, mag, lsb, top, zt))
        zero_a = sa == 0 and not (nana or infa)
        zero_b = sb == 0 and not (nanb or infb)
        if nana or nanb or (infa and zero_b) or (infb and zero_a):
            nan = True
        elif infa or infb:
            if neg:
                ninf = True
            else:
                pinf = True
    ct, cnan, cinf = _value_term(c_fmt, c, p.subnormal_c)
    ct.zero_top = p.zero_exponent
    nan = nan or cnan
    if cinf:
        if ct.neg:
            ninf = True
        else:
            pinf = True
    if p.product_inf is not None and not (nan or pinf or ninf):
        # product_inf T (ModelParams docstring): with no NaN or infinite input, a product of magnitude >= 2^T is
        # an infinity of its sign, both signs NaN
        big = [t.neg for t in terms if t.mag and t.lsb + t.mag.bit_length() - 1 >= p.product_inf]
        pinf, ninf = (False in big), (True in big)
        nan = pinf and ninf
    F = None if p.extra_bits == "exact" else acc.fb + int(p.extra_bits)
    if p.reduction == "pairwise":
        parts = [_sum_round([t], None, p, acc, acc.fb, "rne") for t in terms]
        while len(parts) > 1:
            nxt = []
            for i in range(0, len(parts) - 1, 2):
                x = _value_term(acc, parts[i])[0]
                y = _value_term(acc, parts[i + 1])[0]
                nxt.append(_sum_round([x, y], None, p, acc, acc.fb, "rne"))
            if len(parts) % 2:
                nxt.append(parts[-1])
            parts = nxt
        psum = _value_term(acc, parts[0])[0]
        out = _sum_round([psum, ct], None, p, acc, acc.fb, p.c_round)
    elif p.c_mode in ("aligned", "after_instr"):
        out = _sum_round(terms + [ct], F, p, acc, p.block_frac_bits, p.block_round)
    elif p.c_mode == "after_sum":
        out = _after_sum(p, terms, ct, F, acc)
    else:
        part = _sum_round(terms, F, p, acc, p.block_frac_bits, p.block_round)
        pt, pnan, pinf_ = _value_term(acc, part)
        nan = nan or pnan
        if pinf_:
            if pt.neg:
                ninf = True
            else:
                pinf = True
        out = _sum_round([pt, ct], None, p, acc, acc.fb, p.c_round)
    if nan or (pinf and ninf):
        return acc.nan()
    if pinf:
        return acc.inf(False)
    if ninf:
        return acc.inf(True)
    return out


def convert(bits: int, src: Fmt, dst: Fmt, mode: str, keep_sub: bool = True) -> int:
    if src.name == dst.name:
        return bits
    t, nan, inf = _value_term(src, bits)
    if nan:
        return dst.nan()
    if inf:
        return dst.inf(t.neg)
    return round_value(t.neg, t.mag, t.lsb, dst, dst.fb, mode, keep_sub) if t.mag else dst.pack(t.neg, 0, 0)


def _add(p, x: int, xf: Fmt, y: int, yf: Fmt, f: Fmt, mode: str) -> int:
    """x + y exactly, rounded once into f (specials as IEEE)."""
    xt, xn, xi = _value_term(xf, x)
    yt, yn, yi = _value_term(yf, y, p.subnormal_c)
    if xn or yn or (xi and yi and xt.neg != yt.neg):
        return f.nan()
    if xi:
        return f.inf(xt.neg)
    if yi:
        return f.inf(yt.neg)
    return _sum_round([xt, yt], None, p, f, f.fb, mode)


def dot(p, a: Sequence[int], b: Sequence[int], c: int) -> int:
    """D = a.b + c under model p; a, b, c are bit patterns of in_fmt / c_fmt; returns out_fmt bits."""
    acc, out = fmt(p.acc_fmt), fmt(p.out_fmt)
    K = len(a)
    instr_k = p.instr_k or K
    block_k = p.block_k or instr_k
    cur, cur_fmt = int(c), fmt(p.c_fmt)
    for i0 in range(0, K, instr_k):
        i1 = min(K, i0 + instr_k)
        nblk = -(-(i1 - i0) // block_k)
        if p.block_interleave and nblk > 1:
            blocks = [[k for k in range(i0, i1) if ((k - i0) // p.block_interleave) % nblk == j] for j in range(nblk)]
        else:
            blocks = [list(range(b0, min(i1, b0 + block_k))) for b0 in range(i0, i1, block_k)]
        if p.c_mode == "after_instr":
            held, held_fmt, cur, cur_fmt = cur, cur_fmt, 0, acc
        for ks in blocks:
            cur = block_fma(p, [int(a[k]) for k in ks], [int(b[k]) for k in ks], cur, cur_fmt)
            cur_fmt = acc
        if p.c_mode == "after_instr":
            cur = _add(p, cur, acc, held, held_fmt, acc, p.c_round)
        if out.name != acc.name:
            cur = convert(cur, acc, out, p.out_round, p.subnormal_out)
            cur_fmt = out
    if cur_fmt.name != out.name:
        cur = convert(cur, cur_fmt, out, p.out_round, p.subnormal_out)
    return cur


def dot_rows(p, a, b, c) -> list[int]:
    """``dot`` over the rows of 2-D a, b (bit patterns) and 1-D c."""
    return [dot(p, list(ra), list(rb), int(rc)) for ra, rb, rc in zip(a, b, c)]
