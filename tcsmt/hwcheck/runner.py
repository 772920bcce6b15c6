"""Python API of the hardware check: run dot products on a device, check fragment layouts.

``run_dot(path, a_bits, b_bits, c_bits)`` computes independent dot products
``d_i = sum_k a[i, k] * b[i, k] + c_i`` with one matrix instruction per
``instr_k`` products, chained in k order through the accumulator.  Each tile of
an m x n instruction carries ``min(m, n)`` of them on its diagonal (row i of A,
column i of B, C[i][i]); the other rows, columns and C entries are +0.
``run_tiles`` is the full-throughput form: every one of the m*n outputs of a
tile is a dot product of one A row and one B column.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tcsmt.arith.formats import get_format
from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.device import get_device
from tcsmt.hwcheck.paths import PathSpec, find_path, pad_k

_DEFAULT: dict[str, Any] = {}


def default_device():
    """The CUDA device, created on first use (TcsmtError 'no CUDA device found' without one)."""
    if "dev" not in _DEFAULT:
        _DEFAULT["dev"] = get_device("cuda")
    return _DEFAULT["dev"]


def as_path(path: PathSpec | Sequence[str]) -> PathSpec:
    """A PathSpec from itself or from (in_fmt, out_fmt[, instr])."""
    if isinstance(path, PathSpec):
        return path
    items = list(path)
    if len(items) == 2:
        items.append("mma")
    if len(items) != 3:
        raise TcsmtError(f"a path is (in_fmt, out_fmt, instr), not {path!r}")
    return find_path(*items)


def _bits(x: Any, fmt_name: str, what: str) -> np.ndarray:
    """Patterns of ``x``: run_dot takes bit patterns, so integer arrays of any width are patterns (bits=True)."""
    from tcsmt.sim.simulator import to_bits

    return to_bits(np.asarray(x), get_format(fmt_name), what, bits=True)


def run_tiles(path: PathSpec | Sequence[str], a: np.ndarray, b: np.ndarray, c: np.ndarray,
              device=None) -> np.ndarray:
    """d (T, m, n) = the device's A[t] B[t]^T + C[t] for a (T, m, K), b (T, n, K), c (T, m, n) bit patterns."""
    spec = as_path(path)
    dev = device or default_device()
    return dev.run_tiles(spec, a, b, c)


