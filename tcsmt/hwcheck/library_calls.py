"""Library GEMM calls of the cuBLAS plan campaign (tools/device/library_plans.py): the calls, their inputs, and how they run.

Everything a CPU replay needs is numpy-only: ``validation_calls()`` lists the calls (plain dicts with the
fields of the plan contract, /work/notes/plan_contract.md), and ``make_inputs(call, seed)`` rebuilds, bit
for bit, the inputs that the GPU saw, as arrays of bit patterns (unsigned integers of the dtype's width):

``A``        (M, K), or (batch, M, K) for ``bmm``: rows of A, the ``mm`` orientation
``B``        (K, N), or (batch, K, N): columns of B in the ``mm`` orientation (for ``linear`` this is
             ``weight.T``; for ``scaled_mm`` torch receives it column-major, as it requires)
``bias``     (N,) in the output dtype (``addmm``/``linear``/``scaled_mm`` with ``bias``)
``C``        (M, N) in the output dtype (``addmm`` without ``bias``, i.e. ``beta`` * C + ``alpha`` * A @ B)
``scale_a``  float32 patterns, shape () for ``scale = "tensor"``, (M, 1) for ``"row"``
``scale_b``  float32 patterns, shape () for ``"tensor"``, (1, N) for ``"row"``

``run_call(torch, call, inputs, device)`` is the GPU side: it moves the patterns to the device, reinterprets
them with ``Tensor.view(dtype)`` (no value is converted), makes the torch call, and returns the output's bit
patterns.  The ``bias`` flag of an ``addmm`` call means ``torch.addmm(bias, A, B, beta=beta, alpha=alpha)``
with a 1-D ``bias`` (broadcast over rows); without it, ``C`` is the (M, N) matrix that ``beta`` multiplies.

Over 400 lines: the file is shipped alone to bare GPU hosts with ``tools/device/library_plans.py`` (numpy only, no
package import), and the inputs the GPU ran must be rebuilt bit for bit by the CPU replay from this same file, so
every input construction (the separating ones, ``c_cancel`` and ``beta_split``, included) lives here.
"""
from __future__ import annotations

import zlib
from typing import Any

import numpy as np

# dtype name -> (bits, exponent bits, mantissa bits, bias, has inf)
FORMATS: dict[str, tuple[int, int, int, int]] = {
    "float32": (32, 8, 23, 127),
    "float16": (16, 5, 10, 15),
    "bfloat16": (16, 8, 7, 127),
    "float8_e4m3fn": (8, 4, 3, 7),
    "float8_e5m2": (8, 5, 2, 15),
}
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32}
SINT = {8: "int8", 16: "int16", 32: "int32"}
CALL_FIELDS = ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta",
               "tf32", "scale", "fast_accum")
DISTS = ("normal", "wide", "tiny", "cancel", "tf32_exact", "fp32_raw", "smallint", "c_cancel", "beta_split")


def _max_finite_exp(fmt: str) -> int:
    """Largest unbiased exponent of a finite value of ``fmt`` (e4m3fn keeps its top binade, minus NaN)."""
    _bits, e_bits, _m_bits, bias = FORMATS[fmt]
    if fmt == "float8_e4m3fn":
        return (1 << e_bits) - 1 - bias
    return (1 << e_bits) - 2 - bias


