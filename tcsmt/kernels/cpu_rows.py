"""Compiled (numba) kernel of ``tcsmt.simulate``: one dot product per row, each row with its own C, read straight
from the operands' bit patterns.

A third implementation of the chain of :func:`tcsmt.arith.semantics.dot` (after the numpy semantics and the
tiled GEMM of :mod:`tcsmt.kernels.cpu_numba`), for the parameters :func:`tcsmt.kernels.cpu.check_supported`
accepts, written so that the compiler vectorises the K direction of every block: per row and block,

1. one branch-free pass over the block's K decodes the A and B patterns (the steps of
   :func:`tcsmt.arith.semantics.decode`, from the format's fields), forms each exact product (integer
   significand product, exponent sum e(a) + e(b), sign) and reduces the largest product exponent, the OR of
   the special codes and the signs of the products into scalars (vector max/and/or reductions);
2. C (the row's C, or the previous block's result) is decoded and E, the window's LSB and C's term follow
   (:func:`tcsmt.arith.semantics.block_sum`);
3. a second branch-free pass shifts each product into the window (sign-magnitude truncation or
   two's-complement floor) and sums (a vector add reduction);
4. the sum is rounded once (:func:`tcsmt.arith.semantics.sum_and_round`, ``lzcnt`` for the leading bit),
   the zero-sign rule applied, and the rare row with an inf or NaN operand recomputes its flags in a
   scalar loop (:func:`tcsmt.arith.semantics.merge_flags`, :func:`tcsmt.arith.semantics.apply_flags`).

Per row there is no allocation and no Python: a call runs every row of the input on one thread
(``nogil``), or cut in slices over threads by :func:`tcsmt.kernels.cpu.pairs_of_patterns`.  Promotion after
each instruction (c_mode "after_instr") and the conversion to a narrower output format reuse the scalar
mirrors of :mod:`tcsmt.kernels.cpu_numba`.  ``tests/test_gemm_kernel.py`` compares this kernel with the numpy
semantics bit for bit on every instruction path it compiles.
"""
from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import leading_zeros

from tcsmt.kernels.cpu_numba import (
    ACC_BIAS,
    ACC_EMIN,
    ACC_FRAC,
    CFG_AFTER_INSTR,
    CFG_BLOCK_FRAC,
    CFG_BLOCK_K,
    CFG_BLOCK_ROUND,
    CFG_C_ROUND,
    CFG_F,
    CFG_F2,
    CFG_FLOOR,
    CFG_HAS_FLOOR,
    CFG_INSTR_K,
    CFG_OVF_INF,
    CFG_SUB_C,
    CFG_SUB_OUT,
    CFG_TRUNC_ALIGN,
    CFG_ZERO_SIGN,
    RD,
    RNE,
    RU,
    RZ,
    ZERO_E,
    _apply_flags,
    _to_output,
    add_rounded,
)


@njit(inline="always", cache=True, nogil=True, boundscheck=False, error_model="numpy")
def _decode(x, fmt, keep_sub):
    """:func:`tcsmt.arith.semantics.decode` of one pattern for the flags: (significand, sign, special) with the
    special 1 for inf, 2 for NaN.  ``fmt``: (pad, exp_bits, frac_bits, bias, fn specials)."""
    x = np.int64(x) >> fmt[0]
    expb = fmt[1]
    fracb = fmt[2]
    fm = (np.int64(1) << fracb) - 1
    top = (np.int64(1) << expb) - 1
    frac = x & fm
    expf = (x >> fracb) & top
    neg = (x >> (fracb + expb)) & 1
    if fmt[4] != 0:
        nan = expf == top and frac == fm
        inf = False
    else:
        nan = expf == top and frac != 0
        inf = expf == top and frac == 0
    if nan or inf:
        m = np.int64(0)
    elif expf == 0:
        m = frac if keep_sub else np.int64(0)
    else:
        m = frac | (fm + 1)
    return m, neg, 2 if nan else (1 if inf else 0)