def run_dot(path: PathSpec | Sequence[str], a_bits: np.ndarray, b_bits: np.ndarray, c_bits: np.ndarray,
            device=None, sa: np.ndarray | None = None, sb: np.ndarray | None = None) -> np.ndarray:
    """Output bit patterns (n,) of n independent dot products a_i . b_i + c_i on the device.

    ``path`` is a PathSpec or (in_fmt, out_fmt, instr) in tcsmt names, e.g.
    ("fp16", "fp32", "mma").  ``a_bits``, ``b_bits``: shape (n, K) patterns of
    the input format (tf32 as uint32 in the fp32 layout, fp8 as uint8, fp64 as
    uint64); ``c_bits``: shape (n,) patterns of the output format.  K is padded
    with +0 products up to a multiple of the instruction's k; the result is that
    of the padded vectors.  On a block-scaled path ``sa``, ``sb`` (n, K / scale_block)
    are the scale patterns of each dot product (K a whole number of instructions);
    without them every scale is 1.  Dot product i sits on the diagonal of its tile
    (row i of A, column i of B), so its scales become row i of the tile's scale_A
    (m, K / scale_block) and column i of its scale_B (n, K / scale_block); the other
    rows and columns get unit scales (:func:`tile_scales`).
    """
    spec = as_path(path)
    a = _bits(a_bits, spec.in_fmt, "a")
    b = _bits(b_bits, spec.fin_b.name, "b")
    c = _bits(c_bits, spec.out_fmt, "c")
    if a.ndim == 1:
        a, b = a[None, :], b[None, :]
    c = c.reshape(-1)
    if a.ndim != 2 or a.shape != b.shape or c.shape != (a.shape[0],):
        raise TcsmtError(f"a, b must have shape (n, K) and c shape (n,); got {a.shape}, {b.shape}, {c.shape}")
    n, K = a.shape
    if K == 0:
        raise TcsmtError("K must be at least 1")
    Kp = pad_k(K, spec)
    per = min(spec.m, spec.n)
    T = -(-n // per)
    at = np.zeros((T, spec.m, Kp), dtype=spec.fin.dtype)
    bt = np.zeros((T, spec.n, Kp), dtype=spec.fin.dtype)
    ct = np.zeros((T, spec.m, spec.n), dtype=spec.c_fmt.dtype)
    idx = np.arange(n)
    t, i = idx // per, idx % per
    at[t, i, :K] = a
    bt[t, i, :K] = b
    ct[t, i, i] = c
    dev = device or default_device()
    if spec.scale_fmt and (sa is not None or sb is not None):
        if Kp != K:
            raise TcsmtError(f"with scale factors, K must be a multiple of {spec.instr_k} for {spec.label}, not {K}")
        sat, sbt = tile_scales(spec, T, Kp, t, i, sa, sb)
        d = dev.run_tiles(spec, at, bt, ct, sa=sat, sb=sbt)
    elif sa is not None or sb is not None:
        raise TcsmtError(f"{spec.label} is not block-scaled: it takes no scale factors")
    else:
        d = dev.run_tiles(spec, at, bt, ct)
    return d[t, i, i]


def tile_scales(spec: PathSpec, T: int, K: int, t: np.ndarray, i: np.ndarray, sa: np.ndarray | None,
                sb: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The tiles' scale patterns, scale_A (T, m, K / scale_block) and scale_B (T, n, K / scale_block): dot product
    (t[j], i[j]) takes row i[j] of its tile's scale_A and column i[j] of its scale_B; every other entry is the
    unit scale (a row of zeros times any scale is zero)."""
    from tcsmt.hwcheck.paths import unit_scale

    m = K // spec.scale_block
    one = unit_scale(spec.scale_fmt)
    fs = get_format(spec.scale_fmt)
    sat = np.full((T, spec.m, m), one, dtype=np.uint8)
    sbt = np.full((T, spec.n, m), one, dtype=np.uint8)
    for name, src, dst in (("sa", sa, sat), ("sb", sb, sbt)):
        if src is None:
            continue
        arr = _bits(src, fs.name, name)
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.shape != (len(t), m):
            raise TcsmtError(f"{name} must have shape ({len(t)}, {m}) (one scale per {spec.scale_block} products), "
                             f"not {arr.shape}")
        dst[t, i, :] = arr
    return sat, sbt


def integer_tiles(spec: PathSpec, T: int, K: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Tiles of small integers (|a|, |b| <= 3, |c| <= 8) whose dot products are exact in every format.

    Returns (a, b, c, expected_d) as bit patterns; every product and partial
    sum is an integer far below the formats' precision, so every correct
    execution gives exactly ``expected_d``, whatever the rounding.
    """
    fin, fb, fc = spec.fin, spec.fin_b, spec.c_fmt
    lim = 3  # -3..3 are exact in every input format (e5m2 too: 3 = 1.1b * 2)
    av = rng.integers(-lim, lim + 1, size=(T, spec.m, K)).astype(np.float64)
    bv = rng.integers(-lim, lim + 1, size=(T, spec.n, K)).astype(np.float64)
    cv = rng.integers(-8, 9, size=(T, spec.m, spec.n)).astype(np.float64)
    if not spec.has_c:
        cv[:] = 0.0
    dv = np.einsum("trk,tjk->trj", av, bv) + cv
    bound = float(2 ** (fc.frac_bits + 1))
    if np.abs(dv).max() >= bound or K * lim * lim >= bound:
        raise TcsmtError(f"K = {K} is too long for an exact integer layout check in {fc.name}")
    enc = lambda v, f: _encode_ints(v, f)  # noqa: E731
    return enc(av, fin), enc(bv, fb), enc(cv, fc), enc(dv, spec.fout)


def _encode_ints(v: np.ndarray, fmt) -> np.ndarray:
    """Bit patterns of float64 array ``v`` of values exact in ``fmt`` (small integers, or multiples of small
    powers of two; +0 for zeros)."""
    from tcsmt.arith.formats import FP64
    from tcsmt.sim.simulator import convert_bits

    bits = convert_bits(np.ascontiguousarray(v, dtype=np.float64).view(np.uint64), FP64, fmt, "rne")
    return bits.astype(fmt.dtype)


def scale_tiles(spec: PathSpec, T: int, K: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                                 np.ndarray]:
    """Power-of-two scales for an exact layout check of a block-scaled path: scale_A (T, m, K / scale_block) and
    scale_B (T, n, K / scale_block) patterns with values 2^-2 .. 2^2, each drawn on its own, and their values.
    Small-integer products times these stay exact in fp32, so a scale byte that reaches the wrong row, column
    or block of the instruction changes the output, whatever the arithmetic's reading."""
    fs = get_format(spec.scale_fmt)
    nb = K // spec.scale_block
    ea = rng.integers(-2, 3, size=(T, spec.m, nb))
    eb = rng.integers(-2, 3, size=(T, spec.n, nb))
    pat = np.array([fs.from_fraction(2.0 ** e) for e in range(-2, 3)], dtype=np.uint8)
    return pat[ea + 2], pat[eb + 2], np.exp2(ea.astype(np.float64)), np.exp2(eb.astype(np.float64))


def check_layout(spec: PathSpec, device=None, tiles: int = 64, seed: int = 1) -> dict[str, Any]:
    """Check a path's fragment layout and k-chaining with exact small-integer inputs.

    Runs ``tiles`` tiles with K = 2 instructions (so the accumulator chaining is
    exercised) and compares every output's value with the exact result; a
    misplaced fragment element changes almost every output.  On a block-scaled
    path every row of A and column of B gets its own power-of-two scale per
    scale block (:func:`scale_tiles`), so the scale bytes' placement is checked
    too.  Returns {"path", "shape", "n", "wrong", "ok", "first_wrong": [...]}.
    """
    dev = device or default_device()
    rng = np.random.default_rng(seed)
    if spec.library:
        tiles = 2  # one tile is a whole GEMM of m*n outputs
    K = 2 * spec.instr_k
    a, b, c, want = integer_tiles(spec, tiles, K, rng)
    if spec.scale_fmt:
        sa, sb, va, vb = scale_tiles(spec, tiles, K, rng)
        fin, fb, fc = spec.fin, spec.fin_b, spec.c_fmt
        av, bv, cv = fin.decode_array(a), fb.decode_array(b), fc.decode_array(c)
        blk = np.arange(K) // spec.scale_block
        dv = np.einsum("trk,tjk->trj", av * va[:, :, blk], bv * vb[:, :, blk]) + cv
        want = _encode_ints(dv, spec.fout)  # exact: multiples of 2^-4 far below 2^24 (integer_tiles' bound)
        got = dev.run_tiles(spec, a, b, c, sa=sa, sb=sb)
    else:
        got = dev.run_tiles(spec, a, b, c)
    fo = spec.fout
    gv, wv = fo.decode_array(got), fo.decode_array(want)
    bad = ~(gv == wv)
    where = np.argwhere(bad)[:5]
    first = [{"tile": int(t), "row": int(r), "col": int(j), "got": float(gv[t, r, j]), "want": float(wv[t, r, j])}
             for t, r, j in where]
    return {"path": spec.label, "shape": spec.shape, "k": K, "n": int(bad.size), "wrong": int(bad.sum()),
            "ok": not bad.any(), "first_wrong": first}