def compose(fmt: str, sign: np.ndarray, exp: np.ndarray, mant: np.ndarray) -> np.ndarray:
    """Bit patterns of ``(-1)^sign * 2^exp * (1 + mant / 2^m)`` in ``fmt``; exponents below the normal range
    give the subnormal with the same leading bits shifted out (truncated, a valid pattern in every case).

    ``exp`` must be <= the format's largest finite exponent; ``mant`` in [0, 2^m).
    """
    bits, _e_bits, m_bits, bias = FORMATS[fmt]
    uint = UINT[bits]
    # int32 fields (random_matrix's draws) are used as they are, other integers as int64: the same values either way
    sign, exp, mant = (np.asarray(x) if np.asarray(x).dtype == np.int32 else np.asarray(x, dtype=np.int64)
                       for x in (sign, exp, mant))
    # The fields are put together in the format's own unsigned type, in place: every step (add, shift left,
    # or) commutes with reduction modulo 2^bits, so this is the int64 computation cut to ``bits`` at the end,
    # with a fraction of the memory traffic (the validation replays build 10^9 values).
    field = np.empty(np.broadcast_shapes(sign.shape, exp.shape, mant.shape), dtype=uint)
    np.add(exp, bias, out=field, casting="unsafe")
    field <<= m_bits
    np.bitwise_or(field, mant, out=field, casting="unsafe")
    if exp.size and int(exp.min()) + bias < 1:  # some subnormals (most calls have none: skip the extra passes)
        # subnormal: value = 2^(1-bias) * f / 2^m  with f = (2^m + mant) >> (1 - biased); from 1 - biased = m + 1
        # on every bit is shifted out (exponents below -bias - m give 0 as that one does)
        shift = np.empty(exp.shape, dtype=np.uint8)
        np.subtract(1 - bias, np.maximum(exp, -bias - m_bits), out=shift, casting="unsafe")  # wraps for normals: unused
        sub_f = np.empty(field.shape, dtype=uint)
        np.add(mant, 1 << m_bits, out=sub_f, casting="unsafe")
        np.right_shift(sub_f, shift, out=sub_f)
        np.copyto(field, sub_f, where=exp < 1 - bias)
    if fmt == "float8_e4m3fn":  # 0x7f / 0xff are NaN: keep below
        np.minimum(field, 0x7E, out=field)
    top = sign.astype(uint)
    top <<= bits - 1
    field |= top
    return field


def values(fmt: str, pattern: np.ndarray) -> np.ndarray:
    """float64 values of finite bit patterns of ``fmt`` (for reading probes; exact)."""
    bits, e_bits, m_bits, bias = FORMATS[fmt]
    p = np.asarray(pattern).astype(np.int64)
    sign = (p >> (bits - 1)) & 1
    e = (p >> m_bits) & ((1 << e_bits) - 1)
    m = p & ((1 << m_bits) - 1)
    mag = np.where(e == 0, m * 2.0 ** (1 - bias - m_bits), ((1 << m_bits) + m) * 2.0 ** (e - bias - m_bits))
    return np.where(sign == 1, -mag, mag)


def _rng(call: dict, seed: int, what: str) -> np.random.Generator:
    key = "|".join(str(call.get(f)) for f in CALL_FIELDS) + f"|{call.get('dist')}|{seed}|{what}"
    return np.random.default_rng([seed, zlib.crc32(key.encode())])


def _exp_range(fmt: str, dist: str, K: int) -> tuple[int, int]:
    """Exponent range of the random values of ``dist`` in ``fmt`` (chosen so fp32 sums stay finite)."""
    top = _max_finite_exp(fmt)
    _bits, _e_bits, m_bits, bias = FORMATS[fmt]
    low = 1 - bias
    if dist in ("normal", "cancel", "tf32_exact", "fp32_raw", "c_cancel"):
        return (-3, 1)
    if dist == "wide":
        if fmt in ("float32", "bfloat16"):
            return (-40, 40)
        return (low, top - 1)
    if dist == "tiny":  # at the subnormal boundary of the input format (products far below fp32's)
        return (low - m_bits, low + 2)
    if dist == "smallint":
        return (0, 3)
    raise ValueError(f"unknown dist {dist!r}")


def random_matrix(fmt: str, shape: tuple[int, ...], dist: str, rng: np.random.Generator, K: int) -> np.ndarray:
    """Random bit patterns of ``fmt`` for ``dist`` (see DISTS)."""
    _bits, _e_bits, m_bits, _bias = FORMATS[fmt]
    lo, hi = _exp_range(fmt, dist, K)
    # int32 draws: every range here is below 2^32, where numpy's bounded integers take one 32-bit draw per value
    # whatever the output type, so these are the int64 default's values (the GPU's inputs), written in half the
    # memory and about three times faster (the replays draw 10^9 of them)
    sign = rng.integers(0, 2, size=shape, dtype=np.int32)
    exp = rng.integers(lo, hi + 1, size=shape, dtype=np.int32)
    mant = rng.integers(0, 1 << m_bits, size=shape, dtype=np.int32)
    if dist == "tf32_exact" and fmt == "float32":
        mant = mant & ~((1 << 13) - 1)  # low 13 bits zero: already a tf32 value
    if dist == "smallint":  # small integers: exact sums, every plan agrees
        mant = mant & ~((1 << max(m_bits - 2, 0)) - 1)
    return compose(fmt, sign, exp, mant)


