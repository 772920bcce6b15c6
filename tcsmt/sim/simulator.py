"""Bit-exact vectorised simulator: the semantics of :mod:`tcsmt.arith.semantics` on numpy arrays."""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import Format, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.arith.registry import resolve
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.errors import TcsmtError
from tcsmt.io.limits import SIM_K, as_flag, at_most, require_memory
from tcsmt.sim.block_scale import scale_patterns
from tcsmt.sim.inputs import as_patterns, dot_patterns

_B = NumpyBackend()
CHUNK = 1 << 13  # rows per pass: 64 KiB int64 temporaries stay in cache and in reused heap memory (measured best of 2^11..2^16)


def convert_bits(bits: np.ndarray, src: Format, dst: Format, mode: str = "rne") -> np.ndarray:
    """Convert bit patterns between formats with rounding ``mode`` (exact integer arithmetic)."""
    out = sem.convert(_B, np.asarray(bits), src, dst, mode)
    return np.asarray(out).astype(dst.dtype)


def to_bits(x: np.ndarray, fmt: Format, what: str, bits: bool = False) -> np.ndarray:
    """Bit patterns of ``x`` in ``fmt``: float values, or unsigned patterns of the format's width
    (any integer patterns with ``bits=True``); see :func:`tcsmt.sim.inputs.as_patterns`."""
    return as_patterns(x, fmt, what, bits)


def simulate_params(p: ModelParams, a: np.ndarray, b: np.ndarray, c: np.ndarray, *, bits: bool = False,
                    sa: np.ndarray | None = None, sb: np.ndarray | None = None,
                    progress: Callable[[str], None] | None = None) -> np.ndarray:
    """D = A.B + C row by row under model ``p``.

    ``a`` and ``b`` have shape (n, K), ``c`` shape (n,) (one row may be given
    as (K,) vectors and a scalar c).  Each holds float values exactly
    representable in the path's format (float16, float32, float64; bfloat16
    and fp8 with ml_dtypes), or the format's bit patterns as unsigned integers
    of its storage width (uint16 for fp16/bf16, uint32 for fp32/tf32, uint8
    for fp8, uint64 for fp64); with ``bits=True`` integers of any width are
    bit patterns (float arrays stay values).  Other integer arrays are refused as ambiguous (see
    :mod:`tcsmt.sim.inputs`).  Returns the output format's bit patterns, shape (n,).
    On a path with a B format of its own (``b_fmt``) ``b`` holds that format.  A block-scaled path
    (``scale_fmt``) also needs the scale factors ``sa`` and ``sb``, shape (n, ceil(K / scale_block))
    (:mod:`tcsmt.sim.block_scale`); any other path refuses them.

    K is at most :data:`tcsmt.io.limits.SIM_K`.  Rows go through the semantics in chunks whose
    temporaries stay within :data:`CHUNK_BYTES` (fewer rows per chunk for wide blocks); a run that
    would need more memory than this process can allocate is refused before it starts.
    ``progress`` (if given) gets a line at most every :data:`PROGRESS_SECONDS` seconds.
    """
    if not isinstance(p, ModelParams):
        raise TcsmtError(f"simulate_params needs ModelParams (from tcsmt.resolve), not {type(p).__name__}")
    bits = as_flag(bits, "bits")
    fin, fc, fout = get_format(p.in_fmt), get_format(p.c_fmt), get_format(p.out_fmt)
    ab, bb, cb = dot_patterns(a, b, c, fin, fc, bits, b_fmt=get_format(p.b_format))
    n, K = ab.shape
    at_most(K, SIM_K, "K", "products per dot product in the simulator")
    sap, sbp = scale_patterns(p, sa, sb, n, K, bits)
    rows = chunk_rows(p, K)
    require_memory(min(rows, n) * block_width(p, K) * TERM_BYTES + n * fout.dtype.itemsize,
                   f"simulating {n:,} dot products of K = {K:,} on {p.name}")
    out = np.empty(n, dtype=fout.dtype)
    say = _Throttled(progress)
    for s in range(0, n, rows):
        e = min(n, s + rows)
        a_cols = [ab[s:e, k] for k in range(K)]
        b_cols = [bb[s:e, k] for k in range(K)]
        sa_cols = [sap[s:e, j] for j in range(sap.shape[1])] if sap is not None else []
        sb_cols = [sbp[s:e, j] for j in range(sbp.shape[1])] if sbp is not None else []
        where = f"dot product {s + 1:,}" if e - s == 1 else f"dot products {s + 1:,}..{e:,}"
        each = None if progress is None else (lambda k, where=where: say(f"{where} of {n:,}: {k:,} of {K:,} products"))
        d = sem.dot(_B, p, a_cols, b_cols, cb[s:e], sa_cols, sb_cols, progress=each)
        out[s:e] = np.asarray(d).astype(fout.dtype)
        if progress is not None and e < n:
            say(f"simulated {e:,} of {n:,} dot products")
    return out


TERM_BYTES = 160
"""Memory of one product term while a block is summed (measured: about 135 bytes on the exact reference,
whose terms are the widest), for the chunk size and the memory check."""
CHUNK_BYTES = 256 << 20
"""The temporaries of one chunk of rows stay under this many bytes."""
PROGRESS_SECONDS = 5.0
"""Seconds between two progress lines of one simulation."""


def block_width(p: ModelParams, K: int) -> int:
    """Products summed together by one block of ``p`` on dot products of length K."""
    return max(1, min(K, p.block_k or p.instr_k or K))


def chunk_rows(p: ModelParams, K: int) -> int:
    """Rows per chunk: :data:`CHUNK` at most, fewer where a block's temporaries would pass :data:`CHUNK_BYTES`."""
    return max(1, min(CHUNK, CHUNK_BYTES // (block_width(p, K) * TERM_BYTES)))


class _Throttled:
    """A progress callable that passes on at most one line per :data:`PROGRESS_SECONDS`."""

    def __init__(self, progress: Callable[[str], None] | None):
        self.progress = progress
        self.last = time.monotonic()

    def __call__(self, line: str) -> None:
        now = time.monotonic()
        if self.progress is not None and now - self.last >= PROGRESS_SECONDS:
            self.last = now
            self.progress(line)


def simulate(arch: str, a, b, c, in_fmt: str, out_fmt: str, instr: str | None = None, *,
             bits: bool = False, sa=None, sb=None) -> np.ndarray:
    """Simulate ``arch`` (a model spec: ``volta``, ``volta:carry_bits=2``, ``exact`` ...) on one path.

    Inputs as :func:`simulate_params` describes (``bits=True``: integer arrays are bit patterns;
    ``sa``, ``sb``: the scale factors of a block-scaled path).
    """
    as_flag(bits, "bits")
    p = resolve(arch, in_fmt, out_fmt, instr)
    return simulate_params(p, a, b, c, bits=bits, sa=sa, sb=sb)
