"""Scale-factor inputs of block-scaled paths: their shape and format, checked before any arithmetic.

A block-scaled path (``ModelParams.scale_fmt`` set: ``mxf8f6f4``, ``mxf4nvf4``) reads two scale
tensors besides A, B and C: ``sa`` with one factor per ``scale_block`` products of each row of A, and
``sb`` likewise for B, each of shape (n, ceil(K / scale_block)) (a single row may be given as a 1-D
array).  The arithmetic they enter is :func:`tcsmt.arith.semantics.scaled_terms`.

A scale tensor holds the scale format's bit patterns as uint8 (ue8m0: 0x00..0xFF, 0xFF = NaN;
ue4m3: 0x00..0x7F, 0x7F = NaN; integer arrays of other widths with ``bits=True``) or float values
that the format holds exactly (ue8m0: powers of two 2^-127..2^127; ue4m3: the non-negative e4m3
values).  A wrong shape, a value the format cannot hold, a pattern out of range, scales for a path
that takes none or none for a path that needs them: each a one-line :class:`TcsmtError`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tcsmt.arith.formats import get_format
from tcsmt.arith.params import ModelParams
from tcsmt.errors import TcsmtError
from tcsmt.sim.inputs import as_patterns


def scale_columns(p: ModelParams, K: int) -> int:
    """Scale factors per row for K products: ceil(K / scale_block) (0 on a path without scales)."""
    return -(-K // p.scale_block) if p.scale_fmt else 0


def _patterns(x: Any, p: ModelParams, what: str, n: int, K: int, bits: bool) -> np.ndarray:
    fmt = get_format(p.scale_fmt)
    arr = np.asarray(x)
    if arr.dtype == object or arr.dtype.kind not in "uif":
        raise TcsmtError(f"{what}: expected {fmt.name} scale values or uint8 bit patterns, got {arr.dtype} data")
    if arr.ndim == 1 and n == 1:
        arr = arr[None, :]
    m = scale_columns(p, K)
    if arr.ndim != 2 or arr.shape[0] != n or arr.shape[1] != m:
        got = "x".join(str(d) for d in arr.shape) or "a scalar"
        raise TcsmtError(f"{what} has shape {got}, but {p.name or 'this path'} scales blocks of {p.scale_block} "
                         f"products: {n} row{'s' if n != 1 else ''} of K = {K} take shape ({n}, {m})")
    if arr.dtype.kind == "f":
        flat = arr.reshape(-1)
        out = np.empty(flat.shape, dtype=fmt.dtype)
        for i, v in enumerate(flat.tolist()):
            try:
                out[i] = fmt.from_fraction(float(v))
            except TcsmtError as exc:
                idx = np.unravel_index(i, arr.shape)
                raise TcsmtError(f"{what}[{int(idx[0])}, {int(idx[1])}]: {exc}") from None
        return out.reshape(arr.shape)
    return as_patterns(arr, fmt, what, bits)


def scale_patterns(p: ModelParams, sa: Any, sb: Any, n: int, K: int, bits: bool = False,
                   source: str | None = None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The scale patterns (uint8, shape (n, ceil(K / scale_block))) of a block-scaled path, checked;
    (None, None) for a path without scales (which then must be given none)."""
    try:
        if not p.scale_fmt:
            if sa is not None or sb is not None:
                raise TcsmtError(f"{p.name or 'this path'} ({p.in_fmt} -> {p.out_fmt}, {p.instr}) takes no scale "
                                 "factors (sa, sb): it is not block-scaled")
            return None, None
        if sa is None or sb is None:
            raise TcsmtError(f"{p.name or 'this path'} is block-scaled: give scale factors sa and sb ({p.scale_fmt}, "
                             f"shape (n, {scale_columns(p, K)}): one per {p.scale_block} products)")
        return _patterns(sa, p, "sa", n, K, bits), _patterns(sb, p, "sb", n, K, bits)
    except TcsmtError as exc:
        if source is None:
            raise
        raise TcsmtError(f"{source}: {exc}") from None