C_CANCEL_LEAD = 32
"""``c_cancel``: k's of the lead (each product 2^3 * 2^3 = 2^6: the lead sums to 2^11 exactly)."""
C_CANCEL_LEAD_EXP = 11
C_CANCEL_TAIL = 64
"""``c_cancel``: k's of each small run (after the lead, and the last ones of K)."""


def _power_of_two(fmt: str, sign: int, exp: int) -> np.ndarray:
    """The pattern of (-1)^sign * 2^exp in ``fmt`` (a 0-d array)."""
    return compose(fmt, np.array(sign), np.array(exp), np.array(0))


def _c_cancel_operands(a_fmt: str, b_fmt: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...],
                       rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A and B of the ``c_cancel`` inputs (K >= 2 * C_CANCEL_LEAD + 2 * C_CANCEL_TAIL): the first
    :data:`C_CANCEL_LEAD` k's give products of 2^6 each (a lead of 2^11, exact in every chain), the next
    :data:`C_CANCEL_TAIL` and the last :data:`C_CANCEL_TAIL` k's small products (A 2^-14 .. 2^-12, B 2^-3 .. 2^1,
    random significands: bits far below the fp32 grid of 2^11, which is 2^-12), every other k a zero product.
    The addend (C, or the 1-D bias) is -2^11, so the exact output is the small runs' sum: an epilogue that adds C
    after the sum was held in fp32 (near 2^11) rounds them to 2^-12, one that starts the first slice's K-chain from
    C keeps them (the accumulator is near 0 when they come), and one that rounds the sum to the output format
    first gives 0."""
    K = a_shape[-1]
    lead, tail = C_CANCEL_LEAD, C_CANCEL_TAIL
    if K < 2 * (lead + tail):
        raise ValueError(f"c_cancel needs K >= {2 * (lead + tail)}, not {K}")
    a_bits, b_bits = FORMATS[a_fmt][0], FORMATS[b_fmt][0]
    A = np.zeros(a_shape, dtype=UINT[a_bits])
    B = np.zeros(b_shape, dtype=UINT[b_bits])
    A[..., :lead] = _power_of_two(a_fmt, 0, 3)
    B[..., :lead, :] = _power_of_two(b_fmt, 0, 3)
    for ks in (slice(lead, lead + tail), slice(K - tail, K)):
        sa = A[..., ks].shape
        sb = B[..., ks, :].shape
        A[..., ks] = compose(a_fmt, rng.integers(0, 2, size=sa), rng.integers(-14, -11, size=sa),
                             rng.integers(0, 1 << FORMATS[a_fmt][2], size=sa)).astype(UINT[a_bits])
        B[..., ks, :] = compose(b_fmt, rng.integers(0, 2, size=sb), rng.integers(-3, 2, size=sb),
                                rng.integers(0, 1 << FORMATS[b_fmt][2], size=sb)).astype(UINT[b_bits])
    return A, B


BETA_SPLIT_EXP = {"bfloat16": 0, "float16": 12}
"""``beta_split``: the exponent of each column's C value (fp16's keeps beta * C and its rounding error in the normal
range; bf16's is fp32's own)."""
BETA_SPLIT_PIECES = 3
"""``beta_split``: the k's that carry -RN32(beta * c) (3 x 8 significant bits for bf16, 3 x 11 for fp16 hold its 24)."""


def _truncated(v: np.ndarray, bits: int) -> np.ndarray:
    """``v`` (float64) cut to its ``bits`` leading significant bits, toward zero (0 stays 0)."""
    m, e = np.frexp(v)
    return np.ldexp(np.trunc(m * 2.0 ** bits), e - bits)