@njit(inline="always", cache=True, nogil=True, boundscheck=False, error_model="numpy")
def _pass1(ar, br, te, tm, tn, apad, aexp, afrac, abias, afn, bpad, bexp, bfracb, bbias, bfn, keep_sub, trunc):
    """Pass 1 of a block (see the module docstring) over the block's patterns ``ar``, ``br``: each product's
    exponent sum (:data:`ZERO_E` twice for a zero product), significand (signed for the floor) and sign into
    ``te``, ``tm``, ``tn``; returns the largest exponent sum, whether an operand is inf or NaN, the AND of the
    signs and the OR of the significands.  Formats of at most 16 significand bits (check_supported)."""
    emax = np.int64(ZERO_E) * 4
    spc = np.int64(0)
    alln = np.int64(1)
    nz = np.int64(0)
    afm = (np.int64(1) << afrac) - 1
    atop = (np.int64(1) << aexp) - 1
    bfm = (np.int64(1) << bfracb) - 1
    btop = (np.int64(1) << bexp) - 1
    for k in range(ar.shape[0]):
        xa = np.int64(ar[k]) >> apad
        xb = np.int64(br[k]) >> bpad
        fa = xa & afm
        fb = xb & bfm
        ga = (xa >> afrac) & atop
        gb = (xb >> bfracb) & btop
        if afn:
            spa = (ga == atop) & (fa == afm)
        else:
            spa = ga == atop
        if bfn:
            spb = (gb == btop) & (fb == bfm)
        else:
            spb = gb == btop
        if keep_sub:
            ma = fa | (np.int64(ga != 0) << afrac)
            mb = fb | (np.int64(gb != 0) << bfracb)
        else:
            ma = fa | (afm + 1) if ga != 0 else np.int64(0)
            mb = fb | (bfm + 1) if gb != 0 else np.int64(0)
        mag = (ma & 0xFFFF) * (mb & 0xFFFF)
        sp = spa | spb
        mag = np.int64(0) if sp else mag
        t = max(ga, np.int64(1)) - abias + max(gb, np.int64(1)) - bbias
        t = np.int64(ZERO_E) * 2 if mag == 0 else t
        ng = ((xa >> (afrac + aexp)) ^ (xb >> (bfracb + bexp))) & 1
        emax = max(emax, t)
        spc |= sp
        alln &= ng
        nz |= mag
        te[k] = t
        tm[k] = mag if trunc else (mag ^ -ng) + ng
        tn[k] = ng
    return emax, spc, alln, nz


ROWS = 64
"""Rows per chunk: the chunk's products (three int64 per product of a block) and per-row values stay in L1."""


