"""Compiled (numba) inner loops of :mod:`tcsmt.kernels.cpu`: a second implementation
of the chained block FMA of :mod:`tcsmt.arith.semantics` for the parameters that
:func:`tcsmt.kernels.cpu.check_supported` accepts.

(Over 400 lines on purpose: numba inlines only functions compiled in one module, and the hot loop
needs every step of the block FMA inlined.)

Every function here mirrors one function of :mod:`tcsmt.arith.semantics` (named in
its docstring) on scalars, with exact int64 arithmetic; the tests in
``tests/test_gemm_kernel.py`` compare the whole kernel with
``tcsmt.sim.simulator.simulate_params`` bit for bit.  This module imports numba;
:mod:`tcsmt.kernels.cpu` imports it lazily and turns a missing numba into a
``TcsmtError``.

Inputs arrive decoded (by :func:`tcsmt.arith.semantics.decode` itself, in
:mod:`tcsmt.kernels.cpu`): per element the exponent ``e`` (``ZERO_E`` for a
zero significand, so a zero never raises the block maximum), the integer
significand ``m`` (subnormals already flushed where the model says so), the
sign bit and a special code (0 finite, 1 inf, 2 NaN), and the three packed in one
int64 word ``e * 2^32 + neg * 2^31 + m`` (one load per operand in the hot loop).

``cfg`` (int64 array) holds the model's numbers; its slots are the ``CFG_*``
constants below.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

TILE = 8  # outputs per tile side (parallel work unit)
ZERO_E = -(1 << 20)  # exponent given to zero significands: below every real alignment exponent
RZ, RNE, RU, RD = 0, 1, 2, 3

(CFG_F, CFG_F2, CFG_HAS_FLOOR, CFG_FLOOR, CFG_BLOCK_K, CFG_INSTR_K, CFG_AFTER_INSTR, CFG_BLOCK_FRAC,
 CFG_BLOCK_ROUND, CFG_C_ROUND, CFG_OUT_ROUND, CFG_SUB_C, CFG_SUB_OUT, CFG_OVF_INF, CFG_ZERO_SIGN,
 CFG_CONVERT_OUT, CFG_OUT_EXP_BITS, CFG_OUT_FRAC, CFG_OUT_BIAS, CFG_C0_BITS, CFG_TRUNC_ALIGN, CFG_N) = range(22)

# the accumulator format: fp32 (gemm_kernel.check_supported insists on it)
ACC_FRAC = 23
ACC_BIAS = 127
ACC_EMIN = -126
ACC_EMAX = 127
ACC_EXPB = 8


@njit(cache=True, inline="always")
def _msb(x: int) -> int:
    """floor(log2 x) for x > 0 (semantics: ``B.msb``)."""
    m = 0
    if x >= (1 << 32):
        x >>= 32
        m += 32
    if x >= (1 << 16):
        x >>= 16
        m += 16
    if x >= (1 << 8):
        x >>= 8
        m += 8
    if x >= (1 << 4):
        x >>= 4
        m += 4
    if x >= (1 << 2):
        x >>= 2
        m += 2
    if x >= (1 << 1):
        m += 1
    return m


@njit(cache=True)
def round_to(neg, mag, lsb, exp_bits, fmt_frac, bias, frac_bits, mode, keep_sub, ovf_inf):
    """Mirror of :func:`tcsmt.arith.semantics.round_to` for one value: the bit pattern of
    (-1)^neg * mag * 2^lsb rounded to ``frac_bits`` fraction bits of a format with
    ``exp_bits``/``fmt_frac``/``bias`` (no pad bits)."""
    emin = 1 - bias
    emax = (1 << exp_bits) - 2 - bias
    sign_bit = np.int64(1) << (exp_bits + fmt_frac)
    if mag == 0:
        return sign_bit if neg else np.int64(0)
    m = _msb(mag)
    e_eff = max(lsb + m, emin)
    sh = e_eff - frac_bits - lsb
    half = False
    sticky = False
    if sh <= 0:
        q = mag << min(-sh, frac_bits + 1)
    elif sh >= 63:
        q = np.int64(0)
        half = sh - 1 < 63 and ((mag >> (sh - 1)) & 1) != 0
        sticky = sh >= 2 and ((mag & ((np.int64(1) << (sh - 1)) - 1)) != 0 if sh - 1 < 63 else mag != 0)
    else:
        q = mag >> sh
        half = ((mag >> (sh - 1)) & 1) != 0
        sticky = sh >= 2 and (mag & ((np.int64(1) << (sh - 1)) - 1)) != 0
    inexact = half or sticky
    if mode == RNE:
        inc = half and (sticky or (q & 1) != 0)
    elif mode == RZ:
        inc = False
    elif mode == RU:
        inc = inexact and not neg
    else:
        inc = inexact and neg
    if inc:
        q += 1
    if q >= (np.int64(1) << (frac_bits + 1)):
        q >>= 1
        e_eff += 1
    normal = q >= (np.int64(1) << frac_bits)
    pad = fmt_frac - frac_bits
    if normal:
        if e_eff > emax:
            if mode == RNE or ovf_inf:
                to_inf = True
            elif mode == RZ:
                to_inf = False
            elif mode == RU:
                to_inf = not neg
            else:
                to_inf = neg
            if to_inf:
                big = np.int64((1 << exp_bits) - 1) << fmt_frac
            else:
                big = (np.int64(emax + bias) << fmt_frac) | (((np.int64(1) << frac_bits) - 1) << pad)
            return (sign_bit | big) if neg else big
        word = (np.int64(e_eff + bias) << fmt_frac) | ((q - (np.int64(1) << frac_bits)) << pad)
    else:
        word = (q << pad) if keep_sub else np.int64(0)
    return (sign_bit | word) if neg else word


@njit(cache=True, inline="always")
def _apply_flags(nan, pinf, ninf, bits, exp_bits, fmt_frac):
    """Mirror of :func:`tcsmt.arith.semantics.apply_flags` (IEEE specials; canonical NaN)."""
    if nan or (pinf and ninf):  # merge_flags: +inf and -inf together give NaN
        return (np.int64(1) << (exp_bits + fmt_frac)) - 1
    if pinf:
        return np.int64((1 << exp_bits) - 1) << fmt_frac
    if ninf:
        return (np.int64((1 << exp_bits) - 1) << fmt_frac) | (np.int64(1) << (exp_bits + fmt_frac))
    return bits


@njit(cache=True, inline="always")
def _zero_sign_rule(bits, mag_nonzero, zero_rule):
    """The zero-sign rule of :func:`tcsmt.arith.semantics.sum_and_round` on an fp32 pattern: ``zero_rule`` 0
    ("ieee") keeps the sign; 1 ("positive") makes a zero from a non-zero sum +0; 2 ("plus") makes every
    zero result +0."""
    if (bits & 0x7FFFFFFF) == 0 and ((zero_rule == 1 and mag_nonzero) or zero_rule == 2):
        return np.int64(0)
    return bits


@njit(cache=True)
def add_rounded(x_bits, y_bits, y_keep_sub, mode, keep_sub, ovf_inf, zero_rule):
    """Mirror of :func:`tcsmt.arith.semantics.add_rounded` for two fp32 patterns: x + y exact,
    rounded once to fp32 with ``mode`` (results' subnormals kept if ``keep_sub``, every
    overflow to inf if ``ovf_inf``); y's subnormals flushed unless ``y_keep_sub``.

    The exact sum is formed in int64: when the two LSB weights differ by more
    than 36, the term with the lower LSB (its magnitude is then below 2^-12 of
    the other's LSB, and the other is normal) is replaced by one unit of its
    sign at 20 bits below the other's LSB; both lie strictly inside the same
    interval between neighbouring multiples of 2^(lsb - 12) next to the larger
    term, whereas the result's rounding grid and its midpoints are multiples of
    at least 2^(lsb - 2), so every rounding mode gives the same bits."""
    xs = (x_bits >> 31) & 1
    xe_f = (x_bits >> 23) & 0xFF
    xf = x_bits & 0x7FFFFF
    ys = (y_bits >> 31) & 1
    ye_f = (y_bits >> 23) & 0xFF
    yf = y_bits & 0x7FFFFF
    nan = False
    pinf = False
    ninf = False
    if xe_f == 0xFF:
        if xf != 0:
            nan = True
        elif xs:
            ninf = True
        else:
            pinf = True
        xm = np.int64(0)
    else:
        xm = xf if xe_f == 0 else xf | (1 << 23)
    if ye_f == 0xFF:
        if yf != 0:
            nan = True
        elif ys:
            ninf = True
        else:
            pinf = True
        ym = np.int64(0)
    else:
        ym = yf if ye_f == 0 else yf | (1 << 23)
        if ye_f == 0 and not y_keep_sub:
            ym = np.int64(0)
    x_lsb = (ACC_EMIN if xe_f == 0 else xe_f - ACC_BIAS) - ACC_FRAC
    y_lsb = (ACC_EMIN if ye_f == 0 else ye_f - ACC_BIAS) - ACC_FRAC
    any_nz = xm != 0 or ym != 0
    all_neg = xs == 1 and ys == 1
    if xm == 0:
        s = -ym if ys else ym
        lsb = y_lsb
    elif ym == 0:
        s = -xm if xs else xm
        lsb = x_lsb
    else:
        if x_lsb - y_lsb > 36:
            ym = np.int64(1)
            y_lsb = x_lsb - 20
        elif y_lsb - x_lsb > 36:
            xm = np.int64(1)
            x_lsb = y_lsb - 20
        lsb = min(x_lsb, y_lsb)
        a = xm << (x_lsb - lsb)
        b = ym << (y_lsb - lsb)
        s = (-a if xs else a) + (-b if ys else b)
    if s == 0:
        neg = (mode == RD) if any_nz else all_neg
        bits = np.int64(1) << 31 if neg else np.int64(0)
        mag = np.int64(0)
    else:
        neg = s < 0
        mag = -s if neg else s
        bits = round_to(neg, mag, lsb, ACC_EXPB, ACC_FRAC, ACC_BIAS, ACC_FRAC, mode, keep_sub, ovf_inf)
    bits = _zero_sign_rule(bits, mag != 0, zero_rule)
    return _apply_flags(nan, pinf, ninf, bits, ACC_EXPB, ACC_FRAC)


@njit(cache=True)
def _chain(ae, am, an, asp, aw, be, bm, bn, bsp, bw, special, cfg, K, c0):
    """One output: the K-chain of :func:`tcsmt.arith.semantics.dot` with C = ``c0`` (an fp32 pattern) (in fp32 bits
    before any output conversion).  Each block mirrors :func:`tcsmt.arith.semantics.block_fma`
    with c_mode "aligned" (:func:`~tcsmt.arith.semantics.block_sum` with sign-magnitude
    truncation, unbounded carry, :func:`~tcsmt.arith.semantics.sum_and_round`,
    :func:`~tcsmt.arith.semantics.merge_flags`, :func:`~tcsmt.arith.semantics.apply_flags`)."""
    F = cfg[CFG_F]
    f2 = cfg[CFG_F2]
    has_floor = cfg[CFG_HAS_FLOOR] != 0
    floor = cfg[CFG_FLOOR]
    block_k = cfg[CFG_BLOCK_K]
    instr_k = cfg[CFG_INSTR_K]
    after_instr = cfg[CFG_AFTER_INSTR] != 0
    bfrac = cfg[CFG_BLOCK_FRAC]
    bround = cfg[CFG_BLOCK_ROUND]
    cround = cfg[CFG_C_ROUND]
    sub_c = cfg[CFG_SUB_C] != 0
    sub_out = cfg[CFG_SUB_OUT] != 0
    ovf_inf = cfg[CFG_OVF_INF] != 0
    zero_rule = cfg[CFG_ZERO_SIGN]
    trunc = cfg[CFG_TRUNC_ALIGN] != 0
    smax_p = max(0, F - f2)
    smax_c = max(0, F - ACC_FRAC)
    cur = c0  # C as an fp32 pattern (the library chains' +0: c_fmt's +0 decodes to the same zero term)
    for i0 in range(0, K, instr_k):
        i1 = min(K, i0 + instr_k)
        held = cur
        if after_instr:
            cur = np.int64(0)
        for k0 in range(i0, i1, block_k):
            k1 = min(i1, k0 + block_k)
            # C of this block: the previous result, decoded (semantics.decode, keep = subnormal_c)
            cs = (cur >> 31) & 1
            cef = (cur >> 23) & 0xFF
            cf = cur & 0x7FFFFF
            nan = False
            pinf = False
            ninf = False
            if cef == 0xFF:
                cm = np.int64(0)
                if cf != 0:
                    nan = True
                elif cs:
                    ninf = True
                else:
                    pinf = True
            elif cef == 0:
                cm = cf if sub_c else np.int64(0)
            else:
                cm = cf | (1 << 23)
            ce = ACC_EMIN if cef == 0 else cef - ACC_BIAS
            # E: the largest alignment exponent of the non-zero addends
            E = ce if cm != 0 else np.int64(ZERO_E) * 4
            for k in range(k0, k1):
                t = np.int64(ae[k]) + be[k]
                if t > E:
                    E = t
            if has_floor and floor > E:
                E = floor
            L = E - F
            S = np.int64(0)
            any_nz = cm != 0
            all_neg = cs == 1
            base = -f2 - L
            if trunc:
                # branch-free sign-magnitude truncation: d <= smax_p for every non-zero product, so
                # (mag << smax_p) >> (smax_p - d) is mag << d (d >= 0) or mag >> -d (d < 0)
                nz = np.int64(0)
                alln = np.int64(1)
                top = smax_p - base
                for k in range(k0, k1):
                    wa = aw[k]
                    wb = bw[k]
                    mag = (wa & 0xFFFF) * (wb & 0xFFFF)
                    ng = ((wa ^ wb) >> 31) & 1
                    sh = min(top - ((wa >> 32) + (wb >> 32)), np.int64(63))
                    v = (mag << smax_p) >> sh
                    S += (v ^ -ng) + ng
                    alln &= ng
                    nz |= mag
                all_neg = all_neg and alln != 0
                any_nz = any_nz or nz != 0
            else:
                for k in range(k0, k1):
                    mag = np.int64(am[k]) * bm[k]
                    ng = an[k] ^ bn[k]
                    d = np.int64(ae[k]) + be[k] + base
                    if d >= 0:
                        v = mag << min(d, smax_p)
                    elif d > -63:  # floor: two's-complement truncation
                        v = mag >> (-d)
                        if ng and (mag & ((np.int64(1) << (-d)) - 1)) != 0:
                            v += 1
                    else:
                        v = np.int64(0) if (not ng or mag == 0) else np.int64(1)
                    S += -v if ng else v
                    all_neg = all_neg and ng != 0
                    any_nz = any_nz or mag != 0
            if special:
                for k in range(k0, k1):
                    a_nan = asp[k] == 2
                    b_nan = bsp[k] == 2
                    a_inf = asp[k] == 1
                    b_inf = bsp[k] == 1
                    a_fz = am[k] == 0 and asp[k] == 0
                    b_fz = bm[k] == 0 and bsp[k] == 0
                    pn = a_nan or b_nan or (a_inf and b_fz) or (b_inf and a_fz)
                    pi = (a_inf or b_inf) and not pn
                    nan = nan or pn
                    if pi:
                        if an[k] ^ bn[k]:
                            ninf = True
                        else:
                            pinf = True
            # the C term
            d = ce - ACC_FRAC - L
            if d >= 0:
                v = cm << min(d, smax_c)
            elif d > -63:
                v = cm >> (-d)
                if not trunc and cs and (cm & ((np.int64(1) << (-d)) - 1)) != 0:
                    v += 1
            else:
                v = np.int64(0) if (trunc or not cs or cm == 0) else np.int64(1)
            S += -v if cs else v
            if S == 0:
                neg = (bround == RD) if any_nz else all_neg
                bits = np.int64(1) << 31 if neg else np.int64(0)
                bits = _zero_sign_rule(bits, False, zero_rule)
            else:
                neg = S < 0
                bits = round_to(neg, -S if neg else S, L, ACC_EXPB, ACC_FRAC, ACC_BIAS, bfrac, bround,
                                sub_out, ovf_inf)
                bits = _zero_sign_rule(bits, True, zero_rule)
            cur = _apply_flags(nan, pinf, ninf, bits, ACC_EXPB, ACC_FRAC)
        if after_instr:
            # the instruction's C: +0 of c_fmt first (decodes to the zero of fp32), then the held fp32 result
            cur = add_rounded(cur, held, sub_c, cround, sub_out, ovf_inf, zero_rule)
    return cur


@njit(cache=True, inline="always")
def _to_output(bits, cfg):
    """An accumulator (fp32) result in the output format (``convert_from_acc``) where the two differ."""
    if cfg[CFG_CONVERT_OUT] != 0:
        return convert_from_acc(bits, cfg[CFG_OUT_EXP_BITS], cfg[CFG_OUT_FRAC], cfg[CFG_OUT_BIAS],
                                cfg[CFG_OUT_ROUND], cfg[CFG_SUB_OUT] != 0)
    return bits


@njit(parallel=True, cache=True, fastmath=False)
def gemm_core(ae, am, an, asp, aw, a_special, be, bm, bn, bsp, bw, b_special, cfg, out):
    """out[i, j] = the chain of row i of A with column j of B (B given transposed: (c, K))."""
    r = ae.shape[0]
    c = be.shape[0]
    K = ae.shape[1]
    # tiles of TILE x TILE outputs, in parallel: skinny shapes (one row, one column) still use every core,
    # and a tile's rows and columns are reused from cache
    nti = (r + TILE - 1) // TILE
    ntj = (c + TILE - 1) // TILE
    for t in prange(nti * ntj):
        i0 = (t // ntj) * TILE
        j0 = (t % ntj) * TILE
        for i in range(i0, min(r, i0 + TILE)):
            for j in range(j0, min(c, j0 + TILE)):
                out[i, j] = _to_output(_chain(ae[i], am[i], an[i], asp[i], aw[i], be[j], bm[j], bn[j], bsp[j],
                                              bw[j], a_special[i] or b_special[j], cfg, K, cfg[CFG_C0_BITS]), cfg)


@njit(cache=True)
def convert_from_acc(bits, oexp, ofrac, obias, mode, keep_sub):
    """Mirror of :func:`tcsmt.arith.semantics.convert` from fp32 to a narrower IEEE format."""
    s = (bits >> 31) & 1
    ef = (bits >> 23) & 0xFF
    f = bits & 0x7FFFFF
    if ef == 0xFF:
        return _apply_flags(f != 0, s == 0 and f == 0, s == 1 and f == 0, np.int64(0), oexp, ofrac)
    m = f if ef == 0 else f | (1 << 23)
    e = ACC_EMIN if ef == 0 else ef - ACC_BIAS
    return round_to(s == 1, m, e - ACC_FRAC, oexp, ofrac, obias, ofrac, mode, keep_sub, False)


@njit(parallel=True, cache=True, fastmath=False)
def decode_into(bits, pad, exp_bits, frac_bits, bias, fn_specials, keep_sub, e_out, m_out, n_out, sp_out, w_out):
    """Mirror of :func:`tcsmt.arith.semantics.decode` on a 2-D array of patterns, written into the
    kernel's operand arrays (``e`` = ZERO_E for a zero significand; special code 1 inf, 2 NaN;
    the packed word ``e * 2^32 + neg * 2^31 + m``)."""
    for i in prange(bits.shape[0]):
        _decode_row(bits, i, i, pad, exp_bits, frac_bits, bias, fn_specials, keep_sub, e_out, m_out, n_out, sp_out,
                    w_out)


@njit(cache=True, inline="always")
def _decode_row(bits, i, o, pad, exp_bits, frac_bits, bias, fn_specials, keep_sub, e_out, m_out, n_out, sp_out, w_out):
    """Row i of ``bits`` decoded into row o of the operand arrays (see :func:`decode_into`)."""
    cols = bits.shape[1]
    top = (1 << exp_bits) - 1
    fmask = (1 << frac_bits) - 1
    emin = 1 - bias
    if True:
        for k in range(cols):
            x = np.int64(bits[i, k]) >> pad
            frac = x & fmask
            expf = (x >> frac_bits) & top
            neg = (x >> (frac_bits + exp_bits)) & 1
            if fn_specials:
                nan = expf == top and frac == fmask
                inf = False
            else:
                nan = expf == top and frac != 0
                inf = expf == top and frac == 0
            if expf == 0:
                e = emin
                m = frac if keep_sub else np.int64(0)
            else:
                e = expf - bias
                m = frac + (np.int64(1) << frac_bits)
            if nan or inf:
                m = np.int64(0)
            if m == 0:
                e = ZERO_E
            e_out[o, k] = e
            m_out[o, k] = m
            n_out[o, k] = neg
            sp_out[o, k] = 2 if nan else (1 if inf else 0)
            w_out[o, k] = (np.int64(e) << 32) + (neg << 31) + m