def _patterns(fmt: str, v: np.ndarray) -> np.ndarray:
    """Bit patterns of float64 values that ``fmt`` (bf16 or fp16) holds exactly; ValueError where one does not."""
    if fmt == "bfloat16":
        f32 = v.astype(np.float32)
        pat = (f32.view(np.uint32) >> 16).astype(np.uint16)
        back = (pat.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    elif fmt == "float16":
        pat = v.astype(np.float16).view(np.uint16)
        back = pat.view(np.float16).astype(np.float64)
    else:
        raise ValueError(f"beta_split takes bf16 or fp16 operands, not {fmt}")
    if not np.array_equal(back, v):
        raise ValueError(f"beta_split: a piece is not exact in {fmt}")
    return pat


def _beta_split_inputs(call: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``beta_split`` inputs of an ``addmm`` with beta not 0 or 1 (bf16 or fp16, no batch): output (i, j) is y + beta *
    c with y = -RN32(beta * c) exactly, so the two readings of the epilogue give other outputs wherever beta * c is not
    an fp32 number.

    Column j draws c_j (random sign and significand, exponent :data:`BETA_SPLIT_EXP`); b = RN32(beta) (what cuBLAS
    receives) and r_j = RN32(b * c_j) (the exact product has at most 35 bits: float64 holds it, and numpy's float32
    conversion rounds it to nearest even).  B[0..2, j] = -(the leading 8 (fp16: 11) bits of r_j, the next ones, the
    rest): three exact pieces; A[i, 0..2] = s_i = 2^(i mod 3) (1 for a 1-D bias) and every other k is 0, so every
    chain sums y_ij = -s_i r_j exactly (three products, 24 significant bits).  C[i, j] = s_i c_j (the bias: c_j).  Then
    FFMA(beta, C, y) = RN32(s_i (b c_j - r_j)), the rounding error of beta * C, and FFMA(1, y, RN32(beta * C)) = +0."""
    M, N, K = call["M"], call["N"], call["K"]
    a_fmt, b_fmt, out_fmt = call["a_dtype"], call["b_dtype"], call["out_dtype"]
    if call["op"] != "addmm" or call.get("batch", 1) != 1 or K < BETA_SPLIT_PIECES or \
            len({a_fmt, b_fmt, out_fmt}) != 1 or a_fmt not in BETA_SPLIT_EXP or float(call["beta"]) in (0.0, 1.0):
        raise ValueError("beta_split takes addmm calls of one 16-bit format with K >= 3 and beta not 0 or 1")
    bits = FORMATS[a_fmt][2] + 1
    c = compose(out_fmt, rng.integers(0, 2, size=N), np.full(N, BETA_SPLIT_EXP[out_fmt]),
                rng.integers(0, 1 << FORMATS[out_fmt][2], size=N))
    c_val = values(out_fmt, c)
    r = (np.float64(np.float32(call["beta"])) * c_val).astype(np.float32).astype(np.float64)
    pieces, rest = [], r
    for _ in range(BETA_SPLIT_PIECES - 1):
        pieces.append(_truncated(rest, bits))
        rest = rest - pieces[-1]
    pieces.append(rest)
    uint = UINT[FORMATS[a_fmt][0]]
    B = np.zeros((K, N), dtype=uint)
    for k, piece in enumerate(pieces):
        B[k] = _patterns(b_fmt, -piece)
    bias = bool(call.get("bias"))
    scale = np.ones(M) if bias else 2.0 ** (np.arange(M) % 3)
    A = np.zeros((M, K), dtype=uint)
    A[:, :BETA_SPLIT_PIECES] = _patterns(a_fmt, scale)[:, None]
    if bias:
        return {"A": A, "B": B, "bias": c.astype(uint)}
    return {"A": A, "B": B, "C": _patterns(out_fmt, scale[:, None] * c_val[None, :])}


def make_inputs(call: dict, seed: int) -> dict[str, np.ndarray]:
    """The inputs of one validation call as bit-pattern arrays (numpy only; deterministic in call and seed)."""
    op, M, N, K, batch = call["op"], call["M"], call["N"], call["K"], call.get("batch", 1)
    dist = call["dist"]
    a_fmt, b_fmt, out_fmt = call["a_dtype"], call["b_dtype"], call["out_dtype"]
    lead = (batch,) if op == "bmm" else ()
    rng = _rng(call, seed, "AB")
    if dist == "beta_split":
        return _beta_split_inputs(call, rng)
    if dist == "c_cancel":  # zeros but the lead and the two small runs; the addend -2^11
        A, B = _c_cancel_operands(a_fmt, b_fmt, (*lead, M, K), (*lead, K, N), rng)
        res = {"A": A, "B": B}
        minus = _power_of_two(out_fmt, 1, C_CANCEL_LEAD_EXP)
        if op in ("addmm", "linear", "scaled_mm") and call.get("bias"):
            res["bias"] = np.full((N,), minus, dtype=minus.dtype)
        elif op == "addmm":
            res["C"] = np.full((M, N), minus, dtype=minus.dtype)
        return res
    A = random_matrix(a_fmt, (*lead, M, K), dist, rng, K)
    B = random_matrix(b_fmt, (*lead, K, N), dist, rng, K)
    if dist == "cancel" and K >= 2:
        # second half of each dot product cancels the first (B negated), a few terms perturbed
        h = K // 2
        sbit = np.array(1 << (FORMATS[b_fmt][0] - 1), dtype=UINT[FORMATS[b_fmt][0]])
        A[..., h:2 * h] = A[..., :h]
        B[..., h:2 * h, :] = B[..., :h, :] ^ sbit
        pert = rng.integers(0, K, size=max(1, K // 64))
        B[..., pert, :] = random_matrix(b_fmt, (*lead, len(pert), N), "normal", rng, K)
    out: dict[str, np.ndarray] = {"A": A, "B": B}
    if op in ("addmm", "linear", "scaled_mm") and call.get("bias"):
        out["bias"] = random_matrix(out_fmt, (N,), "normal", _rng(call, seed, "bias"), K)
    if op == "addmm" and not call.get("bias"):
        out["C"] = random_matrix(out_fmt, (M, N), "normal", _rng(call, seed, "C"), K)
    if op == "scaled_mm":
        r = _rng(call, seed, "scale")
        shape_a, shape_b = ((), ()) if call["scale"] == "tensor" else ((M, 1), (1, N))
        # positive fp32 scales with random significands around 2^-4 .. 2^2
        out["scale_a"] = compose("float32", np.zeros(shape_a, int), r.integers(-4, 3, size=shape_a),
                                 r.integers(0, 1 << 23, size=shape_a))
        out["scale_b"] = compose("float32", np.zeros(shape_b, int), r.integers(-4, 3, size=shape_b),
                                 r.integers(0, 1 << 23, size=shape_b))
    return out


def sample_positions(call: dict, seed: int, n: int = 256) -> list[tuple[int, ...]]:
    """The output positions recorded for a call: (0,0), the last row and column, and random ones."""
    M, N = call["M"], call["N"]
    rng = _rng(call, seed, "samples")
    if M * N <= n + 64:
        chosen: set[tuple[int, int]] = {(i, j) for i in range(M) for j in range(N)}
    else:
        chosen = {(0, 0), (M - 1, N - 1), (0, N - 1), (M - 1, 0)}
        for j in rng.integers(0, N, size=8):
            chosen.add((M - 1, int(j)))
        for i in rng.integers(0, M, size=8):
            chosen.add((int(i), N - 1))
        while len(chosen) < n:
            chosen.add((int(rng.integers(0, M)), int(rng.integers(0, N))))
    pos = sorted(chosen)
    if call["op"] == "bmm":
        b = call["batch"]
        first_last: list[tuple[int, ...]] = [(t, i, j) for t in sorted({0, b - 1}) for (i, j) in pos]
        return first_last + \
               [(int(t), i, j) for t in range(1, b - 1) for (i, j) in pos[:: max(1, len(pos) // 16)]]
    return list(pos)


def validation_calls() -> list[dict[str, Any]]:
    """The validation calls (evidence/h100_library_validation.json.gz; deterministic list; each with its ``seed`` and ``dist``)."""
    calls: list[dict[str, Any]] = []

    def add(op, M, N, K, a, b, out, dist, *, batch=1, bias=False, alpha=1.0, beta=0.0, tf32=False,
            scale=None, fast_accum=False):
        calls.append({"op": op, "M": M, "N": N, "K": K, "batch": batch, "a_dtype": a, "b_dtype": b,
                      "out_dtype": out, "bias": bias, "alpha": alpha, "beta": beta, "tf32": tf32,
                      "scale": scale, "fast_accum": fast_accum, "dist": dist, "seed": 1000 + len(calls)})

    # shapes: square, skinny, split-K (small M*N, long K), odd sizes
    shapes = [(256, 256, 256), (1024, 1024, 1024), (64, 64, 4096), (128, 128, 4096), (16, 4096, 4096),
              (1, 4096, 4096), (4096, 1, 2048), (32, 32, 8192), (100, 300, 1000), (7, 64, 3000),
              (256, 256, 8192), (64, 128, 16384)]
    halves = [("bfloat16", "bfloat16"), ("float16", "float16"), ("bfloat16", "float32"), ("float16", "float32")]
    dists = ["normal", "wide", "tiny", "cancel"]
    for si, (M, N, K) in enumerate(shapes):
        for hi, (a, out) in enumerate(halves):
            # every shape and dtype pair with two distributions, rotating through all four
            for d in (dists[(si + hi) % 4], dists[(si + hi + 2) % 4]):
                if out == "float16" and d == "wide":
                    d = "normal"
                add("mm", M, N, K, a, a, out, d)
    # tf32: values already tf32, and raw fp32 values (shows the conversion); plain fp32 too
    for (M, N, K) in [(256, 256, 256), (64, 64, 4096), (16, 4096, 4096), (1024, 1024, 1024), (100, 300, 1000),
                      (32, 32, 8192)]:
        for d in ("tf32_exact", "fp32_raw", "wide", "tiny"):
            add("mm", M, N, K, "float32", "float32", "float32", d, tf32=True)
        add("mm", M, N, K, "float32", "float32", "float32", "fp32_raw", tf32=False)
    # bmm
    for (bt, M, N, K) in [(4, 64, 64, 4096), (8, 128, 128, 512), (3, 100, 50, 2000), (2, 16, 4096, 4096)]:
        for a, out in halves:
            add("bmm", M, N, K, a, a, out, "normal", batch=bt)
        add("bmm", M, N, K, "float32", "float32", "float32", "tf32_exact", batch=bt, tf32=True)
    # addmm with 1-D bias (beta = alpha = 1: the cuBLASLt bias epilogue), with alpha/beta and a full C
    for (M, N, K) in [(256, 256, 256), (64, 64, 4096), (16, 4096, 4096), (1024, 512, 2048)]:
        for a, out in halves[:2]:
            add("addmm", M, N, K, a, a, out, "normal", bias=True)
            add("addmm", M, N, K, a, a, out, "wide" if out != "float16" else "normal", bias=True, alpha=0.5,
                beta=2.0)
            add("addmm", M, N, K, a, a, out, "normal", alpha=1.5, beta=0.75)
        add("addmm", M, N, K, "float32", "float32", "float32", "tf32_exact", bias=True, tf32=True)
        add("addmm", M, N, K, "float32", "float32", "float32", "fp32_raw", alpha=0.5, beta=-1.25, tf32=True)
    # linear (x @ weight.T + bias)
    for (M, N, K) in [(256, 1024, 1024), (8, 4096, 4096), (64, 64, 4096), (1000, 300, 700)]:
        for a, _ in halves[:2]:
            add("linear", M, N, K, a, a, a, "normal", bias=True)
            add("linear", M, N, K, a, a, a, "wide" if a == "bfloat16" else "tiny", bias=False)
    # scaled_mm: e4m3 x e4m3 and e4m3 x e5m2, per-tensor and row-wise, fast and slow, fp32 and bf16 out
    fp8_shapes = [(256, 256, 256), (64, 64, 4096), (128, 128, 4096), (16, 4096, 4096), (1024, 1024, 1024),
                  (32, 64, 8192), (48, 160, 1040)]
    for si, (M, N, K) in enumerate(fp8_shapes):
        for b8 in ("float8_e4m3fn", "float8_e5m2"):
            for scale in ("tensor", "row"):
                for out in ("float32", "bfloat16"):
                    for fast in (False, True):
                        d = ("normal", "wide", "tiny", "cancel")[(si + fast + 2 * (out == "bfloat16")) % 4]
                        add("scaled_mm", M, N, K, "float8_e4m3fn", b8, out, d, scale=scale, fast_accum=fast)
    for (M, N, K) in [(64, 64, 4096), (256, 256, 1024)]:
        add("scaled_mm", M, N, K, "float8_e4m3fn", "float8_e4m3fn", "bfloat16", "normal", scale="tensor",
            bias=True)
    return calls


# ----------------------------------------------------------------------------------------------------------
# GPU side (torch imported by the caller)

def to_device(torch, bits: np.ndarray, fmt: str, device):
    """A torch tensor of dtype ``fmt`` on ``device`` holding exactly the patterns ``bits`` (no conversion)."""
    width = FORMATS[fmt][0]
    ints = torch.from_numpy(np.ascontiguousarray(bits).view(SINT[width]))
    return ints.to(device).view(getattr(torch, fmt))


def out_bits(torch, t) -> np.ndarray:
    """The bit patterns of a torch tensor (unsigned integers of its width)."""
    width = t.element_size() * 8
    return t.contiguous().view(getattr(torch, SINT[width])).cpu().numpy().view(UINT[width])


def build_tensors(torch, call: dict, inputs: dict, device) -> dict:
    """Torch tensors of a call's inputs, in the layouts the call uses (``linear``: weight (N, K) contiguous;
    ``scaled_mm``: B column-major; others row-major).  The recorder's layout fields (tools/device/record_plans.py
    ``FIELDS``), where a call has them: ``a_t``: A is the transposed view of a contiguous (K, M) tensor; ``b_t``:
    B is the transposed view of a contiguous (N, K) tensor (what ``linear`` and ``scaled_mm`` always use)."""
    t: dict = {}

    def transposed(x: np.ndarray, fmt: str):
        return to_device(torch, np.ascontiguousarray(np.swapaxes(x, -1, -2)), fmt, device).transpose(-1, -2)

    A = inputs["A"]
    t["A"] = transposed(A, call["a_dtype"]) if call.get("a_t") else to_device(torch, A, call["a_dtype"], device)
    Bb = inputs["B"]
    if call["op"] in ("linear", "scaled_mm"):
        # weight / column-major B: store B^T contiguous, hand torch its transpose view where needed
        t["Bt"] = to_device(torch, np.ascontiguousarray(np.swapaxes(Bb, -1, -2)), call["b_dtype"], device)
    elif call.get("b_t"):
        t["B"] = transposed(Bb, call["b_dtype"])
    else:
        t["B"] = to_device(torch, Bb, call["b_dtype"], device)
    for k in ("bias", "C"):
        if k in inputs:
            t[k] = to_device(torch, inputs[k], call["out_dtype"], device)
    for k in ("scale_a", "scale_b"):
        if k in inputs:
            t[k] = to_device(torch, inputs[k], "float32", device)
    return t


def call_torch(torch, call: dict, t: dict):
    """Make the torch call of ``call`` on tensors ``t`` (from ``build_tensors``); returns the output tensor."""
    op = call["op"]
    out_dt = getattr(torch, call["out_dtype"])
    in_dt = getattr(torch, call["a_dtype"])
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = bool(call.get("tf32"))
    try:
        if op == "mm":
            if out_dt != in_dt:
                return torch.mm(t["A"], t["B"], out_dtype=out_dt)
            return torch.mm(t["A"], t["B"])
        if op == "bmm":
            if out_dt != in_dt:
                return torch.bmm(t["A"], t["B"], out_dtype=out_dt)
            return torch.bmm(t["A"], t["B"])
        if op == "addmm":
            C = t["bias"] if call.get("bias") else t["C"]
            kw = {"beta": call["beta"], "alpha": call["alpha"]}
            if out_dt != in_dt:
                return torch.addmm(C, t["A"], t["B"], out_dtype=out_dt, **kw)
            return torch.addmm(C, t["A"], t["B"], **kw)
        if op == "linear":
            return torch.nn.functional.linear(t["A"], t["Bt"], t.get("bias"))
        if op == "scaled_mm":
            r = torch._scaled_mm(t["A"], t["Bt"].t(), scale_a=t["scale_a"], scale_b=t["scale_b"],
                                 bias=t.get("bias"), out_dtype=out_dt, use_fast_accum=bool(call["fast_accum"]))
            return r[0] if isinstance(r, tuple) else r
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    raise ValueError(f"unknown op {op!r}")


def run_call(torch, call: dict, inputs: dict, device) -> np.ndarray:
    """Output bit patterns of one call on ``device``."""
    return out_bits(torch, call_torch(torch, call, build_tensors(torch, call, inputs, device)))