@njit(inline="always", cache=True, nogil=True, boundscheck=False, error_model="numpy")
def _round_block(S, L, anynz, alln, bfrac, bround, sub_out, ovf_inf, zero_rule):
    """The block sum S * 2^L rounded to fp32 with ``bfrac`` fraction bits (:func:`_round_acc` and the zero-sign
    rules of :func:`tcsmt.arith.semantics.sum_and_round`), branch-free so that rows vectorise."""
    neg = S < 0
    mag = -S if neg else S
    m = 63 - np.int64(leading_zeros(np.uint64(mag)))  # type: ignore[call-arg]  # a numba intrinsic: typed by numba, not by its Python signature
    e_eff = max(L + m, np.int64(ACC_EMIN))
    sh = e_eff - bfrac - L
    shl = min(max(-sh, np.int64(0)), np.int64(63))
    shr = min(max(sh, np.int64(0)), np.int64(63))
    q = (mag << shl) >> shr
    s1 = max(shr - 1, np.int64(0))
    half = (sh > 0) & (((mag >> s1) & 1) != 0)
    sticky = (sh > 1) & ((mag & ((np.int64(1) << s1) - 1)) != 0)
    if bround == RNE:
        inc = half & (sticky | ((q & 1) != 0))
    elif bround == RZ:
        inc = False
    elif bround == RU:
        inc = (half | sticky) & (not neg)
    else:
        inc = (half | sticky) & neg
    q += np.int64(inc)
    carry = q >> (bfrac + 1)
    q >>= carry
    e_eff += carry
    pad = ACC_FRAC - bfrac
    normal = q >= (np.int64(1) << bfrac)
    word = ((e_eff + ACC_BIAS) << ACC_FRAC) | ((q - (np.int64(1) << bfrac)) << pad)
    sub = (q << pad) if sub_out else np.int64(0)
    word = word if normal else sub
    to_inf = (bround == RNE) | ovf_inf | ((bround == RU) & (not neg)) | ((bround == RD) & neg)
    big = np.int64(0x7F800000) if to_inf else np.int64(0x7F000000) | (((np.int64(1) << bfrac) - 1) << pad)
    word = big if (normal & (e_eff > 127)) else word
    bits = (np.int64(neg & ((zero_rule == 0) | (word != 0))) << 31) | word  # a zero from a non-zero sum: +0
    zneg = (bround == RD) if anynz else alln
    zbits = np.int64(1) << 31 if (zneg & (zero_rule != 2)) else np.int64(0)
    return zbits if S == 0 else bits


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def pairs_rows(a_bits, a_fmt, b_bits, b_fmt, keep_sub, cfg, cvec, out, r0, r1):
    """out[i] = the chain of row i of A with row i of B (B's column i) and C = cvec[i] (fp32 patterns), in the
    output format's patterns, for rows r0 <= i < r1.  ``a_fmt``/``b_fmt``: (pad, exp_bits, frac_bits, bias,
    fn specials).  Rows go in chunks of :data:`ROWS`: per block, the products of each row in one pass over K
    (:func:`_pass1`), C, E and C's term of every row in one pass over the rows, the window sums of each row
    over K, the rounding of every row in one pass over the rows."""
    K = a_bits.shape[1]
    F = cfg[CFG_F]
    f2 = cfg[CFG_F2]
    floor = cfg[CFG_FLOOR] if cfg[CFG_HAS_FLOOR] != 0 else np.int64(ZERO_E) * 4
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
    smax_p = max(np.int64(0), F - f2)
    smax_c = max(np.int64(0), F - ACC_FRAC)
    apad, aexp, afrac, abias, afn = a_fmt[0], a_fmt[1], a_fmt[2], a_fmt[3], a_fmt[4] != 0
    bpad, bexp, bfracb, bbias, bfn = b_fmt[0], b_fmt[1], b_fmt[2], b_fmt[3], b_fmt[4] != 0
    fast = keep_sub and trunc and not afn and not bfn  # the common case, its constants folded into the loop
    bw = min(block_k, K)
    te = np.empty((ROWS, bw), np.int64)  # per product of the current block: exponent sum, significand, sign
    tm = np.empty((ROWS, bw), np.int64)
    tn = np.empty((ROWS, bw), np.int64)
    emax = np.empty(ROWS, np.int64)  # per row of the chunk
    spc = np.empty(ROWS, np.int64)
    alln = np.empty(ROWS, np.int64)
    nz = np.empty(ROWS, np.int64)
    lsb = np.empty(ROWS, np.int64)
    ssum = np.empty(ROWS, np.int64)
    cur = np.empty(ROWS, np.int64)
    held = np.empty(ROWS, np.int64)
    for c0 in range(r0, r1, ROWS):
        h = min(ROWS, r1 - c0)
        for j in range(h):
            cur[j] = cvec[c0 + j]
        for i0 in range(0, K, instr_k):
            i1 = min(K, i0 + instr_k)
            if after_instr:
                for j in range(h):
                    held[j] = cur[j]
                    cur[j] = 0
            for k0 in range(i0, i1, block_k):
                k1 = min(i1, k0 + block_k)
                # pass 1, row by row: decode, exact products, their largest exponent, flags
                for j in range(h):
                    ar = a_bits[c0 + j, k0:k1]
                    br = b_bits[c0 + j, k0:k1]
                    if fast:
                        r = _pass1(ar, br, te[j], tm[j], tn[j], apad, aexp, afrac, abias, False,
                                   bpad, bexp, bfracb, bbias, False, True, True)
                    else:
                        r = _pass1(ar, br, te[j], tm[j], tn[j], apad, aexp, afrac, abias, afn,
                                   bpad, bexp, bfracb, bbias, bfn, keep_sub, trunc)
                    emax[j], spc[j], alln[j], nz[j] = r
                # every row: C (the previous result; semantics.decode, keep = subnormal_c), E, the window's
                # LSB and C's term
                for j in range(h):
                    c = cur[j]
                    cs = (c >> 31) & 1
                    cef = (c >> 23) & 0xFF
                    cf = c & 0x7FFFFF
                    cm = cf | (1 << 23) if cef != 0 else (cf if sub_c else np.int64(0))
                    cm = np.int64(0) if cef == 0xFF else cm
                    ce = max(cef, np.int64(1)) - ACC_BIAS
                    E = max(emax[j], ce) if cm != 0 else emax[j]
                    L = max(E, floor) - F
                    lsb[j] = L
                    dsh = min(max(smax_c + ACC_FRAC + L - ce, np.int64(0)), np.int64(63))
                    cv = -cm if (cs != 0) & (not trunc) else cm
                    v = (cv << smax_c) >> dsh
                    ssum[j] = -v if (cs != 0) & trunc else v
                    nz[j] |= cm
                    alln[j] &= cs
                    spc[j] |= np.int64(cef == 0xFF)
                # pass 2, row by row: every product in the window (d <= smax_p for every non-zero product, so
                # (x << smax_p) >> (smax_p - d) is x << d or x >> -d, floored), summed
                for j in range(h):
                    top = smax_p + f2 + lsb[j]
                    S = ssum[j]
                    if trunc:
                        for k in range(k1 - k0):
                            v = (tm[j, k] << smax_p) >> min(top - te[j, k], np.int64(63))
                            S += (v ^ -tn[j, k]) + tn[j, k]
                    else:
                        for k in range(k1 - k0):
                            S += (tm[j, k] << smax_p) >> min(top - te[j, k], np.int64(63))
                    ssum[j] = S
                # every row: the rounding; then the rare row with an inf or NaN
                for j in range(h):
                    held_c = cur[j]
                    cur[j] = _round_block(ssum[j], lsb[j], nz[j] != 0, alln[j] != 0, bfrac, bround, sub_out,
                                          ovf_inf, zero_rule)
                    lsb[j] = held_c
                for j in range(h):
                    if spc[j] != 0:
                        cur[j] = _block_flags(a_bits, b_bits, c0 + j, k0, k1, a_fmt, b_fmt, keep_sub, lsb[j], cur[j])
            if after_instr:
                for j in range(h):
                    cur[j] = add_rounded(cur[j], held[j], sub_c, cround, sub_out, ovf_inf, zero_rule)
        for j in range(h):
            out[c0 + j] = _to_output(cur[j], cfg)


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def _block_flags(a_bits, b_bits, i, k0, k1, a_fmt, b_fmt, keep_sub, c, bits):
    """The block's result after :func:`tcsmt.arith.semantics.merge_flags` and
    :func:`~tcsmt.arith.semantics.apply_flags`: NaN from a NaN operand or inf x 0, inf of the products'
    signs, C's own inf or NaN."""
    nan = False
    pinf = False
    ninf = False
    if ((c >> 23) & 0xFF) == 0xFF:
        if (c & 0x7FFFFF) != 0:
            nan = True
        elif (c >> 31) & 1:
            ninf = True
        else:
            pinf = True
    for k in range(k0, k1):
        ma, na, sa = _decode(a_bits[i, k], a_fmt, keep_sub)
        mb, nb, sb = _decode(b_bits[i, k], b_fmt, keep_sub)
        a_fz = ma == 0 and sa == 0
        b_fz = mb == 0 and sb == 0
        pn = sa == 2 or sb == 2 or (sa == 1 and b_fz) or (sb == 1 and a_fz)
        if pn:
            nan = True
        elif sa == 1 or sb == 1:
            if na ^ nb:
                ninf = True
            else:
                pinf = True
    return _apply_flags(nan, pinf, ninf, bits, 8, ACC_FRAC)
